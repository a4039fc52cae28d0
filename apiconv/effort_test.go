package apiconv

import (
	"testing"

	"github.com/hexserve/hexserve/chat"
)

// TestReasoningEffort: none and minimal switch thinking off unless the
// request's kwargs set enable_thinking; other efforts leave it; an unknown
// one is a 400 naming the field.
func TestReasoningEffort(t *testing.T) {
	tests := []struct {
		effort string
		kw     map[string]any
		want   any // enable_thinking after; nil: unset
		bad    bool
	}{
		{"none", nil, false, false},
		{"minimal", map[string]any{"x": 1}, false, false},
		{"none", map[string]any{"enable_thinking": true}, true, false},
		{"high", nil, nil, false},
		{"", nil, nil, false},
		{"max", nil, nil, true},
	}
	for _, tt := range tests {
		opt := chat.Options{Kwargs: tt.kw}
		err := ReasoningEffort(&opt, tt.effort, "reasoning_effort")
		if (err != nil) != tt.bad {
			t.Errorf("%q: err %v", tt.effort, err)
		}
		if got := opt.Kwargs["enable_thinking"]; got != tt.want {
			t.Errorf("%q %v: enable_thinking %v, want %v", tt.effort, tt.kw, got, tt.want)
		}
	}
}
