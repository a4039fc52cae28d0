package openai

import (
	"unicode/utf8"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/sample"
)

// Frame is one stream frame: a *ChatCompletionChunk or a *Completion.
type Frame interface {
	setTimings(*Timings)
}

func (e *Envelope[C]) setTimings(t *Timings) { e.Timings = t }

// Stream turns one request's engine events into stream frames, in the order OpenAI sends them:
// Start's frames, content (or tool-call) deltas, one finish frame per
// choice, and with include_usage a last frame with usage and no choices.
// The timings extension rides on the last frame. A Stream is not safe for
// concurrent use.
type Stream struct {
	g       *Generation
	m       Meta
	chat    bool
	choices []choiceState
	pending Frame // the latest finish frame, held back to carry timings
	first   bool
}

type choiceState struct {
	gate   apiconv.CallGate // tools are offered and the output may still be a call
	ids    []int32
	lps    []sample.Logprob
	offset textOffset // completions text_offset of the next token
}

// NewChatStream streams a chat completion.
func NewChatStream(g *Generation, m Meta) *Stream { return newStream(g, m, true) }

// NewCompletionStream streams a text completion.
func NewCompletionStream(g *Generation, m Meta) *Stream { return newStream(g, m, false) }

func newStream(g *Generation, m Meta, isChat bool) *Stream {
	s := &Stream{g: g, m: m, chat: isChat, choices: make([]choiceState, max(g.Request.N, 1)), first: true}
	for i := range s.choices {
		s.choices[i].gate = apiconv.NewFormatGate(g.ToolFormat, isChat && g.Tools != nil)
		s.choices[i].offset = textOffset{chars: utf8.RuneCountInString(g.Echo)}
	}
	return s
}

// Start returns the frames sent before any output: for chat, each choice's
// role delta ({"role":"assistant","content":""}); for completions with
// echo, each choice's prompt text.
func (s *Stream) Start() []Frame {
	var out []Frame
	for i := range s.choices {
		switch {
		case s.chat:
			empty := ""
			out = append(out, s.chatFrame(ChunkChoice{Index: i, Delta: Delta{Role: "assistant", Content: &empty}}))
		case s.g.Echo != "":
			out = append(out, s.textFrame(CompletionChoice{Text: s.g.Echo, Index: i}))
		}
	}
	return out
}

// Event returns the frames ev releases. For a Done event with Err set the
// caller sends the error after these frames; no usage frame is produced.
func (s *Stream) Event(ev inference.Event) []Frame {
	if ev.Done {
		return s.done(ev)
	}
	if ev.Choice < 0 || ev.Choice >= len(s.choices) {
		return nil
	}
	c := &s.choices[ev.Choice]
	var out []Frame
	if ev.Reasoning != "" && s.chat {
		// The event's tokens go with its text when it has some.
		ch := ChunkChoice{Index: ev.Choice, Delta: Delta{ReasoningContent: &ev.Reasoning}}
		if ev.Text == "" {
			s.decorate(&ch.Logprobs, &ch.TokenIDs, ev.Tokens, ev.Logprobs)
			ev.Tokens, ev.Logprobs = nil, nil
		}
		out = append(out, s.chatFrame(ch))
	}
	if ev.Text != "" || len(ev.Tokens) > 0 {
		switch {
		case !s.chat:
			out = append(out, s.textDelta(ev.Choice, c, ev.Text, ev.Tokens, ev.Logprobs))
		case c.gate.Holding():
			c.ids = append(c.ids, ev.Tokens...)
			c.lps = append(c.lps, ev.Logprobs...)
			if text, ok := c.gate.Pass(ev.Text); ok {
				out = append(out, s.contentDelta(ev.Choice, text, c.ids, c.lps))
				c.ids, c.lps = nil, nil
			}
		default:
			out = append(out, s.contentDelta(ev.Choice, ev.Text, ev.Tokens, ev.Logprobs))
		}
	}
	switch ev.Finish {
	case "", inference.FinishError, inference.FinishCancelled:
		// Errors are reported by the Done event; no finish frame.
		return s.release(out, nil)
	}
	reason := finishReason(ev.Finish)
	if text, held := c.gate.End(); held {
		if calls, ok := s.g.ToolCalls(text, ev.Finish); ok {
			out = append(out, s.toolCallDeltas(ev.Choice, calls, c.ids, c.lps)...)
			reason = s.g.callsFinish(reason)
		} else if text != "" || len(c.ids) > 0 {
			out = append(out, s.contentDelta(ev.Choice, text, c.ids, c.lps))
		}
		c.ids, c.lps = nil, nil
	}
	if s.chat {
		return s.release(out, s.chatFrame(ChunkChoice{Index: ev.Choice, FinishReason: &reason}))
	}
	return s.release(out, s.textFrame(CompletionChoice{Index: ev.Choice, FinishReason: &reason}))
}

