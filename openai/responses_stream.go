package openai

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/inference"
)

// ResponseEvent is one streamed Responses API event; Type is also the SSE
// event name. Which fields are set depends on the type, as in OpenAI's API.
type ResponseEvent struct {
	Type           string            `json:"type"`
	SequenceNumber int               `json:"sequence_number"`
	Response       *Response         `json:"response,omitempty"`
	OutputIndex    *int              `json:"output_index,omitempty"`
	ContentIndex   *int              `json:"content_index,omitempty"`
	ItemID         string            `json:"item_id,omitempty"`
	Item           *Item             `json:"item,omitempty"`
	Part           *ItemPart         `json:"part,omitempty"`
	Delta          *string           `json:"delta,omitempty"`
	Text           *string           `json:"text,omitempty"`
	Name           string            `json:"name,omitempty"`
	Arguments      *string           `json:"arguments,omitempty"`
	Logprobs       []json.RawMessage `json:"logprobs,omitzero"`
	// The error event's fields.
	Code    *string `json:"code,omitempty"`
	Message string  `json:"message,omitempty"`
	Param   *string `json:"param,omitempty"`
}

// ResponseStream turns one request's engine events into Responses events in
// OpenAI's order: response.created, response.in_progress, then per output
// item output_item.added, content_part.added, output_text.delta…,
// output_text.done, content_part.done, output_item.done (or for a
// function call output_item.added, function_call_arguments.delta,
// function_call_arguments.done, output_item.done), and last
// response.completed or response.incomplete. While tools are offered, text
// is held back until it cannot be a tool call. Not safe for concurrent use.
type ResponseStream struct {
	g      *ResponseGeneration
	seq    int
	gate   apiconv.CallGate
	msg    *Item // the open message item
	text   strings.Builder
	rs     *Item // the open reasoning item
	think  strings.Builder
	finish inference.FinishReason
}

// NewResponseStream streams g's response.
func NewResponseStream(g *ResponseGeneration) *ResponseStream {
	return &ResponseStream{g: g, gate: apiconv.NewFormatGate(g.ToolFormat, g.Tools != nil)}
}

// Response is the response built so far (complete after the terminal event).
func (s *ResponseStream) Response() *Response { return s.g.Response }

// Start returns response.created and response.in_progress.
func (s *ResponseStream) Start() []*ResponseEvent {
	return []*ResponseEvent{s.snapshot("response.created"), s.snapshot("response.in_progress")}
}

// Event returns the events ev releases. A Done event with Err set releases
// nothing: the caller reports the failure with Fail.
func (s *ResponseStream) Event(ev inference.Event) []*ResponseEvent {
	var out []*ResponseEvent
	if ev.Done {
		if ev.Err != nil {
			return nil
		}
		setStatus(s.g.Response, s.finish, ev.Usage)
		if s.g.Response.Status == "incomplete" {
			return []*ResponseEvent{s.snapshot("response.incomplete")}
		}
		return []*ResponseEvent{s.snapshot("response.completed")}
	}
	if ev.Choice != 0 {
		return nil
	}
	if ev.Reasoning != "" {
		out = s.reasoningDelta(out, ev.Reasoning)
	}
	if ev.Text != "" || ev.Finish != "" {
		out = s.closeReasoning(out)
	}
	if text, ok := s.gate.Pass(ev.Text); ok && text != "" {
		out = s.textDelta(out, text)
	}
	switch ev.Finish {
	case "", inference.FinishError, inference.FinishCancelled:
		return out
	}
	s.finish = ev.Finish
	status := "completed"
	if finishReason(ev.Finish) == "length" {
		status = "incomplete"
	}
	if text, held := s.gate.End(); held {
		if _, calls, ok := s.g.parseCalls(text, ev.Finish); ok {
			if s.msg != nil { // the content before the calls
				out = s.closeMessage(out, status)
			}
			for _, c := range calls {
				out = s.functionCall(out, s.g.functionCallItem(c))
			}
			return out
		}
		out = s.textDelta(out, text)
	}
	if s.msg == nil {
		out = s.textDelta(out, "")
	}
	return s.closeMessage(out, status)
}

// Fail returns the events of a failure after the stream began: an error
// event and response.failed.
func (s *ResponseStream) Fail(code, message, param string) []*ResponseEvent {
	resp := s.g.Response
	resp.Status = "failed"
	resp.Error = &ResponseError{Code: code, Message: message}
	if code == "" {
		resp.Error.Code = "server_error"
	}
	e := s.event("error")
	e.Code, e.Message, e.Param = nullableString(code), message, nullableString(param)
	return []*ResponseEvent{e, s.snapshot("response.failed")}
}

func nullableString(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}

func (s *ResponseStream) event(typ string) *ResponseEvent {
	e := &ResponseEvent{Type: typ, SequenceNumber: s.seq}
	s.seq++
	return e
}

// snapshot is an event carrying a copy of the response as it is now.
func (s *ResponseStream) snapshot(typ string) *ResponseEvent {
	r := *s.g.Response
	r.Output = slices.Clone(r.Output)
	e := s.event(typ)
	e.Response = &r
	return e
}

