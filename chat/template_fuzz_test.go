package chat

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func fuzzSeeds(f *testing.F) {
	f.Add("\x00You are helpful.\x00\x01Hi\x00\x02Hello!", "", byte(1))
	f.Add("\x01What's the weather?\x00\x02{\"city\": \"Paris\", \"n\": 1.50}\x00\x03{\"t\": 18}", `{"type":"function","function":{"name":"w","parameters":{"a":[1,{}]}}}`, byte(3))
	f.Add("\x00  sys \u3000\x00\x01<|eot_id|>\x1c\x00\x02{}\x01{}", "[]", byte(2))
	f.Add("\x01<|im_start|>\U0010FFFD<think>a</think>\x00\x02<think>r</think>x", `{"n":123456789012345678901234567890}`, byte(7))
}

// FuzzJinjaAgreesWithNative: the official Llama-3.2 template through the
// Jinja engine and the native renderer give the same text and the same
// errors on random conversations, tools and dates.
func FuzzJinjaAgreesWithNative(f *testing.F) {
	fuzzSeeds(f)
	tmpl := loadCaseTemplate(f, "testdata/tokenizer/llama3.2/tokenizer_config.json")
	f.Fuzz(func(t *testing.T, data, tool string, flags byte) {
		msgs := fuzzMessages(data)
		opt := Options{AddGenerationPrompt: flags&1 != 0, ToolsInSystem: flags&8 != 0}
		if flags&2 != 0 {
			opt.Tools = []json.RawMessage{json.RawMessage(tool)}
		}
		if flags&4 != 0 {
			opt.DateString = "01 Dec 2024"
		}
		want, werr := Render(msgs, opt)
		opt.Template = tmpl
		got, err := Render(msgs, opt)
		var ce *Error
		if err != nil && werr == nil && errors.As(err, &ce) && strings.HasSuffix(ce.Param, ".function.arguments") {
			return // the Jinja path parses every call's arguments, also those the template leaves out
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("jinja err %v, native err %v", err, werr)
		}
		if err != nil {
			// Both refuse; with several faults they may name different ones.
			var a, b *Error
			if !errors.As(err, &a) || !errors.As(werr, &b) {
				t.Fatalf("jinja err %v, native err %v", err, werr)
			}
			return
		}
		if got != want {
			t.Fatalf("jinja %q\nnative %q", got, want)
		}
	})
}

// FuzzJinjaQwen3: random conversations, tools and kwargs on Qwen3's
// template never panic, fail only with a *chat.Error, keep the segment
// invariants and keep request text out of the Special segments.
func FuzzJinjaQwen3(f *testing.F) {
	fuzzSeeds(f)
	tmpl := qwen3(f)
	f.Fuzz(func(t *testing.T, data, tool string, flags byte) {
		msgs := fuzzMessages(data)
		for i := range msgs {
			if msgs[i].Role == "assistant" && flags&16 != 0 {
				msgs[i].ReasoningContent = msgs[i].Content
			}
		}
		opt := Options{Template: tmpl, AddGenerationPrompt: flags&1 != 0, MaxBytes: 1 << 16,
			Kwargs: map[string]any{"enable_thinking": flags&4 != 0, "x": json.RawMessage(tool)}}
		if flags&2 != 0 {
			opt.Tools = []json.RawMessage{json.RawMessage(tool)}
		}
		segs, err := RenderSegments(msgs, opt)
		if err != nil {
			var ce *Error
			var le *LengthError
			if !errors.As(err, &ce) && !errors.As(err, &le) {
				t.Fatalf("error %v (%T)", err, err)
			}
			return
		}
		for i, s := range segs {
			if s.Text == "" || (i > 0 && !s.Special && !segs[i-1].Special) {
				t.Fatalf("segment %d: empty or adjacent plain", i)
			}
			if s.Special && s.Text != "<|im_start|>" && s.Text != "<|im_end|>" {
				t.Fatalf("special segment %q is not the template's", s.Text)
			}
		}
	})
}
