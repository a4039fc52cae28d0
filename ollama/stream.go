package ollama

import (
	"time"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
)

// Meta is fixed for one reply.
type Meta struct {
	Model string    // the name the request used
	Start time.Time // when the request arrived (total_duration runs from it)
	// Now gives created_at and the end of total_duration; nil: time.Now.
	Now func() time.Time
}

func (m Meta) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Stream turns one request's engine events into the lines of an Ollama
// stream (*ChatResponse or *GenerateResponse): a line per text delta, for
// chat with tools the output held back until it is known not to be a tool
// call (then one line with message.tool_calls), and a last line with done,
// done_reason and the metrics. A Stream is not safe for concurrent use.
type Stream struct {
	g      *Generation
	m      Meta
	gate   apiconv.CallGate // tools are offered and the output may still be a call
	reason string
}

// NewStream streams the reply to g.
func NewStream(g *Generation, m Meta) *Stream {
	return &Stream{g: g, m: m, gate: apiconv.NewFormatGate(g.ToolFormat, g.Chat && g.Tools != nil)}
}

// Event returns the lines ev releases. For a Done event with Err set the
// caller sends the error line instead of a done line; none is returned.
func (s *Stream) Event(ev inference.Event) []any {
	if ev.Done {
		if ev.Err != nil {
			return nil
		}
		return []any{s.line("", "", nil, true, s.metrics(ev.Usage, ev.Timings))}
	}
	var out []any
	if ev.Reasoning != "" {
		out = append(out, s.line("", ev.Reasoning, nil, false, nil))
	}
	if text, ok := s.gate.Pass(ev.Text); ok && text != "" {
		out = append(out, s.line(text, "", nil, false, nil))
	}
	switch ev.Finish {
	case "", inference.FinishError, inference.FinishCancelled:
		return out
	}
	s.reason = apiconv.FinishReason(ev.Finish)
	if text, held := s.gate.End(); held {
		if _, calls, ok := s.parseToolCalls(text); ok { // the gate sent the content before them
			out = append(out, s.line("", "", calls, false, nil))
		} else if text != "" {
			out = append(out, s.line(text, "", nil, false, nil))
		}
	}
	return out
}

// Load is the single line answering a load or unload request.
func (s *Stream) Load() any {
	s.reason = s.g.DoneReason
	return s.line("", "", nil, true, nil)
}

// Response builds the whole (non-streamed) reply from the engine's result.
func (s *Stream) Response(res inference.Result) any {
	text, thinking := "", ""
	s.reason = apiconv.FinishReason(res.Finish)
	if len(res.Choices) > 0 {
		text, thinking = res.Choices[0].Text, res.Choices[0].Reasoning
		s.reason = apiconv.FinishReason(res.Choices[0].Finish)
	}
	var calls []ToolCall
	if s.g.Chat {
		if content, c, ok := s.parseToolCalls(text); ok {
			text, calls = content, c
		}
	}
	return s.line(text, thinking, calls, true, s.metrics(res.Usage, res.Timings))
}

// line builds one line (thinking: the model's reasoning); the last has
// done set and carries m.
func (s *Stream) line(text, thinking string, calls []ToolCall, last bool, m *Metrics) any {
	reason := ""
	if last {
		reason = s.reason
	}
	now := s.m.now().UTC()
	if s.g.Chat {
		return &ChatResponse{Model: s.m.Model, CreatedAt: now, Done: last, DoneReason: reason, Metrics: m,
			Message: Message{Role: "assistant", Content: text, Thinking: thinking, ToolCalls: calls}}
	}
	return &GenerateResponse{Model: s.m.Model, CreatedAt: now, Response: text, Thinking: thinking, Done: last, DoneReason: reason, Metrics: m}
}

func (s *Stream) metrics(u inference.Usage, t inference.Timings) *Metrics {
	return &Metrics{TotalDuration: s.m.now().Sub(s.m.Start), LoadDuration: t.QueueWait,
		PromptEvalCount: u.PromptTokens, PromptEvalDuration: t.PromptEval,
		EvalCount: u.CompletionTokens, EvalDuration: t.Generation}
}

// parseToolCalls parses the whole output as content and calls of the
// offered tools; ok is false when it is ordinary content.
func (s *Stream) parseToolCalls(text string) (string, []ToolCall, bool) {
	return apiconv.ToolCallsAs(s.g.ToolFormat, text, s.g.Tools, true, false, func(i int, c chat.ToolCall) ToolCall {
		return ToolCall{ID: c.ID, Function: FunctionCall{Index: i, Name: c.Name, Arguments: c.Arguments}}
	})
}
