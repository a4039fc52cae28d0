package chat

import (
	"encoding/json"
	"testing"

	"github.com/hexserve/hexserve/internal/testjsonl"
)

// TestJinja2Random renders random conversations (tricky whitespace, special
// token strings in content, nested tool JSON with odd number literals,
// duplicate keys, multiple tool calls) and compares with Python Jinja2 output
// recorded by testdata/crosscheck.py; jinja2_kwargs.jsonl adds random
// custom_tools and tools_in_user_message template kwargs.
func TestJinja2Random(t *testing.T) {
	for _, name := range []string{"jinja2_random.jsonl", "jinja2_kwargs.jsonl"} {
		t.Run(name, func(t *testing.T) { checkJinja2File(t, "testdata/"+name, Render) })
	}
}

// checkJinja2File checks render against the Jinja2 renderings in path.
func checkJinja2File(t *testing.T, path string, render func([]Message, Options) (string, error)) {
	lines := testjsonl.Read[json.RawMessage](t, path)
	errs := 0
	for i, raw := range lines {
		line := i + 1
		var c struct {
			Messages []struct {
				Role      string
				Content   string
				ToolCalls []struct {
					Function struct {
						Name      string
						Arguments string // raw JSON text
					}
				} `json:"tool_calls"`
			}
			Tools               []string
			AddGenerationPrompt bool               `json:"add_generation_prompt"`
			DateString          *string            `json:"date_string"`
			CustomTools         *[]json.RawMessage `json:"custom_tools"`
			ToolsInUserMessage  *bool              `json:"tools_in_user_message"`
			Rendered            *string
			Error               *string
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatalf("line %d: %v", line, err)
		}
		var msgs []Message
		for _, m := range c.Messages {
			msg := Message{Role: m.Role, Content: m.Content}
			for _, tc := range m.ToolCalls {
				msg.ToolCalls = append(msg.ToolCalls, ToolCall{Name: tc.Function.Name, Arguments: json.RawMessage(tc.Function.Arguments)})
			}
			msgs = append(msgs, msg)
		}
		opt := Options{AddGenerationPrompt: c.AddGenerationPrompt}
		for _, tool := range c.Tools {
			opt.Tools = append(opt.Tools, json.RawMessage(tool))
		}
		if c.DateString != nil {
			opt.DateString = *c.DateString
		}
		// custom_tools, when given, replaces tools (null: no tools).
		var keys map[string]json.RawMessage
		_ = json.Unmarshal(raw, &keys)
		if _, ok := keys["custom_tools"]; ok {
			opt.Tools = nil
			if c.CustomTools != nil {
				for _, tool := range *c.CustomTools {
					var text string // recorded as raw JSON text
					if err := json.Unmarshal(tool, &text); err != nil {
						t.Fatalf("line %d: custom tool %s", line, tool)
					}
					opt.Tools = append(opt.Tools, json.RawMessage(text))
				}
			}
		}
		opt.ToolsInSystem = c.ToolsInUserMessage != nil && !*c.ToolsInUserMessage
		got, err := render(msgs, opt)
		if c.Error != nil {
			errs++
			if err == nil {
				t.Errorf("line %d: Jinja2 raised %q, Render succeeded", line, *c.Error)
			} else if e, ok := err.(*Error); !ok || e.Message != *c.Error {
				t.Errorf("line %d: error %v (%T), want message %q", line, err, err, *c.Error)
			}
			continue
		}
		if err != nil {
			t.Errorf("line %d: %v", line, err)
			continue
		}
		if got != *c.Rendered {
			t.Errorf("line %d mismatch\n got: %q\nwant: %q", line, got, *c.Rendered)
		}
	}
	if len(lines) < 100 || errs == 0 {
		t.Fatalf("only %d cases (%d errors): regenerate %s", len(lines), errs, path)
	}
}
