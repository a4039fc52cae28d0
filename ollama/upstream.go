package ollama

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hexserve/hexserve/upstream/chatwire"
)

// The conversions below serve an Ollama request from an upstream model (an
// OpenAI-compatible server): the request becomes an OpenAI chat completion
// request, streamed, and the upstream's chunks become Ollama's replies.

// ChatToOpenAI is the OpenAI chat request (JSON, streamed) for an Ollama
// chat request to an upstream model. Options without an OpenAI parameter
// (top_k, min_p, repeat_penalty, repeat_last_n, num_ctx) are the
// upstream's to choose; images are refused as on a local model.
func ChatToOpenAI(req *ChatRequest) ([]byte, error) {
	out := chatwire.UpstreamChat{Model: req.Model}
	for i, m := range req.Messages {
		if len(m.Images) > 0 {
			return nil, invalid(fmt.Sprintf("messages[%d].images", i), "images are not supported: the model reads text only")
		}
		om := chatwire.Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		if m.Role == "tool" && m.ToolCallID == "" {
			om.Name = m.ToolName
		}
		for j, c := range m.ToolCalls {
			tc := chatwire.ToolCall{ID: c.ID, Type: "function",
				Function: chatwire.FunctionCall{Name: c.Function.Name, Arguments: string(c.Function.Arguments)}}
			if tc.ID == "" {
				tc.ID = fmt.Sprintf("call_%d_%d", i, j)
			}
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
	out := chatwire.UpstreamChat{Model: req.Model}
	if req.System != "" {
		out.Messages = append(out.Messages, chatwire.Message{Role: "system", Content: req.System})
	}
	out.Messages = append(out.Messages, chatwire.Message{Role: "user", Content: req.Prompt})
	return openAIFinish(out, req.Format, req.Options)
}

func openAIFinish(out chatwire.UpstreamChat, format json.RawMessage, o *Options) ([]byte, error) {
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
	return out.Marshal()
}

// Relay turns an upstream's OpenAI chat chunks into Ollama replies.
type Relay struct {
	Model string // the model name the client asked for
	Start time.Time

	rd    chatwire.ChunkReader
	first time.Time // the first chunk: the end of the prompt's evaluation
}

// Chunk reads one chunk (an SSE event's data) and returns its text.
func (r *Relay) Chunk(data []byte) (string, error) {
	d, err := r.rd.Read(data)
	if err != nil {
		return "", err
	}
	if r.first.IsZero() {
		r.first = time.Now()
	}
	return d.Text, nil
}

// Text is all the text so far.
func (r *Relay) Text() string { return r.rd.Text() }

// ToolCalls are the calls the upstream made, arguments as objects.
func (r *Relay) ToolCalls() []ToolCall {
	var out []ToolCall
	for i, c := range r.rd.ToolCalls() {
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
	if r.rd.Finish() == "length" {
		reason = "length"
	}
	now := time.Now()
	first := r.first
	if first.IsZero() {
		first = now
	}
	u := r.rd.Usage()
	return reason, &Metrics{TotalDuration: now.Sub(r.Start), PromptEvalCount: u.PromptTokens,
		PromptEvalDuration: first.Sub(r.Start), EvalCount: u.CompletionTokens, EvalDuration: now.Sub(first)}
}
