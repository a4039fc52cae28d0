package anthropic

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/grammar"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/tokenizer/tokenizertest"
)

func params(t *testing.T) apiconv.Params {
	return apiconv.Params{Tokenizer: tokenizertest.Llama32(t), Date: "26 Jul 2024"}
}

// generation is FromMessagesRequest of body; an error fails t.
func generation(t *testing.T, p apiconv.Params, body string) *Generation {
	t.Helper()
	g, err := FromMessagesRequest(decode(t, body), p)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func decode(t *testing.T, body string) *MessagesRequest {
	t.Helper()
	var r MessagesRequest
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return &r
}

// TestChatMessages checks the conversion of a conversation to the
// template's messages: system blocks joined without Claude Code's billing
// header, tool results as tool messages in order, one call per assistant
// message, thinking dropped, a final assistant text as the prefill.
func TestChatMessages(t *testing.T) {
	r := decode(t, `{"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1;"},{"type":"text","text":"You are terse.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"Use tools."}],
	"messages":[
	{"role":"user","content":"Weather in Paris?"},
	{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"text","text":"Let me look."},
		{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}},{"type":"tool_use","id":"toolu_2","name":"get_time","input":{}}]},
	{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"18C"},{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"noon"}],"is_error":true},{"type":"text","text":"And?"}]},
	{"role":"assistant","content":"It is  \n"}]}`)
	msgs, prefill, err := chatMessages(r.System, r.Messages, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []chat.Message{
		{Role: "system", Content: "You are terse.\n\nUse tools."},
		{Role: "user", Content: "Weather in Paris?"},
		{Role: "assistant", Content: "Let me look."},
		{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}}},
		{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "toolu_2", Name: "get_time", Arguments: json.RawMessage(`{}`)}}},
		{Role: "tool", Content: "18C", ToolCallID: "toolu_1"},
		{Role: "tool", Content: "Error: noon", ToolCallID: "toolu_2"},
		{Role: "user", Content: "And?"},
	}
	if !reflect.DeepEqual(msgs, want) {
		t.Fatalf("messages\n got  %+v\n want %+v", msgs, want)
	}
	if prefill != "It is" {
		t.Fatalf("prefill %q", prefill)
	}
}

// TestPrefillContinuesTheTurn checks that a final assistant text is the
// start of the reply: the prompt is the conversation with the generation
// prompt, followed by the prefill's tokens.
func TestPrefillContinuesTheTurn(t *testing.T) {
	p := params(t)
	base := generation(t, p, `{"max_tokens":5,"messages":[{"role":"user","content":"Hi"}]}`)
	g := generation(t, p, `{"max_tokens":5,"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":[{"type":"text","text":"Hello <|eot_id|> "}]}]}`)
	pre := p.Tokenizer.Encode("Hello <|eot_id|>", false, false) // plain text: no special token
	if want := append(append([]int32{}, base.Request.Prompt...), pre...); !reflect.DeepEqual(g.Request.Prompt, want) {
		t.Fatalf("prompt %v\nwant   %v", g.Request.Prompt, want)
	}
	n, err := CountTokens(decode(t, `{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello <|eot_id|> "}]}`), p)
	if err != nil || n != len(g.Request.Prompt) {
		t.Fatalf("count_tokens %d (%v), want %d", n, err, len(g.Request.Prompt))
	}
}

// TestFromMessagesRequest checks the mapping of the request fields.
func TestFromMessagesRequest(t *testing.T) {
	p := params(t)
	p.Defaults = sample.Params{Temperature: 0.6, TopP: 0.9}
	g := generation(t, p, `{"model":"claude-x","max_tokens":128000,"temperature":0.2,"top_k":5,"stop_sequences":["END"],"stream":true,
		"metadata":{"user_id":"`+strings.Repeat("u", 80)+`"},"thinking":{"type":"adaptive"},"context_management":{"edits":[]},"output_config":{"effort":"medium"},
		"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],
		"tool_choice":{"type":"auto","disable_parallel_tool_use":true},
		"messages":[{"role":"user","content":"Hi"}]}`)
	q := g.Request
	switch {
	case g.Model != "claude-x" || !g.Stream || !g.Single || !reflect.DeepEqual(g.Tools, []string{"get_weather"}):
		t.Fatalf("generation %+v", g)
	case q.MaxTokens != 128000 || q.Sampling.Temperature != 0.2 || q.Sampling.TopP != 0.9 || q.Sampling.TopK != 5:
		t.Fatalf("request %+v", q)
	case !reflect.DeepEqual(q.Stop, []string{"END"}) || !strings.HasPrefix(q.CacheKey, "sha256:") || q.Constrain != nil:
		t.Fatalf("request %+v", q)
	}
	text := tokenizertest.Llama32(t).Decode(q.Prompt, false)
	if !strings.Contains(text, `"name": "get_weather"`) || !strings.Contains(text, `"parameters": {`) {
		t.Fatalf("tools not rendered: %s", text)
	}
}

