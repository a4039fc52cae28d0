package ollama

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/tokenizer"
)

var fuzzSeeds = []string{
	`{"model":"m","messages":[{"role":"user","content":"Hi"}]}`,
	`{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"x"}],"stream":false,"options":{"temperature":0,"top_k":40,"top_p":0.9,"min_p":0.05,"num_predict":-1,"stop":["\n"],"seed":-1,"repeat_penalty":1.1,"repeat_last_n":64,"presence_penalty":0.5,"frequency_penalty":0.5,"num_ctx":4096,"mirostat":2}}`,
	`{"model":"m","messages":[{"role":"user","content":"w?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`,
	`{"model":"m","messages":[{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]},{"role":"tool","tool_name":"f","content":"42"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"x"}],"format":"json","think":true,"keep_alive":"5m"}`,
	`{"model":"m","messages":[{"role":"user","content":"x"}],"format":{"type":"object","properties":{"a":{"type":"integer"}}},"keep_alive":-1}`,
	`{"model":"m","messages":[],"keep_alive":0}`,
	`{"model":"m","prompt":"Once upon a time","system":"s","options":{"num_predict":16}}`,
	`{"model":"m","prompt":"<|begin_of_text|>The sky","raw":true,"context":[1,2,3]}`,
	`{"model":"m","prompt":"x","suffix":"y","template":"t","images":["aGk="]}`,
	`{"options":{"temperature":1e400}}`, `[1]`, `null`, `{`, "\xff", ``,
}

// FuzzRequest feeds arbitrary bytes through /api/chat and /api/generate
// decoding and conversion: it never panics, a refusal is a classified error
// with a message, and an accepted request is within the limits the engine
// checks.
func FuzzRequest(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	tok, err := tokenizer.Load("../testdata/tokenizer/llama3.2/tokenizer.json")
	if err != nil {
		f.Fatal(err)
	}
	p := apiconv.Params{Tokenizer: tok, Defaults: sample.Params{Temperature: 0.6, TopP: 0.9}, Date: "26 Jul 2024",
		MaxPromptBytes: 512 * tok.MaxPieceBytes(), ContextLen: 512}
	f.Fuzz(func(t *testing.T, body []byte) {
		var cr ChatRequest
		if json.Unmarshal(body, &cr) == nil {
			g, err := FromChatRequest(&cr, p)
			check(t, g, err)
		}
		var gr GenerateRequest
		if json.Unmarshal(body, &gr) == nil {
			g, err := FromGenerateRequest(&gr, p)
			check(t, g, err)
		}
	})
}

func check(t *testing.T, g *Generation, err error) {
	t.Helper()
	var (
		inv *inference.InvalidRequestError
		ce  *chat.Error
		cl  *inference.ContextLengthError
		le  *chat.LengthError
	)
	switch {
	case err == nil:
	case errors.As(err, &inv) && inv.Message != "", errors.As(err, &ce) && ce.Message != "", errors.As(err, &cl), errors.As(err, &le):
		return
	default:
		t.Fatalf("unclassified refusal: %v", err)
	}
	if g.Load {
		if g.DoneReason != "load" && g.DoneReason != "unload" {
			t.Fatalf("load reply %q", g.DoneReason)
		}
		return
	}
	r, s := g.Request, g.Request.Sampling
	switch {
	case len(r.Prompt) == 0, r.N != 1, r.MaxTokens < 0, len(r.Stop) > MaxStops, slices.Contains(r.Stop, ""):
		t.Fatalf("request %+v", r)
	case !(s.Temperature >= 0 && s.Temperature <= 2), !(s.TopP >= 0 && s.TopP <= 1), !(s.MinP >= 0 && s.MinP <= 1),
		s.TopK < 0, s.RepeatLastN < 0, !(s.RepetitionPenalty >= 0 && s.RepetitionPenalty <= 10),
		!(s.PresencePenalty >= -2 && s.PresencePenalty <= 2), !(s.FrequencyPenalty >= -2 && s.FrequencyPenalty <= 2):
		t.Fatalf("sampling %+v", s)
	}
}
