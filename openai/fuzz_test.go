package openai_test

import (
	"encoding/json"
	"errors"
	"github.com/hexserve/hexserve/apiconv"
	"math"
	"testing"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/openai"
	"github.com/hexserve/hexserve/tokenizer/tokenizertest"
)

func fuzzParams(t *testing.T) apiconv.Params {
	return apiconv.Params{Tokenizer: tokenizertest.Llama32(t), Defaults: sample.Params{Temperature: 0.6, TopP: 0.9, RepetitionPenalty: 1},
		MaxTokens: 0, Date: "26 Jul 2024"}
}

var fuzzSeeds = []string{
	`{"model":"m","messages":[{"role":"user","content":"Hi"}]}`,
	`{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],"temperature":0,"top_p":1,"n":2,"stop":["\n","END"],"seed":7,"max_tokens":5,"logprobs":true,"top_logprobs":3,"stream":true,"stream_options":{"include_usage":true}}`,
	`{"model":"m","messages":[{"role":"user","content":"weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],"tool_choice":"auto"}`,
	`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"42"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"x"}],"logit_bias":{"42":-100,"7":5.5},"presence_penalty":-2,"frequency_penalty":2,"top_k":40,"min_p":0.05,"repetition_penalty":1.1}`,
	`{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`,
	`{"model":"m","messages":[]}`,
	`{"model":"m","prompt":"Once upon a time","max_tokens":16,"echo":true,"logprobs":2}`,
	`{"model":"m","prompt":[128000,9906,1917],"stop":"."}`,
	`{"model":"m","prompt":[[1,2],[3]]}`,
	`{"model":"m","prompt":["a","b"],"best_of":1,"suffix":""}`,
	`{"model":"m","prompt":"<|begin_of_text|><|start_header_id|>user<|end_header_id|>"}`,
	`{"model":"m","prompt":[999999999]}`,
	`{"temperature":1e400}`,
	`[1,2]`, `null`, `"x"`, `{`, "\xff\xfe", ``,
}

// FuzzChatRequest feeds arbitrary bytes through chat request decoding and
// validation: it never panics, a refusal is a classified invalid-request
// error with a message, and an accepted request satisfies the limits the
// engine relies on.
func FuzzChatRequest(f *testing.F) {
	fuzzRequest(f, openai.FromChatCompletionRequest, func(t *testing.T, _ *openai.ChatCompletionRequest, g *openai.Generation) {
		if g.Request.TopLogprobs > 0 && !g.Request.Logprobs {
			t.Fatalf("top_logprobs %d without logprobs", g.Request.TopLogprobs)
		}
	})
}

// FuzzCompletionRequest is FuzzChatRequest for /v1/completions bodies.
func FuzzCompletionRequest(f *testing.F) {
	fuzzRequest(f, openai.FromCompletionRequest, func(t *testing.T, req *openai.CompletionRequest, g *openai.Generation) {
		if g.Echo != "" && !req.Echo {
			t.Fatalf("echo text without echo")
		}
		if len(req.Prompt.Tokens) == 1 {
			if len(g.Request.Prompt) != len(req.Prompt.Tokens[0]) {
				t.Fatalf("token prompt changed length: %d → %d", len(req.Prompt.Tokens[0]), len(g.Request.Prompt))
			}
			for i, id := range req.Prompt.Tokens[0] {
				if int64(g.Request.Prompt[i]) != id {
					t.Fatalf("token prompt changed at %d", i)
				}
			}
		}
	})
}

// fuzzRequest decodes each body as an R and converts it with from: a
// refusal is checked by checkRefusal, an accepted request by
// checkGeneration and then check.
func fuzzRequest[R any](f *testing.F, from func(*R, apiconv.Params) (*openai.Generation, error), check func(*testing.T, *R, *openai.Generation)) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p := fuzzParams(t)
		var req R
		if json.Unmarshal(body, &req) != nil {
			return
		}
		g, err := from(&req, p)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		checkGeneration(t, g, p)
		check(t, &req, g)
	})
}

func checkRefusal(t *testing.T, err error) {
	t.Helper()
	var inv *inference.InvalidRequestError
	var ce *chat.Error
	switch {
	case errors.As(err, &inv):
		if inv.Message == "" {
			t.Fatalf("invalid-request error without a message (param %q)", inv.Param)
		}
	case errors.As(err, &ce):
		if ce.Message == "" {
			t.Fatalf("chat error without a message (param %q)", ce.Param)
		}
	default:
		t.Fatalf("unclassified refusal (would be a 500): %T %v", err, err)
	}
}

func checkGeneration(t *testing.T, g *openai.Generation, p apiconv.Params) {
	t.Helper()
	r := g.Request
	vocab := p.Tokenizer.VocabSize()
	in := func(name string, v float32, lo, hi float32) {
		if math.IsNaN(float64(v)) || v < lo || v > hi {
			t.Fatalf("accepted %s %v outside [%v, %v]", name, v, lo, hi)
		}
	}
	if len(r.Prompt) == 0 {
		t.Fatalf("accepted an empty prompt")
	}
	for i, id := range r.Prompt {
		if id < 0 || int(id) >= vocab {
			t.Fatalf("accepted token %d at %d outside the vocabulary", id, i)
		}
	}
	switch {
	case r.N < 1 || r.N > openai.MaxN:
		t.Fatalf("accepted n %d", r.N)
	case r.MaxTokens < 0:
		t.Fatalf("accepted max_tokens %d", r.MaxTokens)
	case len(r.Stop) > openai.MaxStops || len(r.Stop) > inference.MaxStops:
		t.Fatalf("accepted %d stop strings", len(r.Stop))
	case r.TopLogprobs < 0 || r.TopLogprobs > openai.MaxTopLogprobs:
		t.Fatalf("accepted top_logprobs %d", r.TopLogprobs)
	case g.IncludeUsage && !g.Stream:
		t.Fatalf("include_usage without stream")
	case r.Sampling.TopK < 0:
		t.Fatalf("accepted top_k %d", r.Sampling.TopK)
	}
	for _, s := range r.Stop {
		if s == "" {
			t.Fatalf("accepted an empty stop string")
		}
	}
	s := r.Sampling
	in("temperature", s.Temperature, 0, 2)
	in("top_p", s.TopP, 0, 1)
	in("min_p", s.MinP, 0, 1)
	in("presence_penalty", s.PresencePenalty, -2, 2)
	in("frequency_penalty", s.FrequencyPenalty, -2, 2)
	in("repetition_penalty", s.RepetitionPenalty, 0, 10)
	for id, b := range s.LogitBias {
		if id < 0 || int(id) >= vocab {
			t.Fatalf("accepted logit_bias token %d", id)
		}
		in("logit_bias", b, -100, 100)
	}
}