// TestStream checks the event sequence of a text reply, of a tool call
// (held back while it could be one, then a tool_use block), and of a stop
// sequence.
func TestStream(t *testing.T) {
	types := func(evs []Event) string {
		var s []string
		for _, e := range evs {
			s = append(s, e.Type)
		}
		return strings.Join(s, " ")
	}
	run := func(g *Generation, evs ...inference.Event) []Event {
		st := NewStream(g, "msg_1")
		out := st.Start()
		for _, ev := range evs {
			out = append(out, st.Event(ev)...)
		}
		return out
	}
	done := inference.Event{Done: true, Usage: inference.Usage{PromptTokens: 10, CachedTokens: 4, CompletionTokens: 3}}

	evs := run(&Generation{Model: "m"}, inference.Event{Text: "Hel"}, inference.Event{Text: "lo", Finish: inference.FinishStop, Stop: "END"}, done)
	if got := types(evs); got != "message_start ping content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop" {
		t.Fatalf("text events: %s", got)
	}
	md := evs[6]
	if d := md.Delta.(*MessageDelta); d.StopReason != StopSequence || *d.StopSequence != "END" || *md.Usage != (Usage{InputTokens: 6, OutputTokens: 3, CacheReadInputTokens: 4}) {
		t.Fatalf("message_delta %+v %+v", d, md.Usage)
	}

	g := &Generation{Model: "m", Tools: []string{"f"}}
	evs = run(g, inference.Event{Text: `{"name": "f", `}, inference.Event{Text: `"parameters": {"a": 1}}`, Finish: inference.FinishStop}, done)
	if got := types(evs); got != "message_start ping content_block_start content_block_delta content_block_stop message_delta message_stop" {
		t.Fatalf("tool events: %s", got)
	}
	cb := evs[2].ContentBlock
	if cb.Type != "tool_use" || cb.Name != "f" || !strings.HasPrefix(cb.ID, "toolu_") || string(cb.Input) != "{}" {
		t.Fatalf("tool_use start %+v", cb)
	}
	if d := evs[3].Delta.(*BlockDelta); d.Type != "input_json_delta" || *d.PartialJSON != `{"a":1}` {
		t.Fatalf("input_json_delta %+v", d)
	}
	if d := evs[5].Delta.(*MessageDelta); d.StopReason != StopToolUse {
		t.Fatalf("stop reason %q", d.StopReason)
	}

	// Text that starts like a call but is not one comes out as text.
	evs = run(g, inference.Event{Text: `{"x": 1}`, Finish: inference.FinishLength}, done)
	if got := types(evs); got != "message_start ping content_block_start content_block_delta content_block_stop message_delta message_stop" ||
		*evs[3].Delta.(*BlockDelta).Text != `{"x": 1}` || evs[5].Delta.(*MessageDelta).StopReason != StopMaxTokens {
		t.Fatalf("not a call: %s", got)
	}
}

// TestStreamStartUsage: message_start comes with the first engine event and
// splits the prompt as that event says; started early (a keep-alive), it
// counts the whole prompt as input, and comes only once.
func TestStreamStartUsage(t *testing.T) {
	g := &Generation{Model: "m", Request: inference.Request{Prompt: make([]int32, 10)}}
	start := func(evs []Event) Usage {
		t.Helper()
		if len(evs) < 2 || evs[0].Type != "message_start" || evs[1].Type != "ping" {
			t.Fatalf("events %+v", evs)
		}
		return evs[0].Message.Usage
	}
	st := NewStream(g, "msg_1")
	if u := start(st.Event(inference.Event{Text: "Hi", Usage: inference.Usage{PromptTokens: 10, CachedTokens: 4}})); u != (Usage{InputTokens: 6, CacheReadInputTokens: 4}) {
		t.Fatalf("message_start usage %+v", u)
	}
	if evs := st.Event(inference.Event{Text: "!"}); len(evs) != 1 || evs[0].Type != "content_block_delta" || st.Start() != nil {
		t.Fatalf("second event %+v", evs)
	}
	st = NewStream(g, "msg_2")
	if u := start(st.Start()); u != (Usage{InputTokens: 10}) {
		t.Fatalf("early message_start usage %+v", u)
	}
	if evs := st.Event(inference.Event{Text: "Hi", Usage: inference.Usage{PromptTokens: 10, CachedTokens: 4}}); len(evs) != 2 {
		t.Fatalf("after an early start %+v", evs)
	}
}

