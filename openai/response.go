package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/sample"
)

// Meta is fixed for one response or stream.
type Meta struct {
	ID          string // "chatcmpl-…" or "cmpl-…"
	Created     int64  // Unix seconds
	Model       string
	Fingerprint string // system_fingerprint
}

// NewMeta returns a fresh id with prefix ("chatcmpl-" or "cmpl-").
func NewMeta(prefix, model string, now time.Time) Meta {
	return Meta{ID: apiconv.NewID(prefix), Created: now.Unix(), Model: model, Fingerprint: Fingerprint}
}

// Fingerprint is the system_fingerprint of every response.
const Fingerprint = "fp_hexserve"

// Usage is OpenAI's usage object.
type Usage struct {
	PromptTokens            int                     `json:"prompt_tokens"`
	CompletionTokens        int                     `json:"completion_tokens"`
	TotalTokens             int                     `json:"total_tokens"`
	PromptTokensDetails     PromptTokensDetails     `json:"prompt_tokens_details"`
	CompletionTokensDetails CompletionTokensDetails `json:"completion_tokens_details"`
}

// PromptTokensDetails breaks down the prompt tokens.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
	AudioTokens  int `json:"audio_tokens"`
}

// CompletionTokensDetails breaks down the completion tokens. The prediction
// counts are the Predicted Outputs tokens the model verified: accepted (in
// the output) and rejected (evaluated and discarded; unlike OpenAI's
// billing, not added to completion_tokens).
type CompletionTokensDetails struct {
	ReasoningTokens          int `json:"reasoning_tokens"`
	AudioTokens              int `json:"audio_tokens"`
	AcceptedPredictionTokens int `json:"accepted_prediction_tokens"`
	RejectedPredictionTokens int `json:"rejected_prediction_tokens"`
}

// Timings is llama.cpp's timings extension.
type Timings struct {
	CacheN              int     `json:"cache_n"`
	PromptN             int     `json:"prompt_n"`
	PromptMS            float64 `json:"prompt_ms"`
	PromptPerTokenMS    float64 `json:"prompt_per_token_ms"`
	PromptPerSecond     float64 `json:"prompt_per_second"`
	PredictedN          int     `json:"predicted_n"`
	PredictedMS         float64 `json:"predicted_ms"`
	PredictedPerTokenMS float64 `json:"predicted_per_token_ms"`
	PredictedPerSecond  float64 `json:"predicted_per_second"`
}

// ToUsage converts the engine's counts.
func ToUsage(u inference.Usage) *Usage {
	return &Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
		TotalTokens:         u.PromptTokens + u.CompletionTokens,
		PromptTokensDetails: PromptTokensDetails{CachedTokens: u.CachedTokens},
		CompletionTokensDetails: CompletionTokensDetails{ReasoningTokens: u.ReasoningTokens, AcceptedPredictionTokens: u.AcceptedPredictionTokens,
			RejectedPredictionTokens: u.RejectedPredictionTokens}}
}

// ToTimings converts the engine's timings.
func ToTimings(u inference.Usage, t inference.Timings) *Timings {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	out := &Timings{CacheN: u.CachedTokens, PromptN: t.PromptN, PromptMS: ms(t.PromptEval),
		PredictedN: t.PredictedN, PredictedMS: ms(t.Generation),
		PromptPerSecond: t.PromptPerSecond(), PredictedPerSecond: t.PredictedPerSecond()}
	if out.PromptN > 0 {
		out.PromptPerTokenMS = out.PromptMS / float64(out.PromptN)
	}
	// The first generated token's time is part of the prompt evaluation.
	if n := out.PredictedN - 1; n > 0 {
		out.PredictedPerTokenMS = out.PredictedMS / float64(n)
	}
	return out
}

