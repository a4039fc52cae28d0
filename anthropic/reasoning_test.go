package anthropic

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/inference"
)

func qwenParams(t *testing.T) apiconv.Params {
	p := params(t)
	p.Reasoning, _ = apiconv.ReasoningParserNamed("qwen3", "")
	p.ReasoningKey = []byte("test-key")
	return p
}

// TestThinkingValidation: thinking is checked as Anthropic checks it.
func TestThinkingValidation(t *testing.T) {
	p := qwenParams(t)
	user := `"messages":[{"role":"user","content":"Hi"}]`
	tool := `"tools":[{"name":"f","input_schema":{"type":"object"}}]`
	for _, tc := range []struct {
		body, param, msg string
		want             apiconv.Thinking
	}{
		{`{"max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},` + user + `}`, "", "", apiconv.Thinking{Set: true, Budget: 1024}},
		{`{"max_tokens":2048,"thinking":{"type":"disabled"},` + user + `}`, "", "", apiconv.Thinking{Set: true, Off: true}},
		{`{"max_tokens":2048,"thinking":{"type":"adaptive"},` + user + `}`, "", "", apiconv.Thinking{Set: true}},
		{`{"max_tokens":2048,` + user + `}`, "", "", apiconv.Thinking{}},
		{`{"max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1023},` + user + `}`, "thinking.enabled.budget_tokens", "greater than or equal to 1024", apiconv.Thinking{}},
		{`{"max_tokens":2048,"thinking":{"type":"enabled"},` + user + `}`, "thinking.enabled.budget_tokens", "Field required", apiconv.Thinking{}},
		{`{"max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":2048},` + user + `}`, "max_tokens", "`max_tokens` must be greater than `thinking.budget_tokens`", apiconv.Thinking{}},
		{`{"max_tokens":2048,"thinking":{"type":"on"},` + user + `}`, "thinking.type", "does not match any of the expected tags", apiconv.Thinking{}},
		{`{"max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},"tool_choice":{"type":"any"},` + tool + `,` + user + `}`, "tool_choice", "Thinking may not be enabled when tool_choice forces tool use.", apiconv.Thinking{}},
	} {
		g, err := FromMessagesRequest(decode(t, tc.body), p)
		if tc.param == "" {
			if err != nil || g.Thinking != tc.want || g.Request.Reasoning == nil || g.Request.Reasoning.Budget != tc.want.Budget {
				t.Errorf("%s: %v %+v", tc.body, err, g)
			}
			continue
		}
		var ie *inference.InvalidRequestError
		if !errors.As(err, &ie) || ie.Param != tc.param || !strings.Contains(ie.Message, tc.msg) {
			t.Errorf("%s: %v, want %s: %s", tc.body, err, tc.param, tc.msg)
		}
	}
}

// TestThinkingBlocksBack: a thinking block this server signed becomes the
// turn's reasoning; one it cannot verify (another server's, or from before
// a restart) is dropped; one without a signature is a 400.
func TestThinkingBlocksBack(t *testing.T) {
	key := []byte("test-key")
	sig := apiconv.SignReasoning(key, "look it up")
	body := func(sig string) string {
		return `{"max_tokens":64,"messages":[{"role":"user","content":"Weather?"},{"role":"assistant","content":[{"type":"thinking","thinking":"look it up","signature":"` + sig + `"},
			{"type":"redacted_thinking","data":"abc"},{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"18C"}]}]}`
	}
	for _, tc := range []struct{ sig, want string }{{sig, "look it up"}, {apiconv.SignReasoning([]byte("other"), "look it up"), ""}} {
		r := decode(t, body(tc.sig))
		msgs, _, err := chatMessages(r.System, r.Messages, key)
		if err != nil || len(msgs) != 3 || msgs[1].ReasoningContent != tc.want || len(msgs[1].ToolCalls) != 1 {
			t.Errorf("signature %s: %v %+v", tc.sig, err, msgs)
		}
	}
	r := decode(t, strings.Replace(body(sig), `,"signature":"`+sig+`"`, "", 1))
	var ie *inference.InvalidRequestError
	if _, _, err := chatMessages(r.System, r.Messages, key); !errors.As(err, &ie) || ie.Param != "messages[1].content[0].signature" {
		t.Errorf("no signature: %v", err)
	}
}

// TestThinkingReply: the reasoning is a signed thinking block before the
// text, whole and streamed (thinking_delta, then signature_delta).
func TestThinkingReply(t *testing.T) {
	p := qwenParams(t)
	g := generation(t, p, `{"max_tokens":64,"messages":[{"role":"user","content":"2+2?"}]}`)
	m := ToMessage(g, "msg_x", inference.Result{Choices: []inference.Choice{{Reasoning: "add them", Text: "4", Finish: inference.FinishStop}}})
	if len(m.Content) != 2 || m.Content[0].Type != "thinking" || *m.Content[0].Thinking != "add them" ||
		!apiconv.VerifyReasoning(p.ReasoningKey, "add them", *m.Content[0].Signature) || *m.Content[1].Text != "4" {
		b, _ := json.Marshal(m)
		t.Fatalf("%s", b)
	}

	s := NewStream(g, "msg_x")
	var lines []string
	for _, evs := range [][]Event{s.Start(), s.Event(inference.Event{Reasoning: "add"}), s.Event(inference.Event{Reasoning: " them", Text: "4"}),
		s.Event(inference.Event{Finish: inference.FinishStop}), s.Event(inference.Event{Done: true})} {
		for _, e := range evs {
			b, _ := json.Marshal(e)
			lines = append(lines, string(b))
		}
	}
	sig, _ := json.Marshal(apiconv.SignReasoning(p.ReasoningKey, "add them"))
	want := []string{`"message_start"`, `"ping"`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"add"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":" them"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":` + string(sig) + `}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"4"}}`,
		`{"type":"content_block_stop","index":1}`, `"message_delta"`, `"message_stop"`}
	if len(lines) != len(want) {
		t.Fatalf("%d events, want %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("event %d %s lacks %s", i, lines[i], w)
		}
	}
}
