package openai

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
)

func qwenParams(t *testing.T) apiconv.Params {
	qwen, _ := apiconv.ReasoningParserNamed("qwen3", "")
	return apiconv.Params{Tokenizer: testTok(t), Date: "26 Jul 2024", ContextLen: 4096, Reasoning: qwen}
}

// TestChatReasoningShape: the reasoning is message.reasoning_content and
// usage's reasoning_tokens; without one the field is left out.
func TestChatReasoningShape(t *testing.T) {
	g := &Generation{Request: inference.Request{N: 1}}
	for _, tc := range []struct {
		res  inference.Result
		want []string
		not  string
	}{
		{inference.Result{Choices: []inference.Choice{{Reasoning: "2+2 is 4", Text: "4", Finish: inference.FinishStop}}, Usage: inference.Usage{CompletionTokens: 9, ReasoningTokens: 7}},
			[]string{`"message":{"role":"assistant","content":"4","reasoning_content":"2+2 is 4","refusal":null}`, `"reasoning_tokens":7`}, ""},
		{inference.Result{Choices: []inference.Choice{{Text: "4", Finish: inference.FinishStop}}},
			[]string{`"message":{"role":"assistant","content":"4","refusal":null}`, `"reasoning_tokens":0`}, "reasoning_content"},
	} {
		b, _ := json.Marshal(ToChatCompletion(g, Meta{ID: "chatcmpl-x"}, tc.res))
		for _, w := range tc.want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s\nlacks %s", b, w)
			}
		}
		if tc.not != "" && strings.Contains(string(b), tc.not) {
			t.Errorf("%s\nhas %s", b, tc.not)
		}
	}
}