// Envelope is a chat or completions response or stream frame: the members
// around its choices, of type C.
type Envelope[C any] struct {
	ID                string     `json:"id"`
	Object            string     `json:"object"` // "chat.completion", "chat.completion.chunk", "text_completion"
	Created           int64      `json:"created"`
	Model             string     `json:"model"`
	SystemFingerprint string     `json:"system_fingerprint"`
	Choices           []C        `json:"choices"`
	Usage             FrameUsage `json:"usage,omitzero"`
	Timings           *Timings   `json:"timings,omitempty"`
	PromptTokenIDs    []int32    `json:"prompt_token_ids,omitzero"`
}

// newEnvelope is an Envelope of m with the given object and choices.
func newEnvelope[C any](m Meta, object string, choices []C) *Envelope[C] {
	return &Envelope[C]{ID: m.ID, Object: object, Created: m.Created, Model: m.Model,
		SystemFingerprint: m.Fingerprint, Choices: choices}
}

// The responses and frames of each endpoint: a non-streaming chat
// response, a streamed chat frame, and a /v1/completions response or (with
// the same object "text_completion", as OpenAI does) one streamed frame.
type (
	ChatCompletion      = Envelope[ChatChoice]
	ChatCompletionChunk = Envelope[ChunkChoice]
	Completion          = Envelope[CompletionChoice]
)

// ChatChoice is one choice of a ChatCompletion.
type ChatChoice struct {
	Index        int             `json:"index"`
	Message      ResponseMessage `json:"message"`
	Logprobs     *ChatLogprobs   `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
	TokenIDs     []int32         `json:"token_ids,omitzero"`
}

// ResponseMessage is the assistant's reply; Content is null for tool calls.
type ResponseMessage struct {
	Role    string  `json:"role"`
	Content *string `json:"content"`
	// ReasoningContent is the model's reasoning (vLLM's and llama.cpp's
	// field), left out when it gave none.
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	Refusal          *string    `json:"refusal"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// ChatLogprobs is a chat choice's logprobs object.
type ChatLogprobs struct {
	Content []TokenLogprob `json:"content"`
	Refusal *string        `json:"refusal"`
}

// TokenLogprob is one generated token's entry in ChatLogprobs.
type TokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []TopLogprob `json:"top_logprobs"`
}

// TopLogprob is one alternative in TokenLogprob.TopLogprobs.
type TopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// FrameUsage is a response's or stream frame's usage: left out (the zero
// value), JSON null (Null: OpenAI's frames before the usage frame when
// include_usage is set), or the counts.
type FrameUsage struct {
	*Usage
	Null bool // with a nil Usage: write null rather than leave the field out
}

// IsZero reports whether the field is left out.
func (u FrameUsage) IsZero() bool { return u.Usage == nil && !u.Null }

// MarshalJSON writes the counts, or null.
func (u FrameUsage) MarshalJSON() ([]byte, error) {
	if u.Usage == nil {
		return []byte("null"), nil
	}
	return json.Marshal(u.Usage)
}

// UnmarshalJSON reads the counts, or null.
func (u *FrameUsage) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*u = FrameUsage{Null: true}
		return nil
	}
	*u = FrameUsage{Usage: new(Usage)}
	return json.Unmarshal(b, u.Usage)
}

// ChunkChoice is one choice's part of a chunk.
type ChunkChoice struct {
	Index        int           `json:"index"`
	Delta        Delta         `json:"delta"`
	Logprobs     *ChatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
	TokenIDs     []int32       `json:"token_ids,omitzero"`
}

// Delta is the new part of the message.
type Delta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCallDelta `json:"tool_calls,omitempty"`
}

// ToolCallDelta is a streamed piece of a tool call: the first carries id,
// type and name, later ones argument fragments.
type ToolCallDelta struct {
	Index    int               `json:"index"`
	ID       string            `json:"id,omitempty"`
	Type     string            `json:"type,omitempty"`
	Function FunctionCallDelta `json:"function"`
}

// FunctionCallDelta is the function part of a ToolCallDelta.
type FunctionCallDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// CompletionChoice is one completion; FinishReason is null in stream frames
// before the last.
type CompletionChoice struct {
	Text         string              `json:"text"`
	Index        int                 `json:"index"`
	Logprobs     *CompletionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
	TokenIDs     []int32             `json:"token_ids,omitzero"`
}

