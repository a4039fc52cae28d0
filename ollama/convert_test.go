package ollama

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/tokenizer/tokenizertest"
)

var testTok = tokenizertest.Llama32

// TestOptions maps Ollama's options onto the engine's sampling and limits.
func TestOptions(t *testing.T) {
	tok := testTok(t)
	defaults := sample.Params{Temperature: 0.6, TopP: 0.9, RepetitionPenalty: 1.1}
	p := apiconv.Params{Tokenizer: tok, Defaults: defaults, ContextLen: 512}
	seed := int64(7)
	tests := []struct {
		name    string
		options string
		top     string // top-level fields after options
		check   func(r inference.Request) bool
	}{
		{"defaults: the server's, Ollama's repeat_last_n, until the window is full", ``, ``, func(r inference.Request) bool {
			s := r.Sampling
			return s.Temperature == 0.6 && s.TopP == 0.9 && s.RepetitionPenalty == 1.1 && s.RepeatLastN == 64 && s.Seed == nil && r.MaxTokens == 0
		}},
		{"sampling", `"temperature":0,"top_k":40,"top_p":0.5,"min_p":0.05,"seed":7,"presence_penalty":1,"frequency_penalty":-1,"repeat_penalty":1.3`, ``,
			func(r inference.Request) bool {
				s := r.Sampling
				return s.Temperature == 0 && s.TopK == 40 && s.TopP == 0.5 && s.MinP == 0.05 && s.Seed != nil && *s.Seed == seed &&
					s.PresencePenalty == 1 && s.FrequencyPenalty == -1 && s.RepetitionPenalty == 1.3
			}},
		{"seed -1 is random, top_k 0 and below off", `"seed":-1,"top_k":-3`, ``, func(r inference.Request) bool {
			return r.Sampling.Seed == nil && r.Sampling.TopK == 0
		}},
		{"repeat_last_n 0 turns the penalty off", `"repeat_last_n":0`, ``, func(r inference.Request) bool {
			return r.Sampling.RepetitionPenalty == 0
		}},
		{"repeat_last_n -1 is the whole sequence", `"repeat_last_n":-1`, ``, func(r inference.Request) bool {
			return r.Sampling.RepeatLastN == 0 && r.Sampling.RepetitionPenalty == 1.1
		}},
		{"repeat_last_n N", `"repeat_last_n":16`, ``, func(r inference.Request) bool { return r.Sampling.RepeatLastN == 16 }},
		{"num_predict", `"num_predict":12`, ``, func(r inference.Request) bool { return r.MaxTokens == 12 }},
		{"num_predict -1 and -2", `"num_predict":-2`, ``, func(r inference.Request) bool { return r.MaxTokens == 0 }},
		{"num_ctx bounds prompt and output without shift", `"num_ctx":100`, `,"shift":false`, func(r inference.Request) bool {
			return r.MaxTokens == 100-len(r.Prompt) && !r.ContextShift
		}},
		{"num_ctx past the window is clamped without shift", `"num_ctx":100000,"num_predict":100000`, `,"shift":false`, func(r inference.Request) bool {
			return r.MaxTokens == 512-len(r.Prompt)
		}},
		{"shift (the default) goes on past num_ctx, keeping the system prefix", `"num_ctx":100`, ``, func(r inference.Request) bool {
			return r.MaxTokens == 0 && r.ContextShift && r.Keep > 1 && r.Keep < len(r.Prompt)
		}},
		{"shift with num_predict", `"num_ctx":100000,"num_predict":100000`, `,"shift":true`, func(r inference.Request) bool {
			return r.MaxTokens == 100000 && r.ContextShift
		}},
		{"stop", `"stop":["\n\n","END"]`, ``, func(r inference.Request) bool { return strings.Join(r.Stop, "|") == "\n\n|END" }},
		{"ignored options", `"num_keep":5,"mirostat":2,"num_gpu":99,"use_mmap":false,"typical_p":0.7,"whatever":"x"`, ``,
			func(r inference.Request) bool { return r.Sampling.Temperature == 0.6 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req ChatRequest
			body := `{"model":"m","messages":[{"role":"user","content":"Hi"}],"options":{` + tt.options + `}` + tt.top + `}`
			if err := json.Unmarshal([]byte(body), &req); err != nil {
				t.Fatal(err)
			}
			g, err := FromChatRequest(&req, p)
			if err != nil {
				t.Fatal(err)
			}
			if !g.Stream || !g.Chat || g.Request.N != 1 || !tt.check(g.Request) {
				t.Fatalf("request %+v", g.Request)
			}
		})
	}
}

