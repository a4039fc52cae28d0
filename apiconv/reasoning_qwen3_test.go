package apiconv

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/tokenizer"
	"github.com/hexserve/hexserve/tokenizer/tokenizertest"
)

// TestReasonQwen3 renders with Qwen3's and Qwen3-2507's own templates and
// tokenizer (from ../shared): thinking off renders enable_thinking false
// (the empty think block in the prompt: the reply starts as the answer),
// on leaves the reply to open it, a turn's reasoning after the last user
// message is rendered, and the forced end is Qwen3's one </think> token.
// (The 2507 Thinking template, which opens <think> itself, is not in
// ../shared; TestReason covers a prompt that ends inside <think>.)
func TestReasonQwen3(t *testing.T) {
	qwen3 := tokenizertest.FamilyDir(t, "qwen3")
	dir := filepath.Dir(qwen3)
	tok, err := tokenizer.Load(qwen3 + "/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	qwen, _ := ReasoningParserNamed("", "<think>")
	p := Params{Tokenizer: tok, Reasoning: qwen}
	msgs := []chat.Message{{Role: "user", Content: "Weather in Paris?"},
		{Role: "assistant", ReasoningContent: "Call the tool.", ToolCalls: []chat.ToolCall{{ID: "c1", Name: "get_weather", Arguments: []byte(`{"city":"Paris"}`)}}},
		{Role: "tool", Content: "18C", ToolCallID: "c1"}}
	for _, tc := range []struct {
		name, template string
		th             Thinking
		open, closed   bool
	}{
		{"qwen3", "qwen3", Thinking{}, false, false},
		{"qwen3, thinking off", "qwen3", Thinking{Set: true, Off: true}, false, true},
		{"qwen3-2507 instruct", "qwen3-2507", Thinking{}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, ok, err := chat.LoadTemplate(os.ReadFile, dir+"/"+tc.template)
			if err != nil || !ok {
				t.Fatal(ok, err)
			}
			opt := chat.Options{Template: tmpl, AddGenerationPrompt: true}
			ApplyThinking(&opt, tc.th)
			var r inference.Request
			if r.Prompt, err = EncodeChat(tok, msgs, opt, ""); err != nil {
				t.Fatal(err)
			}
			p.Reason(&r, tc.th)
			text := tok.Decode(r.Prompt, false)
			if r.Reasoning.Open != tc.open || strings.HasSuffix(text, "</think>\n\n") != tc.closed ||
				!strings.Contains(text, "<think>\nCall the tool.\n</think>") {
				t.Errorf("open %v; prompt %q", r.Reasoning.Open, text)
			}
			end, _ := tok.TokenID("</think>")
			if !slices.Contains(r.Reasoning.EndTokens, end) || len(r.Reasoning.EndTokens) > 3 {
				t.Errorf("end tokens %v (</think> is %d)", r.Reasoning.EndTokens, end)
			}
		})
	}
}
