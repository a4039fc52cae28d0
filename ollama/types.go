// Package ollama holds the Ollama API's wire types (/api/chat,
// /api/generate, /api/tags, /api/ps, /api/show, /api/version) and their pure
// conversions to and from hexserve's domain types, like package openai does
// for the OpenAI API. It does not import net/http: server/ decodes the body,
// calls these functions and writes what they return, as newline-delimited
// JSON when streaming.
package ollama

import (
	"encoding/json"
	"time"
)

// ChatRequest is the body of POST /api/chat.
type ChatRequest struct {
	Model    string            `json:"model"`
	Messages []Message         `json:"messages"`
	Stream   *bool             `json:"stream"` // nil: true
	Format   json.RawMessage   `json:"format"`
	Tools    []json.RawMessage `json:"tools"`
	Options  *Options          `json:"options"`
	Common
}

// GenerateRequest is the body of POST /api/generate.
type GenerateRequest struct {
	Model    string          `json:"model"`
	Prompt   string          `json:"prompt"`
	Suffix   string          `json:"suffix"`
	System   string          `json:"system"`
	Template string          `json:"template"`
	Raw      bool            `json:"raw"`
	Context  []int64         `json:"context"` // deprecated; ignored
	Stream   *bool           `json:"stream"`  // nil: true
	Format   json.RawMessage `json:"format"`
	Images   []string        `json:"images"`
	Options  *Options        `json:"options"`
	Common
}

// Common are the fields both generation endpoints accept and this server
// checks but does not act on.
type Common struct {
	// KeepAlive is a duration string ("5m", "-1s") or a number of seconds;
	// the model stays loaded whatever it says.
	KeepAlive json.RawMessage `json:"keep_alive"`
	// Think is a bool or "low", "medium", "high", "max": false switches a
	// reasoning model's thinking off, the others on (the levels are not
	// told apart). A model without a reasoning parser ignores it.
	Think json.RawMessage `json:"think"`
	// Truncate (nil: true) leaves older turns out of a prompt over the
	// window (overflow.Rolling, or the model's context_overflow); false
	// refuses it.
	Truncate *bool `json:"truncate"`
	// Shift (nil: the model's context_shift, else true, as Ollama's) goes
	// on generating past the window, keeping the system prompt and tools
	// (raw: BOS) and the newest tokens; false ends the reply at the window
	// (done_reason "length").
	Shift    *bool `json:"shift"`
	Logprobs bool  `json:"logprobs"`
	// TopLogprobs is accepted in 0–20 (logprobs are not returned).
	TopLogprobs *int `json:"top_logprobs"`
}

// Message is one chat message.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Thinking   string     `json:"thinking,omitempty"`
	Images     []string   `json:"images,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolName   string     `json:"tool_name,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is a function call; the arguments are a JSON object, not a string
// as in the OpenAI API.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its arguments object.
type FunctionCall struct {
	Index     int             `json:"index"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Options are the model options this server honours. Other keys (Ollama's
// num_keep, typical_p, mirostat, num_gpu, num_thread and the rest, listed in
// docs/api.md) are accepted and ignored, as Ollama ignores unknown ones.
type Options struct {
	Temperature      *float64 `json:"temperature"`
	TopK             *int     `json:"top_k"`
	TopP             *float64 `json:"top_p"`
	MinP             *float64 `json:"min_p"`
	NumPredict       *int     `json:"num_predict"`
	Stop             []string `json:"stop"`
	Seed             *int64   `json:"seed"`
	RepeatPenalty    *float64 `json:"repeat_penalty"`
	RepeatLastN      *int     `json:"repeat_last_n"`
	PresencePenalty  *float64 `json:"presence_penalty"`
	FrequencyPenalty *float64 `json:"frequency_penalty"`
	NumCtx           *int     `json:"num_ctx"`
}

// ShowRequest is the body of POST /api/show ("name" is the older key).
type ShowRequest struct {
	Model   string `json:"model"`
	Name    string `json:"name"`
	Verbose bool   `json:"verbose"`
}

// ChatResponse is the /api/chat reply, or one line of its stream.
type ChatResponse struct {
	Model      string    `json:"model"`
	CreatedAt  time.Time `json:"created_at"`
	Message    Message   `json:"message"`
	Done       bool      `json:"done"`
	DoneReason string    `json:"done_reason,omitempty"`
	*Metrics             // on the last line only
}

// GenerateResponse is the /api/generate reply, or one line of its stream.
type GenerateResponse struct {
	Model      string    `json:"model"`
	CreatedAt  time.Time `json:"created_at"`
	Response   string    `json:"response"`
	Thinking   string    `json:"thinking,omitempty"`
	Done       bool      `json:"done"`
	DoneReason string    `json:"done_reason,omitempty"`
	*Metrics             // on the last line only
}

// Metrics are the last line's counts and durations (nanoseconds).
type Metrics struct {
	TotalDuration      time.Duration `json:"total_duration"`
	LoadDuration       time.Duration `json:"load_duration"`
	PromptEvalCount    int           `json:"prompt_eval_count"`
	PromptEvalDuration time.Duration `json:"prompt_eval_duration"`
	EvalCount          int           `json:"eval_count"`
	EvalDuration       time.Duration `json:"eval_duration"`
}

// ModelDetails describe a model in /api/tags, /api/ps and /api/show.
type ModelDetails struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
	ContextLength     int      `json:"context_length,omitempty"`
}

// ListModel is one entry of /api/tags.
type ListModel struct {
	Name         string       `json:"name"`
	Model        string       `json:"model"`
	ModifiedAt   time.Time    `json:"modified_at"`
	Size         int64        `json:"size"`
	Digest       string       `json:"digest"`
	Details      ModelDetails `json:"details"`
	Capabilities []string     `json:"capabilities,omitempty"`
}

// ListResponse is the body of GET /api/tags.
type ListResponse struct {
	Models []ListModel `json:"models"`
}

// ProcessModel is one entry of /api/ps.
type ProcessModel struct {
	Name          string       `json:"name"`
	Model         string       `json:"model"`
	Size          int64        `json:"size"`
	Digest        string       `json:"digest"`
	Details       ModelDetails `json:"details"`
	ExpiresAt     time.Time    `json:"expires_at"`
	SizeVRAM      int64        `json:"size_vram"`
	ContextLength int          `json:"context_length"`
}

// ProcessResponse is the body of GET /api/ps.
type ProcessResponse struct {
	Models []ProcessModel `json:"models"`
}

// ShowResponse is the body of POST /api/show.
type ShowResponse struct {
	Modelfile    string         `json:"modelfile"`
	Parameters   string         `json:"parameters"`
	Template     string         `json:"template"`
	Details      ModelDetails   `json:"details"`
	ModelInfo    map[string]any `json:"model_info"`
	Capabilities []string       `json:"capabilities"`
	ModifiedAt   time.Time      `json:"modified_at"`
}

// VersionResponse is the body of GET /api/version.
type VersionResponse struct {
	Version string `json:"version"`
	// Hexserve is this server's own version (an extension).
	Hexserve string `json:"hexserve,omitempty"`
}

// ErrorResponse is Ollama's error body, also sent as a stream's last line
// when generation fails after it started.
type ErrorResponse struct {
	Error string `json:"error"`
}
