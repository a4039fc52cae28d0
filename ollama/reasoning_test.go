package ollama

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/inference"
)

// TestThink: think maps onto the template's switch, assistant thinking
// comes back as the turn's reasoning, and the reply carries thinking apart
// from content, whole and streamed, in /api/chat and /api/generate.
func TestThink(t *testing.T) {
	qwen, _ := apiconv.ReasoningParserNamed("qwen3", "")
	p := apiconv.Params{Tokenizer: testTok(t), Reasoning: qwen}
	for _, tc := range []struct {
		think string
		want  apiconv.Thinking
	}{{`true`, apiconv.Thinking{Set: true}}, {`false`, apiconv.Thinking{Set: true, Off: true}}, {`"high"`, apiconv.Thinking{Set: true}}, {`null`, apiconv.Thinking{}}} {
		var r ChatRequest
		if err := json.Unmarshal([]byte(`{"model":"m","think":`+tc.think+`,"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello","thinking":"greet"},{"role":"user","content":"2+2?"}]}`), &r); err != nil {
			t.Fatal(err)
		}
		g, err := FromChatRequest(&r, p)
		if err != nil || g.Thinking != tc.want || g.Request.Reasoning == nil {
			t.Errorf("think %s: %v %+v", tc.think, err, g)
		}
		msgs, _ := toChatMessages(r.Messages)
		if msgs[1].ReasoningContent != "greet" {
			t.Errorf("assistant thinking %q", msgs[1].ReasoningContent)
		}
	}
	var gr GenerateRequest
	_ = json.Unmarshal([]byte(`{"model":"m","prompt":"2+2?","raw":true}`), &gr)
	if g, err := FromGenerateRequest(&gr, p); err != nil || g.Request.Reasoning != nil {
		t.Errorf("raw generate: %v %+v", err, g)
	}

	res := inference.Result{Choices: []inference.Choice{{Reasoning: "add", Text: "4", Finish: inference.FinishStop}}}
	for _, chat := range []bool{true, false} {
		s := NewStream(&Generation{Chat: chat}, Meta{Model: "m"})
		b, _ := json.Marshal(s.Response(res))
		var lines []string
		for _, ev := range []inference.Event{{Reasoning: "ad"}, {Reasoning: "d", Text: "4"}, {Finish: inference.FinishStop}, {Done: true}} {
			for _, l := range s.Event(ev) {
				lb, _ := json.Marshal(l)
				lines = append(lines, string(lb))
			}
		}
		whole, first, second := `"response":"4","thinking":"add"`, `"response":"","thinking":"ad"`, `"response":"","thinking":"d"`
		if chat {
			whole, first, second = `"content":"4","thinking":"add"`, `"content":"","thinking":"ad"`, `"content":"","thinking":"d"`
		}
		if !strings.Contains(string(b), whole) || len(lines) != 4 || !strings.Contains(lines[0], first) || !strings.Contains(lines[1], second) ||
			strings.Contains(lines[2], "thinking") {
			t.Errorf("chat %v: %s\n%s", chat, b, strings.Join(lines, "\n"))
		}
	}
}
