package anthropic

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/upstream/chatwire"
)

// The conversions below serve a Messages request from an upstream model (an
// OpenAI-compatible server): the request becomes an OpenAI chat completion
// request, streamed, and the upstream's chunks become a Message or its
// stream events.

// ToOpenAI is the OpenAI chat request (JSON, streamed) for a Messages
// request to an upstream model. It is validated as for a local model;
// top_k has no OpenAI parameter and is dropped, thinking and metadata are
// not sent, and a final assistant turn of text (a prefill) is refused: the
// upstream applies its own template and would answer it as a turn of its
// own.
func ToOpenAI(r *MessagesRequest) ([]byte, error) {
	if err := checkMaxTokens(r); err != nil {
		return nil, err
	}
	tools, _, mode, err := check(r, apiconv.Params{}, &Generation{})
	if err != nil {
		return nil, err
	}
	msgs, prefill, err := chatMessages(r.System, r.Messages, nil)
	if err != nil {
		return nil, err
	}
	if prefill != "" {
		return nil, invalid(fmt.Sprintf("messages[%d]", len(r.Messages)-1), "a final assistant turn (prefill) is not supported for an upstream model: "+
			"it applies its own chat template and cannot continue the turn")
	}
	out := chatwire.UpstreamChat{Model: r.Model, Messages: openAIMessages(msgs), MaxTokens: r.MaxTokens,
		Temperature: r.Temperature, TopP: r.TopP, Stop: r.StopSequences}
	if len(tools) > 0 {
		out.Tools = tools
		out.ToolChoice = openAIToolChoice(mode, r.ToolChoice)
		if r.ToolChoice != nil && r.ToolChoice.DisableParallelToolUse != nil && *r.ToolChoice.DisableParallelToolUse {
			f := false
			out.ParallelToolCalls = &f
		}
	}
	if f := r.OutputConfig; f != nil && f.Format != nil {
		if f.Format.Type != "json_schema" {
			return nil, invalid("output_config.format.type", "output_config.format.type must be \"json_schema\", got %q", f.Format.Type)
		}
		schema := f.Format.Schema
		if isNull(schema) {
			schema = []byte(`{}`)
		}
		out.ResponseFormat = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "output", "schema": schema}}
	}
	return out.Marshal()
}

// openAIToolChoice is tool_choice in OpenAI's terms: auto, required (any),
// none, or the named function (tool).
func openAIToolChoice(mode string, tc *ToolChoice) any {
	switch mode {
	case "any":
		return "required"
	case "tool":
		return map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}}
	}
	return mode
}

// openAIMessages are the chat messages in OpenAI's wire form; an assistant
// turn's text and tool calls (one chat message each, as the Llama-3.2
// template renders them) are one message again.
func openAIMessages(msgs []chat.Message) []chatwire.Message {
	var out []chatwire.Message
	for _, m := range msgs {
		if n := len(out); n > 0 && m.Role == "assistant" && out[n-1].Role == "assistant" && len(m.ToolCalls) > 0 {
			out[n-1].ToolCalls = append(out[n-1].ToolCalls, openAICalls(m.ToolCalls)...)
			continue
		}
		om := chatwire.Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, ToolCalls: openAICalls(m.ToolCalls)}
		out = append(out, om)
	}
	return out
}

func openAICalls(calls []chat.ToolCall) []chatwire.ToolCall {
	var out []chatwire.ToolCall
	for _, c := range calls {
		out = append(out, chatwire.ToolCall{ID: c.ID, Type: "function",
			Function: chatwire.FunctionCall{Name: c.Name, Arguments: string(c.Arguments)}})
	}
	return out
}

// StopRefusal is the stop reason of a reply the upstream's content filter
// ended (OpenAI's finish_reason content_filter).
const StopRefusal = "refusal"

// Relay turns an upstream's OpenAI chat chunks into a Message (Message) or
// Anthropic's stream events (Chunk, then End). Tool calls stream as
// tool_use blocks whose input comes in input_json_delta pieces as the
// upstream sends the arguments. Not safe for concurrent use.
type Relay struct {
	Model string   // the model name the reply names
	ID    string   // the message id
	Stops []string // the request's stop_sequences

	rd      chatwire.ChunkReader
	started bool
	index   int            // the next block's index
	open    string         // the open block: "", "text" or "tool_use"
	call    int            // the upstream's index of the open tool_use
	sent    bool           // the open tool_use's input has begun
	ids     map[int]string // tool_use ids by the upstream's call index
}