func (s *ResponseStream) itemEvent(typ string, index int, it Item) *ResponseEvent {
	e := s.event(typ)
	e.OutputIndex, e.Item = &index, &it
	return e
}

// textDelta opens the message item when needed and appends delta.
func (s *ResponseStream) textDelta(out []*ResponseEvent, delta string) []*ResponseEvent {
	index, zero := len(s.g.Response.Output), 0
	if s.msg == nil {
		s.msg = &Item{Type: "message", ID: apiconv.NewID("msg_"), Status: "in_progress", Role: "assistant", Content: ItemContent{}}
		out = append(out, s.itemEvent("response.output_item.added", index, *s.msg))
		e := s.event("response.content_part.added")
		e.OutputIndex, e.ContentIndex, e.ItemID = &index, &zero, s.msg.ID
		e.Part = &ItemPart{Type: "output_text", Annotations: []json.RawMessage{}, Logprobs: []json.RawMessage{}}
		out = append(out, e)
	}
	if delta == "" {
		return out
	}
	s.text.WriteString(delta)
	e := s.event("response.output_text.delta")
	e.OutputIndex, e.ContentIndex, e.ItemID, e.Delta, e.Logprobs = &index, &zero, s.msg.ID, &delta, []json.RawMessage{}
	return append(out, e)
}

// reasoningDelta opens the reasoning item when needed and appends delta:
// output_item.added, content_part.added (reasoning_text), then
// reasoning_text.delta.
func (s *ResponseStream) reasoningDelta(out []*ResponseEvent, delta string) []*ResponseEvent {
	index, zero := len(s.g.Response.Output), 0
	if s.rs == nil {
		s.rs = &Item{Type: "reasoning", ID: apiconv.NewID("rs_"), Summary: []ItemPart{}, Content: ItemContent{}}
		out = append(out, s.itemEvent("response.output_item.added", index, *s.rs))
		e := s.event("response.content_part.added")
		e.OutputIndex, e.ContentIndex, e.ItemID = &index, &zero, s.rs.ID
		e.Part = &ItemPart{Type: "reasoning_text"}
		out = append(out, e)
	}
	s.think.WriteString(delta)
	e := s.event("response.reasoning_text.delta")
	e.OutputIndex, e.ContentIndex, e.ItemID, e.Delta = &index, &zero, s.rs.ID, &delta
	return append(out, e)
}

// closeReasoning ends the open reasoning item: reasoning_text.done,
// content_part.done, output_item.done.
func (s *ResponseStream) closeReasoning(out []*ResponseEvent) []*ResponseEvent {
	if s.rs == nil {
		return out
	}
	index, zero, text := len(s.g.Response.Output), 0, s.think.String()
	e := s.event("response.reasoning_text.done")
	e.OutputIndex, e.ContentIndex, e.ItemID, e.Text = &index, &zero, s.rs.ID, &text
	out = append(out, e)
	item := reasoningItem(s.rs.ID, text)
	e = s.event("response.content_part.done")
	e.OutputIndex, e.ContentIndex, e.ItemID, e.Part = &index, &zero, s.rs.ID, &item.Content[0]
	out = append(out, e, s.itemEvent("response.output_item.done", index, item))
	s.g.Response.Output = append(s.g.Response.Output, item)
	s.rs = nil
	return out
}

func (s *ResponseStream) closeMessage(out []*ResponseEvent, status string) []*ResponseEvent {
	index, zero, text := len(s.g.Response.Output), 0, s.text.String()
	e := s.event("response.output_text.done")
	e.OutputIndex, e.ContentIndex, e.ItemID, e.Text, e.Logprobs = &index, &zero, s.msg.ID, &text, []json.RawMessage{}
	out = append(out, e)
	item := messageItem(s.msg.ID, text, status)
	e = s.event("response.content_part.done")
	e.OutputIndex, e.ContentIndex, e.ItemID, e.Part = &index, &zero, s.msg.ID, &item.Content[0]
	out = append(out, e, s.itemEvent("response.output_item.done", index, item))
	s.g.Response.Output = append(s.g.Response.Output, item)
	return out
}

func (s *ResponseStream) functionCall(out []*ResponseEvent, item Item) []*ResponseEvent {
	index, args := len(s.g.Response.Output), *item.Arguments
	added := item
	added.Status, added.Arguments = "in_progress", new(string)
	out = append(out, s.itemEvent("response.output_item.added", index, added))
	e := s.event("response.function_call_arguments.delta")
	e.OutputIndex, e.ItemID, e.Delta = &index, item.ID, &args
	out = append(out, e)
	e = s.event("response.function_call_arguments.done")
	e.OutputIndex, e.ItemID, e.Arguments, e.Name = &index, item.ID, &args, item.Name
	out = append(out, e, s.itemEvent("response.output_item.done", index, item))
	s.g.Response.Output = append(s.g.Response.Output, item)
	return out
}
