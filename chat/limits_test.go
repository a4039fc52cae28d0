package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// nestedTool is a function tool whose parameters nest depth arrays.
func nestedTool(name string, depth int) json.RawMessage {
	return json.RawMessage(`{"type":"function","function":{"name":"` + name + `","parameters":` +
		strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}}`)
}

func TestRenderLimits(t *testing.T) {
	user := []Message{{Role: "user", Content: "hi"}}
	many := make([]json.RawMessage, 100)
	for i := range many {
		many[i] = nestedTool(fmt.Sprintf("f%d", i), MaxToolDepth-2)
	}
	wide := json.RawMessage(`{"type":"function","function":{"name":"w","parameters":[` + strings.Repeat(`[1],`, 100000) + `[1]]}}`)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name  string
		opt   Options
		check func(error) bool
		param string
	}{
		{"schema deeper than the bound", Options{Tools: []json.RawMessage{many[0], nestedTool("deep", 997)}},
			func(err error) bool {
				var e *Error
				return errors.As(err, &e) && strings.Contains(e.Message, "deeper than 64")
			}, "tools[1]"},
		{"byte limit", Options{Tools: many, MaxBytes: 64 << 10},
			func(err error) bool { var e *LengthError; return errors.As(err, &e) && e.MaxBytes == 64<<10 }, ""},
		{"cancelled while rendering a tool", Options{Tools: []json.RawMessage{wide}, Context: cancelled},
			func(err error) bool { return errors.Is(err, context.Canceled) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := RenderSegments(user, tt.opt)
			if !tt.check(err) {
				t.Fatalf("err = %v", err)
			}
			var e *Error
			if tt.param != "" && (!errors.As(err, &e) || e.Param != tt.param) {
				t.Fatalf("param of %v, want %s", err, tt.param)
			}
		})
	}
	// Within the bounds the same tools render, and stopping cost nothing:
	// the limits are not reached by the text they would allow.
	full, err := Render(user, Options{Tools: many})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Render(user, Options{Tools: many, MaxBytes: len(full), Context: context.Background()}); err != nil || got != full {
		t.Fatalf("at exactly the limit: %v (%d bytes, want %d)", err, len(got), len(full))
	}
	if _, err := Render(user, Options{Tools: many, MaxBytes: len(full) - 1}); err == nil {
		t.Fatal("one byte over the limit rendered")
	}
}