// release returns the held finish frame followed by out, and holds next.
func (s *Stream) release(out []Frame, next Frame) []Frame {
	if s.pending != nil {
		out = append([]Frame{s.pending}, out...)
	}
	s.pending = next
	return out
}

func (s *Stream) done(ev inference.Event) []Frame {
	var out []Frame
	timings := ToTimings(ev.Usage, ev.Timings)
	usageFrame := s.g.IncludeUsage && ev.Err == nil
	if s.pending != nil {
		if !usageFrame {
			s.pending.setTimings(timings)
		}
		out = append(out, s.pending)
		s.pending = nil
	}
	if usageFrame {
		var f Frame
		if s.chat {
			c := s.chatFrame()
			c.Usage, c.Timings = FrameUsage{Usage: ToUsage(ev.Usage)}, timings
			f = c
		} else {
			c := s.textFrame()
			c.Usage, c.Timings = FrameUsage{Usage: ToUsage(ev.Usage)}, timings
			f = c
		}
		out = append(out, f)
	}
	return out
}

func (s *Stream) contentDelta(i int, text string, ids []int32, lps []sample.Logprob) Frame {
	ch := ChunkChoice{Index: i, Delta: Delta{Content: &text}}
	s.decorate(&ch.Logprobs, &ch.TokenIDs, ids, lps)
	return s.chatFrame(ch)
}

func (s *Stream) toolCallDeltas(i int, calls []ToolCall, ids []int32, lps []sample.Logprob) []Frame {
	var out []Frame
	for j, call := range calls {
		head := ChunkChoice{Index: i, Delta: Delta{ToolCalls: []ToolCallDelta{{Index: j, ID: call.ID, Type: "function",
			Function: FunctionCallDelta{Name: call.Function.Name}}}}}
		if j == 0 {
			s.decorate(&head.Logprobs, &head.TokenIDs, ids, lps)
		}
		args := ChunkChoice{Index: i, Delta: Delta{ToolCalls: []ToolCallDelta{{Index: j,
			Function: FunctionCallDelta{Arguments: string(call.Function.Arguments)}}}}}
		out = append(out, s.chatFrame(head), s.chatFrame(args))
	}
	return out
}

func (s *Stream) decorate(lp **ChatLogprobs, tids *[]int32, ids []int32, lps []sample.Logprob) {
	if s.g.Request.Logprobs {
		*lp = chatLogprobs(lps)
	}
	if s.g.ReturnTokenIDs {
		*tids = nonNil(ids)
	}
}

func (s *Stream) textDelta(i int, c *choiceState, text string, ids []int32, lps []sample.Logprob) Frame {
	ch := CompletionChoice{Text: text, Index: i}
	if s.g.Request.Logprobs {
		ch.Logprobs = completionLogprobs(lps, &c.offset)
	}
	if s.g.ReturnTokenIDs {
		ch.TokenIDs = nonNil(ids)
	}
	return s.textFrame(ch)
}

func (s *Stream) chatFrame(choices ...ChunkChoice) *ChatCompletionChunk {
	return frame(s, "chat.completion.chunk", choices)
}

func (s *Stream) textFrame(choices ...CompletionChoice) *Completion {
	return frame(s, "text_completion", choices)
}

// frame is one of s's frames with the given choices (an empty list for
// none) and what every frame carries: a null usage when the final usage
// frame was asked for, and the prompt's ids on the first frame.
func frame[C any](s *Stream, object string, choices []C) *Envelope[C] {
	f := newEnvelope(s.m, object, choices)
	if f.Choices == nil {
		f.Choices = []C{}
	}
	if s.g.IncludeUsage {
		f.Usage = FrameUsage{Null: true}
	}
	if s.first && s.g.ReturnTokenIDs {
		f.PromptTokenIDs = nonNil(s.g.Request.Prompt)
	}
	s.first = false
	return f
}
