// Package openai holds the OpenAI wire types and their pure conversions to
// and from hexserve's domain types (chat messages, inference requests and
// events). It does not import net/http: server/ decodes the body, calls these
// functions and writes what they return.
package openai

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/chat"
)

// Message is one chat message as the Chat Completions API sends it.
type Message struct {
	Role       string     `json:"role"`
	Content    Content    `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// ReasoningContent is an assistant turn's reasoning as vLLM and
	// llama.cpp return it; Reasoning is the newer name some clients send.
	ReasoningContent string `json:"reasoning_content,omitempty"`
	Reasoning        string `json:"reasoning,omitempty"`
}

// Content is a message's content: a string, an array of content parts, or
// null/absent.
type Content struct {
	Text  *string       // set when the content was a string
	Parts []ContentPart // set when it was an array
}

// ContentPart is one element of an array content. Only "text" parts can be
// rendered; the others are recognised to report them precisely.
type ContentPart struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
}

// UnmarshalJSON accepts a string, an array of parts or null.
func (c *Content) UnmarshalJSON(b []byte) error {
	text, parts, err := stringOrArray[ContentPart](b, contentType, "a value other than a string, an array or null")
	*c = Content{Text: text, Parts: parts}
	return err
}

// MarshalJSON writes the string form, the parts, or null.
func (c Content) MarshalJSON() ([]byte, error) {
	switch {
	case c.Text != nil:
		return json.Marshal(*c.Text)
	case c.Parts != nil:
		return json.Marshal(c.Parts)
	}
	return []byte("null"), nil
}

var contentType = reflect.TypeFor[Content]()

// ToolCall is an assistant's function call in the wire format; Arguments is
// a JSON document encoded as a string.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its JSON-encoded arguments.
type FunctionCall struct {
	Name      string    `json:"name"`
	Arguments Arguments `json:"arguments"`
}

// Arguments is a JSON document encoded as a string, as the API sends it.
// Decoding also accepts the document itself (a JSON object, as Hugging Face
// chat messages carry it) and keeps its text.
type Arguments string

// UnmarshalJSON accepts a JSON string or any other JSON value.
func (a *Arguments) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*a = Arguments(s)
		return nil
	}
	if bytes.Equal(b, []byte("null")) {
		*a = ""
		return nil
	}
	*a = Arguments(b)
	return nil
}

// ToChatMessages converts wire messages to chat messages. Errors are
// *inference.InvalidRequestError with the OpenAI param path, e.g.
// "messages[1].content[0].type".
func ToChatMessages(msgs []Message) ([]chat.Message, error) {
	if len(msgs) == 0 {
		return nil, invalid("messages", "messages must contain at least one message")
	}
	out := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		p := fmt.Sprintf("messages[%d]", i)
		text, err := m.Content.text(p + ".content")
		if err != nil {
			return nil, err
		}
		cm := chat.Message{Role: ChatRole(m.Role), Content: text, Name: m.Name, ToolCallID: m.ToolCallID,
			ReasoningContent: cmp.Or(m.ReasoningContent, m.Reasoning)}
		for j, tc := range m.ToolCalls {
			tp := fmt.Sprintf("%s.tool_calls[%d]", p, j)
			if tc.Type != "" && tc.Type != "function" {
				return nil, invalid(tp+".type", "unsupported tool call type %q; only \"function\" is supported", tc.Type)
			}
			if tc.Function.Name == "" {
				return nil, invalid(tp+".function.name", "tool call has no function name")
			}
			var args json.RawMessage
			if a := strings.TrimSpace(string(tc.Function.Arguments)); a != "" {
				if !json.Valid([]byte(a)) {
					return nil, invalid(tp+".function.arguments", "function arguments are not valid JSON")
				}
				args = json.RawMessage(a)
			}
			cm.ToolCalls = append(cm.ToolCalls, chat.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
		}
		out[i] = cm
	}
	return out, nil
}

// checkMessages refuses what OpenAI's chat completions refuse, in its
// words: an empty content array, and a tool message that does not answer
// an assistant message with tool_calls (before it, past other tool
// messages). /apply-template, llama.cpp's helper, renders them as they are.
func checkMessages(msgs []Message) error {
	for i, m := range msgs {
		if m.Content.Text == nil && m.Content.Parts != nil && len(m.Content.Parts) == 0 {
			return invalid(fmt.Sprintf("messages[%d].content", i),
				"Invalid 'messages[%d].content': empty array. Expected an array with minimum length 1, but got an empty array instead.", i)
		}
		if m.Role != "tool" {
			continue
		}
		j := i - 1
		for j >= 0 && msgs[j].Role == "tool" {
			j--
		}
		if j < 0 || msgs[j].Role != "assistant" || len(msgs[j].ToolCalls) == 0 {
			return invalid(fmt.Sprintf("messages.[%d].role", i),
				"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
		}
	}
	return nil
}

// ChatRole maps an API message role to the template's role: "developer"
// (the newer name OpenAI gives system instructions) is "system"; other roles
// are unchanged.
func ChatRole(role string) string {
	if role == "developer" {
		return "system"
	}
	return role
}

// text flattens the content: text parts are joined with "\n"; media parts
// are refused because the model only reads text.
func (c Content) text(param string) (string, error) {
	if c.Text != nil {
		return *c.Text, nil
	}
	texts := make([]string, 0, len(c.Parts))
	for j, part := range c.Parts {
		pp := fmt.Sprintf("%s[%d].type", param, j)
		switch part.Type {
		case "text":
			texts = append(texts, part.Text)
		case "image_url", "input_image", "image":
			return "", invalid(pp, "image input is not supported by this model")
		case "input_audio", "audio":
			return "", invalid(pp, "audio input is not supported by this model")
		case "file", "input_file":
			return "", invalid(pp, "file input is not supported by this model")
		case "":
			return "", invalid(pp, "content part has no type")
		default:
			return "", invalid(pp, "unsupported content part type %q", part.Type)
		}
	}
	return strings.Join(texts, "\n"), nil
}

var (
	invalid = apiconv.Invalid
	isNull  = apiconv.IsNull
)
