package ollama

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// The conversions below serve an Ollama request from an upstream model (an
// OpenAI-compatible server): the request becomes an OpenAI chat completion
// request, streamed, and the upstream's chunks become Ollama's replies.

// openAIMessage is an OpenAI chat message.
type openAIMessage struct {
	Role       string           `json:"role"`
	Content    string           `json:"content"`
	ToolCalls  []openAIToolCall `json:"tool_calls,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
	Name       string           `json:"name,omitempty"`
}

type openAIToolCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments,omitempty"`
	} `json:"function"`
}

// openAIChat is the forwarded request: only what Ollama's request says.
type openAIChat struct {
	Model            string            `json:"model"`
	Messages         []openAIMessage   `json:"messages"`
	Stream           bool              `json:"stream"`
	StreamOptions    map[string]bool   `json:"stream_options"`
	Tools            []json.RawMessage `json:"tools,omitempty"`
	ResponseFormat   any               `json:"response_format,omitempty"`
	Temperature      *float64          `json:"temperature,omitempty"`
	TopP             *float64          `json:"top_p,omitempty"`
	MaxTokens        *int              `json:"max_tokens,omitempty"`
	Stop             []string          `json:"stop,omitempty"`
	Seed             *int64            `json:"seed,omitempty"`
	PresencePenalty  *float64          `json:"presence_penalty,omitempty"`
	FrequencyPenalty *float64          `json:"frequency_penalty,omitempty"`
}

// ChatToOpenAI is the OpenAI chat request (JSON, streamed) for an Ollama
// chat request to an upstream model. Options without an OpenAI parameter
// (top_k, min_p, repeat_penalty, repeat_last_n, num_ctx) are the
// upstream's to choose; images are refused as on a local model.
func ChatToOpenAI(req *ChatRequest) ([]byte, error) {
	out := openAIChat{Model: req.Model}
	for i, m := range req.Messages {
		if len(m.Images) > 0 {
			return nil, invalid(fmt.Sprintf("messages[%d].images", i), "images are not supported: the model reads text only")
		}
		om := openAIMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		if m.Role == "tool" && m.ToolCallID == "" {
			om.Name = m.ToolName
		}
		for j, c := range m.ToolCalls {
			tc := openAIToolCall{Index: j, ID: c.ID, Type: "function"}
			if tc.ID == "" {
				tc.ID = fmt.Sprintf("call_%d_%d", i, j)
			}
			tc.Function.Name, tc.Function.Arguments = c.Function.Name, string(c.Function.Arguments)
			om.ToolCalls = append(om.ToolCalls, tc)
		}
		out.Messages = append(out.Messages, om)
	}
	out.Tools = req.Tools
	return openAIFinish(out, req.Format, req.Options)
}

// GenerateToOpenAI is the OpenAI chat request for an Ollama generate
// request to an upstream model: its system and prompt as two messages (the
// upstream applies its own template). raw, suffix and template need the
// model's own template and are refused.
func GenerateToOpenAI(req *GenerateRequest) ([]byte, error) {
	switch {
	case req.Raw:
		return nil, invalid("raw", "raw is not supported for an upstream model: it applies its own template")
	case req.Suffix != "":
		return nil, invalid("suffix", "suffix is not supported for an upstream model")
	case req.Template != "":
		return nil, invalid("template", "template is not supported for an upstream model")
	case len(req.Images) > 0:
		return nil, invalid("images", "images are not supported: the model reads text only")
	}
	out := openAIChat{Model: req.Model}
	if req.System != "" {
		out.Messages = append(out.Messages, openAIMessage{Role: "system", Content: req.System})
	}
	out.Messages = append(out.Messages, openAIMessage{Role: "user", Content: req.Prompt})
	return openAIFinish(out, req.Format, req.Options)
}