// TestStreamToolCallDetection: text that starts like a call but is not one
// is released as content; a call is one tool_calls line.
func TestStreamToolCallDetection(t *testing.T) {
	now := time.Unix(1700000000, 0)
	m := Meta{Model: "llama3.2", Start: now, Now: func() time.Time { return now }}
	feed := func(deltas ...string) []any {
		s := NewStream(&Generation{Chat: true, Tools: []string{"f"}}, m)
		var out []any
		for i, d := range deltas {
			ev := inference.Event{Text: d}
			if i == len(deltas)-1 {
				ev.Finish = inference.FinishStop
			}
			out = append(out, s.Event(ev)...)
		}
		return append(out, s.Event(inference.Event{Done: true, Usage: inference.Usage{PromptTokens: 3, CompletionTokens: 2}})...)
	}
	lines := feed(`{"name": "f", `, `"parameters": {"x": 1}}`)
	if len(lines) != 2 {
		t.Fatalf("lines %v", lines)
	}
	call := lines[0].(*ChatResponse)
	if call.Done || len(call.Message.ToolCalls) != 1 || string(call.Message.ToolCalls[0].Function.Arguments) != `{"x":1}` {
		t.Fatalf("call line %+v", call)
	}
	done := lines[1].(*ChatResponse)
	if !done.Done || done.DoneReason != "stop" || done.Metrics == nil || done.PromptEvalCount != 3 || done.EvalCount != 2 {
		t.Fatalf("done line %+v", done)
	}
	lines = feed(`{"name": "g", `, `"parameters": {}}`) // not an offered tool
	if c := lines[0].(*ChatResponse); len(lines) != 2 || c.Message.Content != `{"name": "g", "parameters": {}}` || c.Message.ToolCalls != nil {
		t.Fatalf("unknown tool: %+v", lines)
	}
	lines = feed("Hello", " there")
	if len(lines) != 3 || lines[0].(*ChatResponse).Message.Content != "Hello" || lines[1].(*ChatResponse).Message.Content != " there" {
		t.Fatalf("text: %+v", lines)
	}
}

// TestTemplate shows the rendered template with the placeholders.
func TestTemplate(t *testing.T) {
	got := Template("26 Jul 2024")
	want := "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n" +
		"{{ .System }}<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n{{ .Prompt }}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	if got != want {
		t.Fatalf("template %q", got)
	}
}

// TestShowModelInfo: model_info carries the shape keys Ollama sends, under
// the family's prefix, for the sizes the card knows, and none it does not.
func TestShowModelInfo(t *testing.T) {
	c := Card{Name: "m", Family: "llama", ContextLen: 512, VocabSize: 128256,
		Arch: Arch{Params: 1235814400, Hidden: 2048, Layers: 16, FFN: 8192, Heads: 32, KVHeads: 8}}
	want := map[string]any{"general.architecture": "llama", "general.basename": "m", "general.parameter_count": int64(1235814400),
		"llama.context_length": 512, "llama.vocab_size": 128256, "llama.embedding_length": int64(2048), "llama.block_count": int64(16),
		"llama.attention.head_count": int64(32), "llama.attention.head_count_kv": int64(8), "llama.feed_forward_length": int64(8192)}
	if got := Show(c).ModelInfo; !reflect.DeepEqual(got, want) {
		t.Fatalf("model_info %v,\nwant %v", got, want)
	}
	c.Arch = Arch{Hidden: 64}
	if got := Show(c).ModelInfo; len(got) != 5 || got["llama.embedding_length"] != int64(64) || got["general.parameter_count"] != nil {
		t.Fatalf("model_info with one size known: %v", got)
	}
}
