package apiconv

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/tokenizer/tokenizertest"
)

// TestChatSink: a context shift keeps the rendered system prefix: BOS, the
// system messages and the tools (in the first user message, with the
// Llama 3.x template), and no text of the turns after them.
func TestChatSink(t *testing.T) {
	tok := tokenizertest.Llama32(t)
	p := Params{Tokenizer: tok}
	tool := json.RawMessage(`{"type":"function","function":{"name":"get_weather","parameters":{}}}`)
	user := chat.Message{Role: "user", Content: "first question"}
	later := []chat.Message{{Role: "assistant", Content: "an answer"}, {Role: "user", Content: "second question"}}
	cases := []struct {
		name      string
		msgs      []chat.Message
		tools     bool
		has, hasn []string // the sink's text contains each of has, none of hasn
	}{
		{"system", append([]chat.Message{{Role: "system", Content: "You are terse."}, user}, later...), false,
			[]string{"<|begin_of_text|>", "You are terse.<|eot_id|>"}, []string{"first question", "an answer"}},
		{"no system: the template's own system header", append([]chat.Message{user}, later...), false,
			[]string{"<|begin_of_text|>", "<|eot_id|>"}, []string{"first question", "an answer"}},
		{"tools in the first user message", append([]chat.Message{{Role: "system", Content: "Sys"}, user}, later...), true,
			[]string{"Sys", "get_weather"}, []string{"first question", "an answer"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opt := p.ChatOptions()
			if tc.tools {
				opt.Tools = []json.RawMessage{tool}
			}
			prompt, err := EncodeChat(tok, tc.msgs, opt, "")
			if err != nil {
				t.Fatal(err)
			}
			n := p.ChatSink(tc.msgs, opt, prompt)
			text := tok.Decode(prompt[:n], false)
			for _, s := range tc.has {
				if !strings.Contains(text, s) {
					t.Errorf("sink %q lacks %q", text, s)
				}
			}
			for _, s := range tc.hasn {
				if strings.Contains(text, s) {
					t.Errorf("sink %q holds %q", text, s)
				}
			}
			r := inference.Request{Prompt: prompt}
			if p.ShiftChat(&r, false, tc.msgs, opt); r.ContextShift || r.Keep != 0 {
				t.Errorf("off: %v %d", r.ContextShift, r.Keep)
			}
			if p.ShiftChat(&r, true, tc.msgs, opt); !r.ContextShift || r.Keep != n {
				t.Errorf("on: %v %d, want %d", r.ContextShift, r.Keep, n)
			}
		})
	}
}

// TestTextSink: a raw prompt keeps BOS and n_keep tokens, at least its
// first token, at most all of it.
func TestTextSink(t *testing.T) {
	tok := tokenizertest.Llama32(t)
	p := Params{Tokenizer: tok}
	bos := tok.Specials().BOS
	cases := []struct {
		prompt      []int32
		nKeep, want int
	}{
		{[]int32{bos, 5, 6, 7}, 0, 1},
		{[]int32{bos, 5, 6, 7}, 2, 3},
		{[]int32{5, 6, 7}, 0, 1},
		{[]int32{5, 6, 7}, 2, 2},
		{[]int32{bos, 5}, 9, 2},
	}
	for _, tc := range cases {
		if got := p.TextSink(tc.prompt, tc.nKeep); got != tc.want {
			t.Errorf("TextSink(%v, %d) = %d, want %d", tc.prompt, tc.nKeep, got, tc.want)
		}
	}
}

// TestContextShiftSetting: the request's field wins, then the model's,
// then the API's default.
func TestContextShiftSetting(t *testing.T) {
	on, off := true, false
	cases := []struct {
		field, model *bool
		def, want    bool
	}{
		{nil, nil, false, false},
		{nil, nil, true, true},
		{nil, &on, false, true},
		{nil, &off, true, false},
		{&on, &off, false, true},
		{&off, &on, true, false},
	}
	for _, tc := range cases {
		if got := (Params{Shift: tc.model}).ContextShift(tc.field, tc.def); got != tc.want {
			t.Errorf("%+v: %v", tc, got)
		}
	}
}