func openAIFinish(out openAIChat, format json.RawMessage, o *Options) ([]byte, error) {
	out.Stream, out.StreamOptions = true, map[string]bool{"include_usage": true}
	switch f := strings.TrimSpace(string(format)); {
	case f == "" || f == "null" || f == `""`:
	case f == `"json"`:
		out.ResponseFormat = map[string]string{"type": "json_object"}
	case strings.HasPrefix(f, "{"):
		out.ResponseFormat = map[string]any{"type": "json_schema",
			"json_schema": map[string]any{"name": "format", "schema": json.RawMessage(f)}}
	default:
		return nil, invalid("format", `format must be "json" or a JSON schema object`)
	}
	if o != nil {
		out.Temperature, out.TopP, out.Stop, out.Seed = o.Temperature, o.TopP, o.Stop, o.Seed
		out.PresencePenalty, out.FrequencyPenalty = o.PresencePenalty, o.FrequencyPenalty
		if o.NumPredict != nil && *o.NumPredict > 0 {
			out.MaxTokens = o.NumPredict
		}
	}
	return json.Marshal(out)
}

// Relay turns an upstream's OpenAI chat chunks into Ollama replies.
type Relay struct {
	Model string // the model name the client asked for
	Start time.Time

	text   strings.Builder
	calls  map[int]*openAIToolCall
	reason string
	usage  struct{ prompt, completion int }
	first  time.Time // the first chunk: the end of the prompt's evaluation
}

// Chunk reads one chunk (an SSE event's data) and returns its text.
func (r *Relay) Chunk(data []byte) (string, error) {
	var c struct {
		Choices []struct {
			Delta struct {
				Content   string           `json:"content"`
				ToolCalls []openAIToolCall `json:"tool_calls"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return "", fmt.Errorf("the upstream sent a chunk that is not JSON")
	}
	if c.Error != nil {
		return "", fmt.Errorf("%s", c.Error.Message)
	}
	if r.first.IsZero() {
		r.first = time.Now()
	}
	if c.Usage != nil {
		r.usage.prompt, r.usage.completion = c.Usage.PromptTokens, c.Usage.CompletionTokens
	}
	var text strings.Builder
	for _, ch := range c.Choices {
		text.WriteString(ch.Delta.Content)
		for _, tc := range ch.Delta.ToolCalls {
			if r.calls == nil {
				r.calls = map[int]*openAIToolCall{}
			}
			acc := r.calls[tc.Index]
			if acc == nil {
				acc = &openAIToolCall{Index: tc.Index}
				r.calls[tc.Index] = acc
			}
			acc.ID += tc.ID
			acc.Function.Name += tc.Function.Name
			acc.Function.Arguments += tc.Function.Arguments
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			r.reason = *ch.FinishReason
		}
	}
	r.text.WriteString(text.String())
	return text.String(), nil
}

// Text is all the text so far.
func (r *Relay) Text() string { return r.text.String() }

// ToolCalls are the calls the upstream made, arguments as objects.
func (r *Relay) ToolCalls() []ToolCall {
	idx := make([]int, 0, len(r.calls))
	for i := range r.calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	var out []ToolCall
	for _, i := range idx {
		c := r.calls[i]
		args := json.RawMessage(c.Function.Arguments)
		if !json.Valid(args) {
			args = json.RawMessage(`{}`)
		}
		out = append(out, ToolCall{ID: c.ID, Function: FunctionCall{Index: i, Name: c.Function.Name, Arguments: args}})
	}
	return out
}

// Done is the last line's done_reason and metrics (durations measured
// here: the prompt's up to the first chunk, the rest to now).
func (r *Relay) Done() (string, *Metrics) {
	reason := "stop"
	if r.reason == "length" {
		reason = "length"
	}
	now := time.Now()
	first := r.first
	if first.IsZero() {
		first = now
	}
	return reason, &Metrics{TotalDuration: now.Sub(r.Start), PromptEvalCount: r.usage.prompt,
		PromptEvalDuration: first.Sub(r.Start), EvalCount: r.usage.completion, EvalDuration: now.Sub(first)}
}
