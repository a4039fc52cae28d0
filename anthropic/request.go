// Package anthropic holds the Anthropic Messages API wire types
// (/v1/messages, /v1/messages/count_tokens) and their pure conversions to and
// from hexserve's domain types: a request becomes chat messages rendered
// with the Llama-3 template and an inference.Request; engine events become a
// Message or its stream events. It does not import net/http: server/ decodes
// the body, calls these functions and writes what they return.
package anthropic

import (
	"bytes"
	"encoding/json"
	"reflect"
)

// MessagesRequest is the body of POST /v1/messages (and, without max_tokens
// and stream, of /v1/messages/count_tokens). Pointer fields tell "left out"
// from a given zero. Keys that concern only Anthropic's service are decoded
// and ignored; unknown keys are ignored as encoding/json does.
type MessagesRequest struct {
	Model         string         `json:"model"`
	MaxTokens     *int           `json:"max_tokens"`
	Messages      []MessageParam `json:"messages"`
	System        *Content       `json:"system"`
	Metadata      *Metadata      `json:"metadata"`
	StopSequences []string       `json:"stop_sequences"`
	Stream        bool           `json:"stream"`
	Temperature   *float64       `json:"temperature"`
	TopP          *float64       `json:"top_p"`
	TopK          *int           `json:"top_k"`
	Tools         []Tool         `json:"tools"`
	ToolChoice    *ToolChoice    `json:"tool_choice"`
	Thinking      *Thinking      `json:"thinking"`
	OutputConfig  *OutputConfig  `json:"output_config"`
	// MCPServers asks Anthropic's service to connect to MCP servers: refused.
	MCPServers json.RawMessage `json:"mcp_servers"`
	// ContextOverflow (an extension) is the policy for a prompt over the
	// window: "error", "truncate_middle" or "rolling"; "": the model's,
	// else "error".
	ContextOverflow string `json:"context_overflow"`
	// ContextShift (an extension; nil: the model's context_shift, else
	// false) goes on generating past the window, keeping the system
	// prompt and tools and the newest tokens.
	ContextShift *bool `json:"context_shift"`

	// Accepted and ignored: they only concern Anthropic's service.
	ServiceTier       json.RawMessage `json:"service_tier"`
	ContextManagement json.RawMessage `json:"context_management"`
	Container         json.RawMessage `json:"container"`
}

// MessageParam is one conversation turn.
type MessageParam struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
}

// Content is a string or an array of content blocks (a message's content,
// system, a tool_result's content).
type Content struct {
	Text   *string // set when it was a string
	Blocks []Block // set when it was an array
}

// UnmarshalJSON accepts a string or an array of blocks.
func (c *Content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*c = Content{}
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = Content{Text: &s}
		return nil
	case len(b) > 0 && b[0] == '[':
		var blocks []Block
		if err := json.Unmarshal(b, &blocks); err != nil {
			return err
		}
		*c = Content{Blocks: blocks}
		if blocks == nil {
			c.Blocks = []Block{}
		}
		return nil
	}
	return &json.UnmarshalTypeError{Value: "a value other than a string or an array of content blocks", Type: contentType}
}

// set reports whether the content was given (not absent or null).
func (c *Content) set() bool { return c != nil && (c.Text != nil || c.Blocks != nil) }

var contentType = reflect.TypeFor[Content]()

// Block is one content block of a request. Only the fields of the types
// this server reads are decoded (text, tool_use, tool_result, thinking);
// media and server-tool blocks are refused by type. cache_control and
// citations are ignored.
type Block struct {
	Type string  `json:"type"`
	Text *string `json:"text"` // text
	// thinking (redacted_thinking's data is Anthropic's encryption: dropped)
	Thinking  *string `json:"thinking"`
	Signature *string `json:"signature"`
	// tool_use
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// tool_result
	ToolUseID string   `json:"tool_use_id"`
	Content   *Content `json:"content"`
	IsError   *bool    `json:"is_error"`
}

// Metadata is the request's metadata; UserID is the KV store's key hint.
type Metadata struct {
	UserID *string `json:"user_id"`
}

// Tool is a tool definition. Type is "" or "custom" for a client tool with an
// input_schema; the other types name tools Anthropic's service runs or
// defines (web_search_…, bash_…), which this server refuses.
type Tool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Strict      *bool           `json:"strict"`
}

// ToolChoice is tool_choice: auto, any, tool (with Name) or none.
type ToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse *bool  `json:"disable_parallel_tool_use"`
}

// Thinking is extended thinking's configuration: enabled (with
// budget_tokens), adaptive or disabled; it switches a reasoning model's
// thinking (a model without one returns no thinking blocks).
type Thinking struct {
	Type         string `json:"type"`
	BudgetTokens *int   `json:"budget_tokens"`
}

// OutputConfig is output_config: effort is ignored; format (JSON outputs)
// goes through the constrained decoder.
type OutputConfig struct {
	Effort json.RawMessage `json:"effort"`
	Format *OutputFormat   `json:"format"`
}

// OutputFormat is output_config.format: {"type": "json_schema", "schema"}.
type OutputFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}