// TestToMessage checks the non-streamed reply: content, stop reasons and
// usage, and at most one tool_use with disable_parallel_tool_use.
func TestToMessage(t *testing.T) {
	res := func(text string, f inference.FinishReason, stop string) inference.Result {
		return inference.Result{Choices: []inference.Choice{{Text: text, Finish: f, Stop: stop}},
			Usage: inference.Usage{PromptTokens: 7, CachedTokens: 2, CompletionTokens: 4}}
	}
	g := &Generation{Model: "claude-x", Tools: []string{"f", "g"}, Single: true}
	m := ToMessage(g, "msg_1", res(`[{"name": "f", "parameters": {}}, {"name": "g", "parameters": {"b": true}}]`, inference.FinishStop, ""))
	if len(m.Content) != 1 || m.Content[0].Type != "tool_use" || m.Content[0].Name != "f" || *m.StopReason != StopToolUse || m.Model != "claude-x" {
		t.Fatalf("tool use: %+v", m)
	}
	if m.Usage != (Usage{InputTokens: 5, OutputTokens: 4, CacheReadInputTokens: 2}) {
		t.Fatalf("usage %+v", m.Usage)
	}
	for _, c := range []struct {
		text, stop string
		f          inference.FinishReason
		reason     string
		blocks     int
	}{
		{"Hi", "", inference.FinishStop, StopEndTurn, 1},
		{"Hi", "\n\n", inference.FinishStop, StopSequence, 1},
		{"Hi", "", inference.FinishLength, StopMaxTokens, 1},
		{"Hi", "", inference.FinishTimeout, StopMaxTokens, 1},
		{"Hi", "", inference.FinishContext, StopContextWindow, 1},
		{"", "", inference.FinishStop, StopEndTurn, 0},
	} {
		m := ToMessage(&Generation{}, "msg_1", res(c.text, c.f, c.stop))
		if *m.StopReason != c.reason || len(m.Content) != c.blocks || (c.stop != "") != (m.StopSequence != nil) {
			t.Errorf("%+v: %+v", c, m)
		}
	}
}

// TestForcedToolGrammar checks that tool_choice any and tool build a
// constraint, and that a schema the decoder cannot enforce is a 400 naming
// the keyword.
func TestForcedToolGrammar(t *testing.T) {
	p := params(t)
	var compiled int
	p.Vocab = func() *grammar.Vocab { return nil } // structured outputs on; the matcher is never built here
	p.Compiled = func(*grammar.Grammar) { compiled++ }
	tools := `"tools":[{"name":"a","input_schema":{"type":"object"}},{"name":"b","input_schema":{"type":"object","properties":{"x":{"type":"string","format":"regex"}}}}]`
	if _, err := FromMessagesRequest(decode(t, `{"max_tokens":5,"messages":[{"role":"user","content":"Hi"}],`+tools+`,"tool_choice":{"type":"tool","name":"a"}}`), p); err != nil || compiled != 1 {
		t.Fatalf("tool a: %v (%d)", err, compiled)
	}
	_, err := FromMessagesRequest(decode(t, `{"max_tokens":5,"messages":[{"role":"user","content":"Hi"}],`+tools+`,"tool_choice":{"type":"any"}}`), p)
	var ie *inference.InvalidRequestError
	if !errors.As(err, &ie) || ie.Param != "tools[1].input_schema.properties.x.format" {
		t.Fatalf("any over an unsupported schema: %v", err)
	}
}

// TestForcedNamedToolCut: tool_choice {"type":"tool"} cut by max_tokens
// before the name is complete is still that tool's tool_use (the only name
// possible), whole and streamed; a whole call's stop_reason stays tool_use.
func TestForcedNamedToolCut(t *testing.T) {
	g := &Generation{Model: "m", Tools: []string{"get_weather", "get_time"}, Forced: true, ForcedName: "get_weather"}
	for _, tc := range []struct {
		text   string
		finish inference.FinishReason
		stop   string
	}{
		{`{"name": "get_`, inference.FinishLength, StopMaxTokens},
		{`{"`, inference.FinishLength, StopMaxTokens},
		{`{"name": "get_weather", "parameters": {}}`, inference.FinishStop, StopToolUse},
	} {
		res := inference.Result{Choices: []inference.Choice{{Text: tc.text, Finish: tc.finish}}}
		m := ToMessage(g, "msg_1", res)
		if m.StopReason == nil || *m.StopReason != tc.stop || len(m.Content) != 1 || m.Content[0].Type != "tool_use" || m.Content[0].Name != "get_weather" {
			t.Errorf("%q: %+v", tc.text, m)
		}
		st := NewStream(g, "msg_2")
		var types []string
		for _, ev := range []inference.Event{{Text: tc.text, Finish: tc.finish}, {Done: true}} {
			for _, e := range st.Event(ev) {
				types = append(types, e.Type)
				if e.ContentBlock != nil && (e.ContentBlock.Type != "tool_use" || e.ContentBlock.Name != "get_weather") {
					t.Errorf("%q: stream block %+v", tc.text, e.ContentBlock)
				}
			}
		}
		if !strings.Contains(strings.Join(types, " "), "content_block_start content_block_delta content_block_stop") {
			t.Errorf("%q: stream %v", tc.text, types)
		}
	}
}
