package anthropic

import (
	"strings"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/inference"
)

// Event is one streamed event; Type is also the SSE event name. Which
// fields are set depends on the type, as in Anthropic's API.
type Event struct {
	Type         string        `json:"type"`
	Message      *Message      `json:"message,omitempty"`       // message_start
	Index        *int          `json:"index,omitempty"`         // content_block_*
	ContentBlock *ContentBlock `json:"content_block,omitempty"` // content_block_start
	// Delta is a *BlockDelta (content_block_delta) or a *MessageDelta
	// (message_delta).
	Delta any          `json:"delta,omitempty"`
	Usage *Usage       `json:"usage,omitempty"` // message_delta: the whole message's counts
	Error *ErrorDetail `json:"error,omitempty"` // error
}

// BlockDelta is a content_block_delta's delta: text_delta,
// input_json_delta, thinking_delta or signature_delta.
type BlockDelta struct {
	Type        string  `json:"type"`
	Text        *string `json:"text,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
	Thinking    *string `json:"thinking,omitempty"`
	Signature   *string `json:"signature,omitempty"`
}

// MessageDelta is a message_delta's delta.
type MessageDelta struct {
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

// Stream turns one request's engine events into Anthropic's events:
// message_start and ping; per content block content_block_start,
// content_block_delta…, content_block_stop; then message_delta (stop
// reason and usage) and message_stop. While tools are offered, text is held
// back until it cannot be a tool call; calls come as tool_use blocks with
// their input in one input_json_delta. Not safe for concurrent use.
type Stream struct {
	g       *Generation
	id      string
	gate    apiconv.CallGate
	started bool // message_start was returned
	index   int  // the next block's index
	open    bool // a text block is open
	finish  inference.FinishReason
	stop    string
	calls   bool // tool_use blocks were sent
	// thinking is the open thinking block's text so far (nil: none open).
	thinking *strings.Builder
}

// NewStream streams g's reply as message id.
func NewStream(g *Generation, id string) *Stream {
	return &Stream{g: g, id: id, gate: apiconv.NewFormatGate(g.ToolFormat, g.Tools != nil)}
}

// Start returns message_start and a ping unless they were returned already.
// Event returns them with its first event, whose usage splits the prompt
// into input and cache reads, as Anthropic's message_start does; call Start
// only when something must be sent before an event (a keep-alive, a
// failure): its usage is then the whole prompt as input.
func (s *Stream) Start() []Event { return s.start(0) }

// start returns message_start, with cached of the prompt's tokens read
// from the cache, and a ping, unless they were returned already.
func (s *Stream) start(cached int) []Event {
	if s.started {
		return nil
	}
	s.started = true
	u := toUsage(inference.Usage{PromptTokens: len(s.g.Request.Prompt), CachedTokens: cached})
	m := &Message{ID: s.id, Type: "message", Role: "assistant", Model: s.g.Model, Content: []ContentBlock{}, Usage: u}
	return []Event{{Type: "message_start", Message: m}, Ping()}
}

// Ping is the keep-alive event, sent while nothing else is (a long prompt
// being read).
func Ping() Event { return Event{Type: "ping"} }

// Fail is the event of a failure after the stream began.
func Fail(d ErrorDetail) Event { return Event{Type: "error", Error: &d} }

// Event returns the events ev releases. A Done event with Err set releases
// nothing: the caller sends Fail.
func (s *Stream) Event(ev inference.Event) []Event {
	if ev.Done && ev.Err != nil {
		return nil
	}
	out := s.start(ev.Usage.CachedTokens)
	if ev.Done {
		out = s.closeText(out)
		reason, seq := stopReason(s.finish, s.stop, s.calls)
		u := toUsage(ev.Usage)
		return append(out, Event{Type: "message_delta", Delta: &MessageDelta{StopReason: reason, StopSequence: seq}, Usage: &u},
			Event{Type: "message_stop"})
	}
	if ev.Choice != 0 {
		return out
	}
	if ev.Reasoning != "" {
		out = s.think(out, ev.Reasoning)
	}
	if ev.Text != "" || ev.Finish != "" {
		out = s.closeThinking(out)
	}
	if text, ok := s.gate.Pass(ev.Text); ok && text != "" {
		out = s.text(out, text)
	}
	switch ev.Finish {
	case "", inference.FinishError, inference.FinishCancelled:
		return out
	}
	s.finish, s.stop = ev.Finish, ev.Stop
	if text, held := s.gate.End(); held {
		if blocks, ok := s.g.toolUses(text, ev.Finish); ok {
			s.calls = true
			for _, b := range blocks { // the gate sent the content before them
				out = s.toolUse(out, b)
			}
			return out
		}
		out = s.text(out, text)
	}
	return out
}

func ptr(i int) *int { return &i }

// think opens the thinking block when needed and appends delta as a
// thinking_delta.
func (s *Stream) think(out []Event, delta string) []Event {
	if s.thinking == nil {
		empty, sig := "", ""
		out = append(out, Event{Type: "content_block_start", Index: ptr(s.index), ContentBlock: &ContentBlock{Type: "thinking", Thinking: &empty, Signature: &sig}})
		s.thinking = new(strings.Builder)
	}
	s.thinking.WriteString(delta)
	return append(out, Event{Type: "content_block_delta", Index: ptr(s.index), Delta: &BlockDelta{Type: "thinking_delta", Thinking: &delta}})
}

// closeThinking ends the open thinking block with its signature_delta.
func (s *Stream) closeThinking(out []Event) []Event {
	if s.thinking == nil {
		return out
	}
	sig := *s.g.thinkingBlock(s.thinking.String()).Signature
	s.thinking = nil
	s.index++
	i := ptr(s.index - 1)
	return append(out, Event{Type: "content_block_delta", Index: i, Delta: &BlockDelta{Type: "signature_delta", Signature: &sig}},
		Event{Type: "content_block_stop", Index: i})
}

// text opens the text block when needed and appends delta.
func (s *Stream) text(out []Event, delta string) []Event {
	if delta == "" {
		return out
	}
	if !s.open {
		empty := ""
		out = append(out, Event{Type: "content_block_start", Index: ptr(s.index), ContentBlock: &ContentBlock{Type: "text", Text: &empty}})
		s.open = true
	}
	return append(out, Event{Type: "content_block_delta", Index: ptr(s.index), Delta: &BlockDelta{Type: "text_delta", Text: &delta}})
}

func (s *Stream) closeText(out []Event) []Event {
	if !s.open {
		return out
	}
	s.open = false
	s.index++
	return append(out, Event{Type: "content_block_stop", Index: ptr(s.index - 1)})
}

func (s *Stream) toolUse(out []Event, b ContentBlock) []Event {
	out = s.closeText(out)
	input := string(b.Input)
	start := b
	start.Input = []byte("{}")
	i := ptr(s.index)
	s.index++
	return append(out, Event{Type: "content_block_start", Index: i, ContentBlock: &start},
		Event{Type: "content_block_delta", Index: i, Delta: &BlockDelta{Type: "input_json_delta", PartialJSON: &input}},
		Event{Type: "content_block_stop", Index: i})
}
