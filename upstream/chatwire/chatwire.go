// Package chatwire is the client side of an OpenAI-compatible chat
// completions API, for the APIs whose requests for an upstream model are
// converted (Anthropic's, Ollama's): the request they become, streamed, and
// a reader of the upstream's chunks. Only the fields these conversions use
// are here; the server side of the API is package openai.
package chatwire

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// UpstreamChat is the chat request sent to an upstream model: only what
// the converted request says; Marshal asks for a stream with usage.
type UpstreamChat struct {
	Model             string            `json:"model"`
	Messages          []Message         `json:"messages"`
	Stream            bool              `json:"stream"`
	StreamOptions     *StreamOptions    `json:"stream_options,omitempty"`
	Tools             []json.RawMessage `json:"tools,omitempty"`
	ToolChoice        any               `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool             `json:"parallel_tool_calls,omitempty"`
	ResponseFormat    any               `json:"response_format,omitempty"`
	Temperature       *float64          `json:"temperature,omitempty"`
	TopP              *float64          `json:"top_p,omitempty"`
	MaxTokens         *int              `json:"max_tokens,omitempty"`
	Stop              []string          `json:"stop,omitempty"`
	Seed              *int64            `json:"seed,omitempty"`
	PresencePenalty   *float64          `json:"presence_penalty,omitempty"`
	FrequencyPenalty  *float64          `json:"frequency_penalty,omitempty"`
}

// Marshal is the request's JSON, streamed with a final usage chunk.
func (c UpstreamChat) Marshal() ([]byte, error) {
	c.Stream, c.StreamOptions = true, &StreamOptions{IncludeUsage: true}
	return json.Marshal(c)
}

// StreamOptions is the request's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Message is one chat message of the request.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is an assistant's function call (Arguments: a JSON document
// encoded as a string), or in a chunk a piece of one: the first carries
// its Index, id, type and name, later ones argument fragments.
type ToolCall struct {
	Index    int          `json:"index,omitempty"` // a chunk's; not sent
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its arguments.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Usage is the part of the upstream's usage the conversions report.
type Usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// ChunkDelta is what one upstream chunk adds: text and pieces of tool
// calls (of the first choice; the converted requests ask for one).
type ChunkDelta struct {
	Text      string
	ToolCalls []ToolCall
}

// ChunkReader reads an upstream's chat chunks (each SSE event's data) and
// keeps the whole reply: its text, tool calls, finish reason and usage.
// Not safe for concurrent use.
type ChunkReader struct {
	text    strings.Builder
	calls   map[int]*ToolCall
	finish  string
	matched string
	usage   Usage
	chunks  int
}

// ChunkError is an error the upstream sent in its stream.
type ChunkError struct{ Message string }

func (e *ChunkError) Error() string { return e.Message }

// Read reads one chunk. A chunk that is not JSON is an error; so is an
// error chunk ({"error": …}), as a *ChunkError.
func (r *ChunkReader) Read(data []byte) (ChunkDelta, error) {
	var c struct {
		Choices []struct {
			Index int `json:"index"`
			Delta struct {
				Content   *string    `json:"content"`
				ToolCalls []ToolCall `json:"tool_calls"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
			// vLLM's stop_reason and SGLang's matched_stop: the stop
			// string that ended the choice (or a token id).
			StopReason  json.RawMessage `json:"stop_reason"`
			MatchedStop json.RawMessage `json:"matched_stop"`
		} `json:"choices"`
		Usage *Usage `json:"usage"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return ChunkDelta{}, fmt.Errorf("the upstream sent a chunk that is not JSON")
	}
	if c.Error != nil {
		return ChunkDelta{}, &ChunkError{Message: c.Error.Message}
	}
	r.chunks++
	if c.Usage != nil {
		r.usage = *c.Usage
	}
	var d ChunkDelta
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		if ch.Delta.Content != nil {
			d.Text += *ch.Delta.Content
		}
		for _, tc := range ch.Delta.ToolCalls {
			r.addCall(tc)
			d.ToolCalls = append(d.ToolCalls, tc)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			r.finish = *ch.FinishReason
		}
		for _, m := range []json.RawMessage{ch.StopReason, ch.MatchedStop} {
			var s string
			if json.Unmarshal(m, &s) == nil && s != "" {
				r.matched = s
			}
		}
	}
	r.text.WriteString(d.Text)
	return d, nil
}

func (r *ChunkReader) addCall(tc ToolCall) {
	if r.calls == nil {
		r.calls = map[int]*ToolCall{}
	}
	acc := r.calls[tc.Index]
	if acc == nil {
		acc = &ToolCall{Type: "function"}
		r.calls[tc.Index] = acc
	}
	acc.ID += tc.ID
	acc.Function.Name += tc.Function.Name
	acc.Function.Arguments += tc.Function.Arguments
}

// Chunks is the number of chunks read.
func (r *ChunkReader) Chunks() int { return r.chunks }

// Text is all the text so far.
func (r *ChunkReader) Text() string { return r.text.String() }

// ToolCalls are the calls so far, by index, their arguments as sent.
func (r *ChunkReader) ToolCalls() []ToolCall {
	idx := make([]int, 0, len(r.calls))
	for i := range r.calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	out := make([]ToolCall, 0, len(idx))
	for _, i := range idx {
		out = append(out, *r.calls[i])
	}
	return out
}

// Finish is the last finish_reason ("stop", "length", "tool_calls",
// "content_filter"); "" when none came.
func (r *ChunkReader) Finish() string { return r.finish }

// MatchedStop is the stop string the upstream says ended the reply (vLLM's
// stop_reason, SGLang's matched_stop); "" when it does not say.
func (r *ChunkReader) MatchedStop() string { return r.matched }

// Usage is the upstream's usage chunk (zero when it sent none).
func (r *ChunkReader) Usage() Usage { return r.usage }
