package apiconv

import (
	"testing"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/tokenizer/tokenizertest"
)

func TestReasoningParserNamed(t *testing.T) {
	cases := []struct {
		name, template, want string
		ok                   bool
	}{
		{"", "{{ bos_token }}<|start_header_id|>", "", true},
		{"", "{%- if enable_thinking %}<think>\n{% endif %}", "qwen3", true},
		{"none", "<think>", "", true},
		{"qwen3", "", "qwen3", true},
		{"deepseek_r1", "", "deepseek_r1", true},
		{"granite", "", "", false},
	}
	for _, tc := range cases {
		p, ok := ReasoningParserNamed(tc.name, tc.template)
		got := ""
		if p != nil {
			got = p.Name
		}
		if got != tc.want || ok != tc.ok {
			t.Errorf("ReasoningParserNamed(%q, %q) = %q %v, want %q %v", tc.name, tc.template, got, ok, tc.want, tc.ok)
		}
	}
}

func TestEffortThinking(t *testing.T) {
	cases := []struct {
		effort   string
		set, off bool
		err      bool
	}{{"", false, false, false}, {"none", true, true, false}, {"minimal", true, true, false},
		{"low", true, false, false}, {"high", true, false, false}, {"max", false, false, true}}
	for _, tc := range cases {
		th, err := EffortThinking(tc.effort, "reasoning_effort")
		if th.Set != tc.set || th.Off != tc.off || (err != nil) != tc.err {
			t.Errorf("%q: %+v %v", tc.effort, th, err)
		}
	}
	for _, tc := range []struct {
		kwargs map[string]any
		th     Thinking
		want   any
	}{
		{nil, Thinking{Set: true, Off: true}, false},
		{nil, Thinking{Set: true}, nil}, // on: the template's default
		{nil, Thinking{}, nil},
		{map[string]any{"enable_thinking": true}, Thinking{Set: true, Off: true}, true}, // chat_template_kwargs win
	} {
		opt := chat.Options{Kwargs: tc.kwargs}
		ApplyThinking(&opt, tc.th)
		if got := opt.Kwargs["enable_thinking"]; got != tc.want {
			t.Errorf("%+v with %v: enable_thinking %v, want %v", tc.th, tc.kwargs, got, tc.want)
		}
	}
}

func TestSplitReasoning(t *testing.T) {
	qwen, _ := ReasoningParserNamed("qwen3", "")
	cases := []struct {
		p                 Params
		given, content    string
		reasoning, answer string
	}{
		{Params{Reasoning: qwen}, "", "<think>\nplan\n</think>\n\nIt is 4.", "plan", "It is 4."},
		{Params{Reasoning: qwen}, "", "plan</think>It is 4.", "plan", "It is 4."},
		{Params{Reasoning: qwen}, "", "no reasoning <think>", "", "no reasoning <think>"},
		{Params{Reasoning: qwen}, "given", "<think>inline</think>x", "given", "x"},
		{Params{}, "", "<think>a</think>b", "", "<think>a</think>b"},
	}
	for _, tc := range cases {
		r, a := tc.p.ReasoningOf(tc.given, tc.content)
		if r != tc.reasoning || a != tc.answer {
			t.Errorf("ReasoningOf(%q, %q) = %q, %q; want %q, %q", tc.given, tc.content, r, a, tc.reasoning, tc.answer)
		}
	}
}

// TestReason: the reasoning starts open after a prompt that opens it,
// closed after one that closes it, and a constrained request whose
// template leaves the opening to the model gets it in its prompt.
func TestReason(t *testing.T) {
	tok := tokenizertest.Llama32(t)
	qwen, _ := ReasoningParserNamed("qwen3", "")
	p := Params{Tokenizer: tok, Reasoning: qwen}
	constrain := func() inference.Constraint { return nil }
	cases := []struct {
		name, prompt string
		constrained  bool
		th           Thinking
		open         bool
		added        string
	}{
		{"opened by the template", "<|im_start|>assistant\n<think>\n", false, Thinking{}, true, ""},
		{"closed by the template", "<|im_start|>assistant\n<think>\n\n</think>\n\n", true, Thinking{}, false, ""},
		{"left to the model", "<|im_start|>assistant\n", false, Thinking{}, false, ""},
		{"constrained: opened here", "<|im_start|>assistant\n", true, Thinking{}, true, "<think>\n"},
		{"constrained, thinking off", "<|im_start|>assistant\n", true, Thinking{Set: true, Off: true}, false, ""},
	}
	for _, tc := range cases {
		r := inference.Request{Prompt: tok.Encode(tc.prompt, false, false)}
		n := len(r.Prompt)
		if tc.constrained {
			r.Constrain = constrain
		}
		p.Reason(&r, Thinking{Budget: 1024, Off: tc.th.Off, Set: tc.th.Set})
		if r.Reasoning == nil || r.Reasoning.Open != tc.open || r.Reasoning.Budget != 1024 {
			t.Fatalf("%s: %+v", tc.name, r.Reasoning)
		}
		if got := tok.Decode(r.Prompt[n:], false); got != tc.added {
			t.Errorf("%s: prompt gained %q, want %q", tc.name, got, tc.added)
		}
		if got := tok.Decode(r.Reasoning.EndTokens, false); got != "\n</think>\n\n" {
			t.Errorf("%s: end tokens %q", tc.name, got)
		}
	}
	var r inference.Request
	Params{Tokenizer: tok}.Reason(&r, Thinking{})
	if r.Reasoning != nil {
		t.Error("no parser, yet a reasoning")
	}
}

func TestSignReasoning(t *testing.T) {
	k1, k2 := []byte("server-one"), []byte("server-two")
	sig := SignReasoning(k1, "plan")
	if !VerifyReasoning(k1, "plan", sig) || VerifyReasoning(k2, "plan", sig) || VerifyReasoning(k1, "plan!", sig) || VerifyReasoning(k1, "plan", "not base64!") {
		t.Error("signatures do not tell keys and texts apart")
	}
}
