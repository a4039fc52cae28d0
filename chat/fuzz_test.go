package chat

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// fuzzMessages turns fuzz bytes into a conversation: chunks separated by
// NUL, the first byte of each picks a role (some invalid), and an assistant
// chunk starting with '{' or '[' becomes a tool call with that text as
// arguments ('\x01' inside it separates several calls).
func fuzzMessages(data string) []Message {
	roles := []string{"system", "user", "assistant", "tool", "ipython", "user", "assistant", "developer", ""}
	var msgs []Message
	for _, chunk := range strings.Split(data, "\x00") {
		if chunk == "" {
			continue
		}
		m := Message{Role: roles[int(chunk[0])%len(roles)], Content: chunk[1:]}
		if m.Role == "assistant" && len(m.Content) > 0 && (m.Content[0] == '{' || m.Content[0] == '[') {
			for _, args := range strings.Split(m.Content, "\x01") {
				m.ToolCalls = append(m.ToolCalls, ToolCall{Name: "f", Arguments: json.RawMessage(args)})
			}
		}
		msgs = append(msgs, m)
	}
	return msgs
}

func FuzzRender(f *testing.F) {
	f.Add("\x00You are helpful.\x00\x01Hi\x00\x02Hello!", "", byte(1))
	f.Add("\x01What's the weather?\x00\x02{\"city\": \"Paris\", \"n\": 1.50}\x00\x03{\"t\": 18}", `{"type":"function","function":{"name":"w","parameters":{"a":[1,{}]}}}`, byte(3))
	f.Add("\x00  sys \u3000\x00\x01<|eot_id|>\x1c\x00\x02{}\x01{}", "[]", byte(2))
	f.Add("\x07dev\x00\x01x", "{}", byte(0))
	f.Add("\x00only system", `{"a":1}`, byte(1))
	f.Fuzz(func(t *testing.T, data, tool string, flags byte) {
		msgs := fuzzMessages(data)
		opt := Options{AddGenerationPrompt: flags&1 != 0}
		if flags&2 != 0 {
			opt.Tools = []json.RawMessage{json.RawMessage(tool)}
		}
		if flags&4 != 0 {
			opt.DateString = "01 Dec 2024"
		}
		out, err := Render(msgs, opt)
		segs, serr := RenderSegments(msgs, opt)
		if (err == nil) != (serr == nil) {
			t.Fatalf("Render err %v, RenderSegments err %v", err, serr)
		}
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || ce.Message == "" {
				t.Fatalf("error %v (%T) is not a *chat.Error", err, err)
			}
			return
		}
		if !strings.HasPrefix(out, BeginOfText+StartHeader+"system"+EndHeader) {
			t.Fatalf("bad start: %q", out)
		}
		if opt.AddGenerationPrompt && !strings.HasSuffix(out, StartHeader+"assistant"+EndHeader+"\n\n") {
			t.Fatalf("missing generation prompt: %q", out)
		}
		checkSegments(t, segs, out)
	})
}

func FuzzParseToolCalls(f *testing.F) {
	for _, s := range []string{
		`{"name": "f", "parameters": {"a": 1}}`,
		`<|python_tag|>{"name": "f", "arguments": {}}`,
		`[{"name": "a"}, {"name": "b", "parameters": {"x": [1, "}"]}}]`,
		`{"name": "a"}; {"name": "b"}`,
		`Sure, {"name": "f"}`,
		"\u3000{\"name\": \"f\", \"parameters\": {\"s\": \"\\ud83d\\ude00\"}}",
		`{"name": "f", "parameters": {"a": 1e400}}`,
	} {
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, text string, step uint8) {
		calls, ok := ParseToolCalls(text)
		var whole ToolCallDetector
		d := whole.Feed(text)
		if ok {
			if len(calls) == 0 {
				t.Fatal("ok with no calls")
			}
			for _, c := range calls {
				if c.Name == "" || !json.Valid(c.Arguments) || c.Arguments[0] != '{' || !callIDPattern.MatchString(c.ID) {
					t.Fatalf("bad call %+v", c)
				}
			}
			if d != MaybeCall {
				t.Fatalf("valid call %q decided %v", text, d)
			}
		} else if calls != nil {
			t.Fatal("calls with ok=false")
		}
		// Decisions do not depend on how the text is split.
		n := int(step%7) + 1
		var split ToolCallDetector
		got := Undecided
		for i := 0; i < len(text); i += n {
			next := split.Feed(text[i:min(i+n, len(text))])
			if got != Undecided && next != got {
				t.Fatalf("decision changed from %v to %v", got, next)
			}
			got = next
		}
		if got != d {
			t.Fatalf("split by %d: %v, whole: %v", n, got, d)
		}
	})
}

// FuzzPyJSON checks the JSON parser against encoding/json's validity and
// that the Python-style output is JSON again (except for Infinity).
func FuzzPyJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e3,{}],"b":null}`, `"\ud83d\ude00\u0001"`, `[1E400]`, `{"a":1,"a":2}`, ` -0 `, `[`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseJSON(s)
		tooDeep := err != nil && strings.Contains(err.Error(), "nesting deeper")
		if valid := json.Valid([]byte(s)); (err == nil) != valid && !(valid && tooDeep) {
			t.Fatalf("parseJSON err %v, json.Valid %v", err, valid)
		}
		if err != nil {
			return
		}
		for _, indent := range []int{-1, 4} {
			var b strings.Builder
			writePyJSON(&b, v, indent, 0)
			if out := b.String(); !strings.Contains(out, "Infinity") && !json.Valid([]byte(out)) {
				t.Fatalf("indent %d: output %q is not JSON", indent, out)
			}
		}
		if c := compactJSON(v); !json.Valid(c) {
			t.Fatalf("compact %q is not JSON", c)
		}
	})
}