// CompletionLogprobs is the legacy completions logprobs object.
type CompletionLogprobs struct {
	Tokens        []string    `json:"tokens"`
	TokenLogprobs []float64   `json:"token_logprobs"`
	TopLogprobs   []TopTokens `json:"top_logprobs"`
	// TextOffset is each token's offset in characters (Unicode code
	// points, as OpenAI's) into the choice's text, the echoed prompt
	// included; a token that ends inside a character adds it only with the
	// token that completes it.
	TextOffset []int `json:"text_offset"`
}

// TopTokens is one token's alternatives in the legacy completions
// logprobs: a JSON object from token to logprob whose keys come in the
// sampler's order, most likely first, as OpenAI's (a Go map would sort
// them by token).
type TopTokens []TopLogprob

// MarshalJSON writes the object, keys in order; a token seen twice keeps
// its first entry.
func (t TopTokens) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	seen := make(map[string]bool, len(t))
	for _, e := range t {
		if seen[e.Token] {
			continue
		}
		seen[e.Token] = true
		if len(b) > 1 {
			b = append(b, ',')
		}
		k, err := json.Marshal(e.Token)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(e.Logprob)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads the object, keys in order.
func (t *TopTokens) UnmarshalJSON(b []byte) error {
	d := json.NewDecoder(bytes.NewReader(b))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("top_logprobs entry: want an object")
	}
	*t = (*t)[:0]
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return err
		}
		var v float64
		if err := d.Decode(&v); err != nil {
			return err
		}
		*t = append(*t, TopLogprob{Token: k.(string), Logprob: v})
	}
	_, err := d.Token()
	return err
}

func byteInts(b []byte) []int {
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}

func chatLogprobs(lps []sample.Logprob) *ChatLogprobs {
	out := &ChatLogprobs{Content: make([]TokenLogprob, len(lps))}
	for i, lp := range lps {
		t := TokenLogprob{Token: string(lp.Bytes), Logprob: float64(lp.Logprob), Bytes: byteInts(lp.Bytes),
			TopLogprobs: make([]TopLogprob, len(lp.Top))}
		for j, alt := range lp.Top {
			t.TopLogprobs[j] = TopLogprob{Token: string(alt.Bytes), Logprob: float64(alt.Logprob), Bytes: byteInts(alt.Bytes)}
		}
		out.Content[i] = t
	}
	return out
}

// textOffset is the text offset (in characters) of a choice's next token.
type textOffset struct {
	chars   int    // complete characters so far
	pending []byte // the bytes of a character not complete yet
}

// completionLogprobs converts lps, advancing at.
func completionLogprobs(lps []sample.Logprob, at *textOffset) *CompletionLogprobs {
	out := &CompletionLogprobs{Tokens: make([]string, len(lps)), TokenLogprobs: make([]float64, len(lps)),
		TopLogprobs: make([]TopTokens, len(lps)), TextOffset: make([]int, len(lps))}
	for i, lp := range lps {
		out.Tokens[i] = string(lp.Bytes)
		out.TokenLogprobs[i] = float64(lp.Logprob)
		top := make(TopTokens, len(lp.Top))
		for j, alt := range lp.Top {
			top[j] = TopLogprob{Token: string(alt.Bytes), Logprob: float64(alt.Logprob)}
		}
		out.TopLogprobs[i] = top
		out.TextOffset[i] = at.chars
		at.pending = append(at.pending, lp.Bytes...)
		n := completeChars(at.pending)
		at.chars += utf8.RuneCount(at.pending[:n])
		at.pending = append(at.pending[:0], at.pending[n:]...)
	}
	return out
}

// completeChars is the length of b's longest prefix that does not end
// inside a character: all of b but a last character still missing bytes.
func completeChars(b []byte) int {
	for k := 1; k < utf8.UTFMax && k <= len(b); k++ {
		if c := b[len(b)-k]; utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-k:]) {
				return len(b) - k
			}
			break
		}
	}
	return len(b)
}

// finishReason maps the engine's reason to OpenAI's; a timeout reads as "length".
var finishReason = apiconv.FinishReason