// Chunk reads one chunk and returns the events it releases (message_start
// and a ping first).
func (r *Relay) Chunk(data []byte) ([]Event, error) {
	d, err := r.rd.Read(data)
	if err != nil {
		return nil, err
	}
	out := r.start(nil)
	if d.Text != "" {
		if r.open != "text" {
			empty := ""
			out = r.closeBlock(out)
			out = r.openBlock(out, "text", ContentBlock{Type: "text", Text: &empty})
		}
		text := d.Text
		out = append(out, Event{Type: "content_block_delta", Index: ptr(r.index - 1), Delta: &BlockDelta{Type: "text_delta", Text: &text}})
	}
	for _, tc := range d.ToolCalls {
		if r.open != "tool_use" || r.call != tc.Index {
			if _, done := r.ids[tc.Index]; done {
				return nil, fmt.Errorf("the upstream interleaved the arguments of its tool calls")
			}
			out = r.closeBlock(out)
			r.call, r.sent = tc.Index, false
			out = r.openBlock(out, "tool_use", ContentBlock{Type: "tool_use", ID: r.toolID(tc.Index, tc.ID), Name: tc.Function.Name, Input: json.RawMessage(`{}`)})
		}
		if args := tc.Function.Arguments; args != "" {
			r.sent = true
			out = append(out, Event{Type: "content_block_delta", Index: ptr(r.index - 1), Delta: &BlockDelta{Type: "input_json_delta", PartialJSON: &args}})
		}
	}
	return out, nil
}

// End returns the last events: the open block's stop, message_delta (stop
// reason and usage) and message_stop.
func (r *Relay) End() []Event {
	out := r.closeBlock(r.start(nil))
	reason, seq := r.stopReason()
	u := r.usage()
	return append(out, Event{Type: "message_delta", Delta: &MessageDelta{StopReason: reason, StopSequence: seq}, Usage: &u},
		Event{Type: "message_stop"})
}

// Message is the whole reply: its text, then its tool_use blocks.
func (r *Relay) Message() *Message {
	m := &Message{ID: r.ID, Type: "message", Role: "assistant", Model: r.Model, Content: []ContentBlock{}, Usage: r.usage()}
	if text := r.rd.Text(); text != "" {
		m.Content = append(m.Content, ContentBlock{Type: "text", Text: &text})
	}
	for i, c := range r.rd.ToolCalls() {
		input := json.RawMessage(c.Function.Arguments)
		if !json.Valid(input) || !strings.HasPrefix(strings.TrimSpace(string(input)), "{") {
			input = json.RawMessage(`{}`)
		}
		m.Content = append(m.Content, ContentBlock{Type: "tool_use", ID: r.toolID(i, c.ID), Name: c.Function.Name, Input: input})
	}
	reason, seq := r.stopReason()
	m.StopReason, m.StopSequence = &reason, seq
	return m
}

// start returns message_start and a ping the first time.
func (r *Relay) start(out []Event) []Event {
	if r.started {
		return out
	}
	r.started = true
	m := &Message{ID: r.ID, Type: "message", Role: "assistant", Model: r.Model, Content: []ContentBlock{}}
	return append(out, Event{Type: "message_start", Message: m}, Ping())
}

func (r *Relay) openBlock(out []Event, kind string, b ContentBlock) []Event {
	r.open = kind
	r.index++
	return append(out, Event{Type: "content_block_start", Index: ptr(r.index - 1), ContentBlock: &b})
}

// closeBlock stops the open block; a tool_use whose arguments never came
// gets the input {}.
func (r *Relay) closeBlock(out []Event) []Event {
	switch r.open {
	case "":
		return out
	case "tool_use":
		if !r.sent {
			empty := "{}"
			out = append(out, Event{Type: "content_block_delta", Index: ptr(r.index - 1), Delta: &BlockDelta{Type: "input_json_delta", PartialJSON: &empty}})
		}
	}
	r.open = ""
	return append(out, Event{Type: "content_block_stop", Index: ptr(r.index - 1)})
}

// toolID is the tool_use id of the upstream's call i: its id as toolu_…
// (as a local model's "call_X" becomes "toolu_X"), made up when it sent
// none. The same call always gets the same id.
func (r *Relay) toolID(i int, id string) string {
	if v, ok := r.ids[i]; ok {
		return v
	}
	switch {
	case id == "":
		id = apiconv.NewID("toolu_")
	case !strings.HasPrefix(id, "toolu_"):
		id = "toolu_" + strings.TrimPrefix(id, "call_")
	}
	if r.ids == nil {
		r.ids = map[int]string{}
	}
	r.ids[i] = id
	return id
}

// stopReason maps the upstream's finish_reason: tool calls are tool_use,
// length max_tokens, a stop the upstream names among the request's
// stop_sequences stop_sequence, content_filter refusal, the rest end_turn.
func (r *Relay) stopReason() (string, *string) {
	switch f := r.rd.Finish(); {
	case f == "tool_calls" || len(r.rd.ToolCalls()) > 0:
		return StopToolUse, nil
	case f == "length":
		return StopMaxTokens, nil
	case f == "content_filter":
		return StopRefusal, nil
	case f == "stop" && slices.Contains(r.Stops, r.rd.MatchedStop()):
		s := r.rd.MatchedStop()
		return StopSequence, &s
	}
	return StopEndTurn, nil
}

// usage is the upstream's usage the Anthropic way: cached prompt tokens
// are cache reads.
func (r *Relay) usage() Usage {
	u := r.rd.Usage()
	cached := u.PromptTokensDetails.CachedTokens
	return Usage{InputTokens: u.PromptTokens - cached, OutputTokens: u.CompletionTokens, CacheReadInputTokens: cached}
}
