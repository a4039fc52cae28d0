package anthropic

import (
	"encoding/json"
	"strings"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
)

// Message is the response of POST /v1/messages (and, with empty content,
// the message of the message_start event).
type Message struct {
	ID           string         `json:"id"`   // "msg_…"
	Type         string         `json:"type"` // "message"
	Role         string         `json:"role"` // "assistant"
	Model        string         `json:"model"`
	Content      []ContentBlock `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        Usage          `json:"usage"`
}

// ContentBlock is a thinking, text or tool_use block of a response.
type ContentBlock struct {
	Type string  `json:"type"`
	Text *string `json:"text,omitempty"`
	// Thinking is a thinking block's reasoning and Signature its
	// signature (apiconv.SignReasoning with the server's key).
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// Usage counts tokens the Anthropic way: InputTokens are the prompt tokens
// evaluated, CacheReadInputTokens those whose KV rows were reused (prefix
// cache and KV store); their sum is the prompt. Nothing is billed for
// writing the cache, so CacheCreationInputTokens is 0.
type Usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// TokenCount is the response of POST /v1/messages/count_tokens.
type TokenCount struct {
	InputTokens int `json:"input_tokens"`
}

// Stop reasons.
const (
	StopEndTurn   = "end_turn"
	StopMaxTokens = "max_tokens"
	StopSequence  = "stop_sequence"
	StopToolUse   = "tool_use"
	// StopContextWindow: generation reached the model's context window
	// before max_tokens.
	StopContextWindow = "model_context_window_exceeded"
)

// NewMessageID returns a fresh "msg_…" id.
func NewMessageID() string { return apiconv.NewID("msg_") }

func toUsage(u inference.Usage) Usage {
	return Usage{InputTokens: u.PromptTokens - u.CachedTokens, OutputTokens: u.CompletionTokens, CacheReadInputTokens: u.CachedTokens}
}

// stopReason maps how the choice ended; a timeout reads as max_tokens.
func stopReason(f inference.FinishReason, stop string, toolUse bool) (string, *string) {
	switch {
	case f == inference.FinishContext:
		return StopContextWindow, nil
	case cutOff(f):
		return StopMaxTokens, nil
	case toolUse:
		return StopToolUse, nil
	case f == inference.FinishStop && stop != "":
		return StopSequence, &stop
	}
	return StopEndTurn, nil
}

// cutOff reports whether a choice that ended with f was cut by the token
// limit, the window or the time limit.
func cutOff(f inference.FinishReason) bool {
	return f == inference.FinishLength || f == inference.FinishContext || f == inference.FinishTimeout
}

// toolUses parses text, which ended with f, as calls of g's tools (at most
// one with Single) and returns them as tool_use blocks, after a text block
// of the content before them; ok is false for ordinary text. A forced call
// that the token limit cut off is read as far as it came: its block's
// input is the JSON text it got to (not valid JSON, or empty), which a
// stream sends as is.
func (g *Generation) toolUses(text string, f inference.FinishReason) ([]ContentBlock, bool) {
	names := g.Tools
	if g.ForcedName != "" {
		names = []string{g.ForcedName}
	}
	content, blocks, ok := apiconv.ToolCallsAs(g.ToolFormat, text, names, !g.Single, g.Forced && cutOff(f), func(_ int, c chat.ToolCall) ContentBlock {
		return ContentBlock{Type: "tool_use", ID: "toolu_" + strings.TrimPrefix(c.ID, "call_"), Name: c.Name, Input: c.Arguments}
	})
	if content != "" {
		blocks = append([]ContentBlock{{Type: "text", Text: &content}}, blocks...)
	}
	return blocks, ok
}

// ToMessage builds the non-streaming response with id.
func ToMessage(g *Generation, id string, res inference.Result) *Message {
	m := &Message{ID: id, Type: "message", Role: "assistant", Model: g.Model, Content: []ContentBlock{}, Usage: toUsage(res.Usage)}
	var c inference.Choice
	if len(res.Choices) > 0 {
		c = res.Choices[0]
	}
	if c.Reasoning != "" {
		m.Content = append(m.Content, g.thinkingBlock(c.Reasoning))
	}
	blocks, toolUse := g.toolUses(c.Text, c.Finish)
	if !toolUse && c.Text != "" {
		text := c.Text
		blocks = []ContentBlock{{Type: "text", Text: &text}}
	}
	for i, b := range blocks {
		if b.Type == "tool_use" && !json.Valid(b.Input) {
			blocks[i].Input = json.RawMessage(`{}`) // cut by the token limit: what it got to is not an object
		}
	}
	m.Content = append(m.Content, blocks...)
	reason, seq := stopReason(c.Finish, c.Stop, toolUse)
	m.StopReason, m.StopSequence = &reason, seq
	return m
}

// thinkingBlock is the thinking block of text, signed.
func (g *Generation) thinkingBlock(text string) ContentBlock {
	sig := apiconv.SignReasoning(g.key, text)
	return ContentBlock{Type: "thinking", Thinking: &text, Signature: &sig}
}

// ErrorResponse is Anthropic's error body.
type ErrorResponse struct {
	Type  string      `json:"type"` // "error"
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the error object of an ErrorResponse and of a stream's
// error event.
type ErrorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// StatusOverloaded is Anthropic's status for an overloaded service (a full
// queue here).
const StatusOverloaded = 529

// ErrorType is Anthropic's error type for an HTTP status.
func ErrorType(status int) string {
	switch status {
	case 400, 405, 408, 422, 499:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 503, StatusOverloaded:
		return "overloaded_error"
	case 504:
		return "timeout_error"
	}
	return "api_error"
}

// NewError is the error body for status with message.
func NewError(status int, message string) ErrorResponse {
	return ErrorResponse{Type: "error", Error: ErrorDetail{Type: ErrorType(status), Message: message}}
}
