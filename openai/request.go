package openai

import (
	"bytes"
	"encoding/json"
	"reflect"
)

// ChatCompletionRequest is the body of POST /v1/chat/completions. Pointer
// fields distinguish "left out" (server default) from a given zero.
type ChatCompletionRequest struct {
	Model               string            `json:"model"`
	Messages            []Message         `json:"messages"`
	MaxTokens           *int              `json:"max_tokens"`
	MaxCompletionTokens *int              `json:"max_completion_tokens"`
	Logprobs            *bool             `json:"logprobs"`
	TopLogprobs         *int              `json:"top_logprobs"`
	Tools               []json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls   *bool             `json:"parallel_tool_calls"`
	ResponseFormat      json.RawMessage   `json:"response_format"`
	Audio               json.RawMessage   `json:"audio"`
	Modalities          []string          `json:"modalities"`
	Functions           json.RawMessage   `json:"functions"`
	FunctionCall        json.RawMessage   `json:"function_call"`
	ChatTemplateKwargs  *TemplateKwargs   `json:"chat_template_kwargs"`
	// ReasoningEffort switches a reasoning model's thinking: "none" and
	// "minimal" off, "low", "medium" and "high" on.
	ReasoningEffort string `json:"reasoning_effort"`
	CommonParams
}

// TemplateKwargs are vLLM's chat_template_kwargs: the Llama-3.2 template's
// own three are options of the native renderer, and every other one (Other,
// e.g. Qwen3's enable_thinking) is a variable of the model's template.
type TemplateKwargs struct {
	DateString *string `json:"date_string"`
	// CustomTools, when present, replaces tools in the prompt (null: none).
	CustomTools        json.RawMessage            `json:"custom_tools"`
	ToolsInUserMessage *bool                      `json:"tools_in_user_message"`
	Other              map[string]json.RawMessage `json:"-"`
}

// UnmarshalJSON reads the three named kwargs and keeps the others in Other.
func (k *TemplateKwargs) UnmarshalJSON(b []byte) error {
	type named TemplateKwargs
	if err := json.Unmarshal(b, (*named)(k)); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &k.Other); err != nil {
		return err
	}
	for _, name := range []string{"date_string", "custom_tools", "tools_in_user_message"} {
		delete(k.Other, name)
	}
	return nil
}

// CompletionRequest is the body of POST /v1/completions.
type CompletionRequest struct {
	Model     string  `json:"model"`
	Prompt    Prompt  `json:"prompt"`
	MaxTokens *int    `json:"max_tokens"`
	Logprobs  *int    `json:"logprobs"`
	Echo      bool    `json:"echo"`
	Suffix    *string `json:"suffix"`
	BestOf    *int    `json:"best_of"`
	// ResponseFormat is chat completions' response_format (an extension).
	ResponseFormat json.RawMessage `json:"response_format"`
	// NKeep is how many prompt tokens after BOS a truncating
	// context_overflow, and a context shift, keep at the start (llama.cpp's
	// n_keep; -1: all).
	NKeep *int `json:"n_keep"`
	CommonParams
}

// CommonParams are the sampling and streaming parameters both endpoints
// share; both request types embed them (the wire keys stay top-level).
type CommonParams struct {
	// ContextOverflow is the policy for a prompt over the window: "error",
	// "truncate_middle" or "rolling"; "": the model's, else "error".
	ContextOverflow string `json:"context_overflow"`
	// ContextShift (nil: the model's context_shift, else false) goes on
	// generating past the window, keeping the system prefix (completions:
	// BOS and n_keep tokens) and the newest tokens.
	ContextShift      *bool              `json:"context_shift"`
	Temperature       *float64           `json:"temperature"`
	TopP              *float64           `json:"top_p"`
	N                 *int               `json:"n"`
	Stop              Stop               `json:"stop"`
	Seed              *int64             `json:"seed"`
	PresencePenalty   *float64           `json:"presence_penalty"`
	FrequencyPenalty  *float64           `json:"frequency_penalty"`
	LogitBias         map[string]float64 `json:"logit_bias"`
	Stream            bool               `json:"stream"`
	StreamOptions     *StreamOptions     `json:"stream_options"`
	User              string             `json:"user"`
	PromptCacheKey    string             `json:"prompt_cache_key"`
	TopK              *int               `json:"top_k"`
	MinP              *float64           `json:"min_p"`
	RepetitionPenalty *float64           `json:"repetition_penalty"`
	ReturnTokenIDs    bool               `json:"return_token_ids"`
	// Prediction is OpenAI's Predicted Outputs ({"type": "content",
	// "content": ...}); on /v1/completions an extension.
	Prediction json.RawMessage `json:"prediction"`
}

// StreamOptions is the stream_options object.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Stop is the stop parameter: null, a string, or an array of strings.
type Stop []string

// UnmarshalJSON accepts null, a string or an array of strings.
func (s *Stop) UnmarshalJSON(b []byte) error {
	one, many, err := stringOrArray[string](b, stopType, "a value other than a string or an array of strings")
	switch {
	case err != nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("[")):
		return &json.UnmarshalTypeError{Value: "array with a non-string element", Type: stopType}
	case one != nil:
		*s = Stop{*one}
	default:
		*s = many
	}
	return err
}

var stopType = reflect.TypeFor[Stop]()

// Prompt is the completions prompt: a string, an array of strings, an array
// of token ids, or an array of token-id arrays. The decoder keeps whichever
// form was sent; FromCompletionRequest accepts only a single prompt.
type Prompt struct {
	Texts  []string  // string form (one element) or array of strings
	Tokens [][]int64 // array of ids (one element) or array of arrays
	Set    bool      // the field was present and not null
}

// UnmarshalJSON accepts the four OpenAI prompt forms.
func (p *Prompt) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*p = Prompt{}
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	p.Set = true
	var s string
	if json.Unmarshal(b, &s) == nil {
		p.Texts = []string{s}
		return nil
	}
	var ss []string
	if json.Unmarshal(b, &ss) == nil {
		p.Texts = ss
		return nil
	}
	var ids []int64
	if json.Unmarshal(b, &ids) == nil {
		p.Tokens = [][]int64{ids}
		return nil
	}
	var idss [][]int64
	if json.Unmarshal(b, &idss) == nil {
		p.Tokens = idss
		return nil
	}
	return &json.UnmarshalTypeError{Value: "a value other than a string, an array of strings, an array of token ids or an array of token-id arrays", Type: promptType}
}

var promptType = reflect.TypeFor[Prompt]()
