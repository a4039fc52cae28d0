package chat

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
)

// TestJinja2Random renders random conversations (tricky whitespace, special
// token strings in content, nested tool JSON with odd number literals,
// duplicate keys, multiple tool calls) and compares with Python Jinja2 output
// recorded by testdata/crosscheck.py.
func TestJinja2Random(t *testing.T) {
	f, err := os.Open("testdata/jinja2_random.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	line, errs := 0, 0
	for sc.Scan() {
		line++
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
			AddGenerationPrompt bool    `json:"add_generation_prompt"`
			DateString          *string `json:"date_string"`
			Rendered            *string
			Error               *string
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
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
		got, err := Render(msgs, opt)
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
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if line < 100 || errs == 0 {
		t.Fatalf("only %d cases (%d errors): regenerate testdata/jinja2_random.jsonl", line, errs)
	}
}
