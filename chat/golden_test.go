package chat

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/internal/testjsonl"
)

// Golden is one line of testdata/chat/golden_public.jsonl (exported for
// the external tests).
type Golden struct {
	Name     string `json:"name"`
	Messages []struct {
		Role      string  `json:"role"`
		Content   *string `json:"content"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
	DateString          *string           `json:"date_string"`
	Rendered            string            `json:"rendered"`
	RenderedIDs         []int32           `json:"rendered_ids"`
}

func (g Golden) Input() ([]Message, Options) {
	var msgs []Message
	for _, m := range g.Messages {
		msg := Message{Role: m.Role}
		if m.Content != nil {
			msg.Content = *m.Content
		}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		msgs = append(msgs, msg)
	}
	opt := Options{Tools: g.Tools, AddGenerationPrompt: g.AddGenerationPrompt}
	if g.DateString != nil {
		opt.DateString = *g.DateString
	}
	return msgs, opt
}

const goldenPath = "../testdata/chat/golden_public.jsonl"

func LoadGoldens(t testing.TB) []Golden {
	t.Helper()
	return testjsonl.Read[Golden](t, goldenPath)
}

func TestGoldens(t *testing.T) {
	for _, g := range LoadGoldens(t) {
		t.Run(g.Name, func(t *testing.T) {
			msgs, opt := g.Input()
			got, err := Render(msgs, opt)
			if err != nil {
				t.Fatal(err)
			}
			if got != g.Rendered {
				t.Errorf("Render mismatch\n got: %q\nwant: %q", got, g.Rendered)
			}
			segs, err := RenderSegments(msgs, opt)
			if err != nil {
				t.Fatal(err)
			}
			checkSegments(t, segs, got)
		})
	}
}

// checkSegments checks the Segment invariants against the rendered text.
func checkSegments(t *testing.T, segs []Segment, rendered string) {
	t.Helper()
	var b strings.Builder
	for i, s := range segs {
		b.WriteString(s.Text)
		if s.Text == "" {
			t.Errorf("segment %d is empty", i)
		}
		if s.Special && !isTemplateSpecial(s.Text) {
			t.Errorf("segment %d: special segment %q is not a template special token", i, s.Text)
		}
		if i > 0 && !s.Special && !segs[i-1].Special {
			t.Errorf("segments %d and %d are adjacent plain text", i-1, i)
		}
	}
	if b.String() != rendered {
		t.Errorf("segments concatenate to %q, Render gave %q", b.String(), rendered)
	}
}

func isTemplateSpecial(s string) bool {
	switch s {
	case BeginOfText, StartHeader, EndHeader, EndOfTurn:
		return true
	}
	return false
}