// ToolCalls parses a choice's whole text, which ended with f, as calls of
// g's tools; ok is false when it is ordinary content. A forced call that
// the token limit cut off is read as far as it came.
func (g *Generation) ToolCalls(text string, f inference.FinishReason) ([]ToolCall, bool) {
	_, calls, ok := g.reply(text, f)
	return calls, ok
}

// reply is ToolCalls with the content before the calls.
func (g *Generation) reply(text string, f inference.FinishReason) (string, []ToolCall, bool) {
	return apiconv.ToolCallsAs(g.ToolFormat, text, g.callable(), true, g.cut(f), func(_ int, c chat.ToolCall) ToolCall {
		return ToolCall{ID: c.ID, Type: "function", Function: FunctionCall{Name: c.Name, Arguments: Arguments(c.Arguments)}}
	})
}

// cut reports whether a choice that ended with f is a forced call that
// the token limit cut off.
func (g *Generation) cut(f inference.FinishReason) bool {
	return g.ForcedTools && finishReason(f) == "length"
}

// callable is the names a call can have: the forced one, else the tools'.
func (g *Generation) callable() []string {
	if g.ForcedName != "" {
		return []string{g.ForcedName}
	}
	return g.Tools
}

// callsFinish is the finish_reason of a choice of tool calls: "tool_calls",
// "stop" for the call of a named tool_choice (as OpenAI gives, and vLLM
// since), or "length" when the limit cut them.
func (g *Generation) callsFinish(reason string) string {
	switch {
	case reason == "length":
		return reason
	case g.ForcedName != "":
		return "stop"
	}
	return "tool_calls"
}

// whole is a non-streaming response with res's usage and timings, and the
// prompt's ids when asked for.
func whole[C any](g *Generation, m Meta, object string, choices []C, res inference.Result) *Envelope[C] {
	out := newEnvelope(m, object, choices)
	out.Usage, out.Timings = FrameUsage{Usage: ToUsage(res.Usage)}, ToTimings(res.Usage, res.Timings)
	if g.ReturnTokenIDs {
		out.PromptTokenIDs = nonNil(g.Request.Prompt)
	}
	return out
}

// ToChatCompletion builds the non-streaming chat response.
func ToChatCompletion(g *Generation, m Meta, res inference.Result) *ChatCompletion {
	out := whole(g, m, "chat.completion", make([]ChatChoice, len(res.Choices)), res)
	for i, c := range res.Choices {
		ch := ChatChoice{Index: i, Message: ResponseMessage{Role: "assistant"}, FinishReason: finishReason(c.Finish)}
		if c.Reasoning != "" {
			ch.Message.ReasoningContent = &c.Reasoning
		}
		if content, calls, ok := g.reply(c.Text, c.Finish); ok {
			ch.Message.ToolCalls, ch.FinishReason = calls, g.callsFinish(ch.FinishReason)
			if content != "" {
				ch.Message.Content = &content
			}
		} else {
			text := c.Text
			ch.Message.Content = &text
		}
		if g.Request.Logprobs {
			ch.Logprobs = chatLogprobs(c.Logprobs)
		}
		if g.ReturnTokenIDs {
			ch.TokenIDs = nonNil(c.Tokens)
		}
		out.Choices[i] = ch
	}
	return out
}

// ToCompletion builds the non-streaming completions response.
func ToCompletion(g *Generation, m Meta, res inference.Result) *Completion {
	out := whole(g, m, "text_completion", make([]CompletionChoice, len(res.Choices)), res)
	for i, c := range res.Choices {
		f := finishReason(c.Finish)
		ch := CompletionChoice{Text: g.Echo + c.Text, Index: i, FinishReason: &f}
		if g.Request.Logprobs {
			ch.Logprobs = completionLogprobs(c.Logprobs, &textOffset{chars: utf8.RuneCountInString(g.Echo)})
		}
		if g.ReturnTokenIDs {
			ch.TokenIDs = nonNil(c.Tokens)
		}
		out.Choices[i] = ch
	}
	return out
}

func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}
