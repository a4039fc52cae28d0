package anthropic

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
)

var fuzzSeeds = []string{
	`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"Hi"}]}`,
	`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"x-anthropic-billing-header: a"},{"type":"text","text":"Be brief."}],"messages":[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"assistant","content":"pre"}]}`,
	`{"model":"m","max_tokens":5,"tools":[{"name":"f","input_schema":{"type":"object","properties":{"a":{"type":"integer"}}}}],"tool_choice":{"type":"any","disable_parallel_tool_use":true},"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"tool_use","id":"t1","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"1"}],"is_error":true}]}]}`,
	`{"model":"m","max_tokens":5,"temperature":1,"top_p":0.5,"top_k":3,"stop_sequences":["a"],"metadata":{"user_id":"u"},"thinking":{"type":"adaptive"},"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}},"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","max_tokens":0,"messages":[{"role":"user","content":[{"type":"image"}]}]}`,
	`{"messages":[]}`, `[1]`, `null`, `{`, ``,
}

// FuzzMessagesRequest feeds arbitrary bodies through Messages decoding and
// conversion: it never panics, a refusal is a classified error with a
// message, and an accepted request is one the engine can take.
func FuzzMessagesRequest(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p := params(t)
		p.MaxPromptBytes = 512 * p.Tokenizer.MaxPieceBytes()
		var req MessagesRequest
		if json.Unmarshal(body, &req) != nil {
			return
		}
		g, err := FromMessagesRequest(&req, p)
		if err != nil {
			var ie *inference.InvalidRequestError
			var ce *chat.Error
			var le *chat.LengthError
			switch {
			case errors.As(err, &ie) && ie.Message != "", errors.As(err, &ce), errors.As(err, &le):
			default:
				t.Fatalf("unclassified refusal %T: %v", err, err)
			}
			return
		}
		s := g.Request.Sampling
		switch {
		case len(g.Request.Prompt) == 0 || g.Request.MaxTokens < 1 || g.Request.N != 1:
			t.Fatalf("request %+v", g.Request)
		case s.Temperature < 0 || s.Temperature > 1 || s.TopP < 0 || s.TopP > 1 || s.TopK < 0:
			t.Fatalf("sampling %+v", s)
		case len(g.Request.Stop) > inference.MaxStops:
			t.Fatalf("%d stops", len(g.Request.Stop))
		}
	})
}