// TestChatReasoningStream: reasoning deltas come as delta.reasoning_content,
// before the content of the same event, and the usage frame counts them.
func TestChatReasoningStream(t *testing.T) {
	g := &Generation{Request: inference.Request{N: 1}, IncludeUsage: true}
	s := NewChatStream(g, Meta{ID: "chatcmpl-x", Created: 1, Model: "m", Fingerprint: Fingerprint})
	out := frames(t, s, []inference.Event{
		{Reasoning: "2+2", Tokens: []int32{1, 2}},
		{Reasoning: " is 4", Text: "It is", Tokens: []int32{3, 4}},
		{Text: " 4.", Tokens: []int32{5}, Finish: inference.FinishStop},
		{Done: true, Usage: inference.Usage{PromptTokens: 3, CompletionTokens: 5, ReasoningTokens: 3}},
	})
	want := []string{`"delta":{"role":"assistant","content":""}`, `"delta":{"reasoning_content":"2+2"}`, `"delta":{"reasoning_content":" is 4"}`,
		`"delta":{"content":"It is"}`, `"delta":{"content":" 4."}`, `"finish_reason":"stop"`, `"reasoning_tokens":3`}
	if len(out) != len(want) {
		t.Fatalf("%d frames, want %d:\n%s", len(out), len(want), strings.Join(out, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(out[i], w) {
			t.Errorf("frame %d %s lacks %s", i, out[i], w)
		}
	}
}

// TestChatReasoningRequest: reasoning_effort is checked and switches the
// template; chat_template_kwargs reach it as they are; earlier turns'
// reasoning (reasoning_content, reasoning, inline <think>) leaves the
// content and becomes the turn's ReasoningContent.
func TestChatReasoningRequest(t *testing.T) {
	p := qwenParams(t)
	var r ChatCompletionRequest
	_ = json.Unmarshal([]byte(`{"messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"max"}`), &r)
	var ie *inference.InvalidRequestError
	if _, err := FromChatCompletionRequest(&r, p); !errors.As(err, &ie) || ie.Param != "reasoning_effort" {
		t.Fatalf("reasoning_effort max: %v", err)
	}
	r.ReasoningEffort = "none"
	g, err := FromChatCompletionRequest(&r, p)
	if err != nil || g.Request.Reasoning == nil || g.Request.Reasoning.Start != "<think>" {
		t.Fatalf("%v %+v", err, g)
	}
	if g, _ := FromChatCompletionRequest(&r, apiconv.Params{Tokenizer: p.Tokenizer}); g.Request.Reasoning != nil {
		t.Error("a model without a parser got a reasoning")
	}

	var k TemplateKwargs
	_ = json.Unmarshal([]byte(`{"enable_thinking":false,"date_string":"1 Jan 2025","x":{"y":1}}`), &k)
	opt := chat.Options{}
	raw := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if _, err := k.Apply(&opt, nil); err != nil || raw(opt.Kwargs["enable_thinking"]) != "false" || opt.DateString != "1 Jan 2025" || opt.Kwargs["x"] == nil {
		t.Errorf("kwargs %v %+v", err, opt)
	}
	apiconv.ApplyThinking(&opt, apiconv.Thinking{Set: true, Off: true})
	if raw(opt.Kwargs["enable_thinking"]) != "false" {
		t.Error("reasoning_effort overrode chat_template_kwargs")
	}

	var msgs []Message
	_ = json.Unmarshal([]byte(`[{"role":"user","content":"a"},
		{"role":"assistant","content":"A","reasoning_content":"r1"},
		{"role":"assistant","content":"B","reasoning":"r2"},
		{"role":"assistant","content":"<think>\nr3\n</think>\n\nC"}]`), &msgs)
	cm, err := ToChatMessages(msgs)
	if err != nil {
		t.Fatal(err)
	}
	p.SplitTurns(cm)
	for i, w := range [][2]string{{"r1", "A"}, {"r2", "B"}, {"r3", "C"}} {
		if m := cm[i+1]; m.ReasoningContent != w[0] || m.Content != w[1] {
			t.Errorf("turn %d: %q %q, want %q", i+1, m.ReasoningContent, m.Content, w)
		}
	}
}

// TestResponsesReasoning: a reasoning output item before the message (and
// its usage), reasoning input items accepted and given to the next
// assistant turn, and the stream's reasoning events in OpenAI's order.
func TestResponsesReasoning(t *testing.T) {
	p := qwenParams(t)
	var rr ResponseRequest
	_ = json.Unmarshal([]byte(`{"reasoning":{"effort":"low"},"input":[{"role":"user","content":"Hi"},
		{"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"greet back"}]},
		{"role":"assistant","content":"Hello"},{"role":"user","content":"Bye"}]}`), &rr)
	g, err := FromResponseRequest(&rr, nil, p, "resp_x", 0)
	if err != nil {
		t.Fatal(err)
	}
	if g.Request.Reasoning == nil || g.Input[1].ID == "" || *g.Response.Reasoning.Effort != "low" {
		t.Fatalf("%+v %+v", g.Request.Reasoning, g.Input[1])
	}
	msgs, err := itemMessages(g.Input)
	if err != nil || len(msgs) != 3 || msgs[1].ReasoningContent != "greet back" || msgs[1].Content != "Hello" {
		t.Fatalf("%v %+v", err, msgs)
	}
	_ = json.Unmarshal([]byte(`{"input":[{"type":"reasoning","content":[{"type":"output_text","text":"x"}]}]}`), &rr)
	var ie *inference.InvalidRequestError
	if _, err := FromResponseRequest(&rr, nil, p, "resp_x", 0); !errors.As(err, &ie) || ie.Param != "input[0].content[0].type" {
		t.Errorf("reasoning item with an output_text part: %v", err)
	}

	res := inference.Result{Choices: []inference.Choice{{Reasoning: "think", Text: "Bye", Finish: inference.FinishStop}},
		Usage: inference.Usage{CompletionTokens: 5, ReasoningTokens: 3}}
	resp := FinishResponse(g, res)
	b, _ := json.Marshal(resp)
	if len(resp.Output) != 2 || resp.OutputText != "Bye" || !strings.Contains(string(b), `{"type":"reasoning","id":"rs_`) ||
		!strings.Contains(string(b), `"content":[{"type":"reasoning_text","text":"think"}],"summary":[]`) ||
		!strings.Contains(string(b), `"output_tokens_details":{"reasoning_tokens":3}`) {
		t.Errorf("%s", b)
	}

	g, _ = FromResponseRequest(&ResponseRequest{Input: ResponseInput{Set: true, Items: []Item{{Role: "user", Content: ItemContent{{Type: "input_text", Text: "Hi"}}}}}}, nil, p, "resp_y", 0)
	s := NewResponseStream(g)
	var types []string
	for _, ev := range [][]*ResponseEvent{s.Start(),
		s.Event(inference.Event{Reasoning: "th"}), s.Event(inference.Event{Reasoning: "ink", Text: "By"}),
		s.Event(inference.Event{Text: "e", Finish: inference.FinishStop}), s.Event(inference.Event{Done: true})} {
		for _, e := range ev {
			types = append(types, e.Type)
			if e.Type == "response.reasoning_text.done" && *e.Text != "think" {
				t.Errorf("reasoning_text.done %q", *e.Text)
			}
		}
	}
	want := "response.created response.in_progress response.output_item.added response.content_part.added response.reasoning_text.delta " +
		"response.reasoning_text.delta response.reasoning_text.done response.content_part.done response.output_item.done " +
		"response.output_item.added response.content_part.added response.output_text.delta response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done response.completed"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("events\n%s\nwant\n%s", got, want)
	}
	if out := s.Response().Output; len(out) != 2 || out[0].Type != "reasoning" || out[1].Content[0].Text != "Bye" {
		t.Errorf("output %+v", out)
	}
}
