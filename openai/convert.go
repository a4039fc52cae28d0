package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/overflow"
)

// Limits of this server that are stricter or looser than OpenAI's.
const (
	MaxN           = inference.MaxChoices // choices per request
	MaxStops       = inference.MaxStops   // stop strings (OpenAI allows 4)
	MaxTopLogprobs = 20                   // chat top_logprobs and completions logprobs (OpenAI: 20 and 5)
	// DefaultCompletionMaxTokens is OpenAI's max_tokens default for
	// /v1/completions, used when neither the request nor the server sets one.
	DefaultCompletionMaxTokens = 16
)

// Generation is a validated request: the engine request plus what building
// the response needs.
type Generation struct {
	Request        inference.Request
	Stream         bool
	IncludeUsage   bool
	ReturnTokenIDs bool
	// Tools are the callable function names; nil: the output is never
	// parsed as tool calls (no tools, or tool_choice "none").
	Tools []string
	// ForcedTools: tool_choice forces a call, so output that the token
	// limit cut off is still read as calls (apiconv.CutToolCalls).
	ForcedTools bool
	// ToolFormat is how the model writes calls (apiconv.Params.ToolFormat).
	ToolFormat apiconv.ToolFormat
	// ForcedName is the function a named tool_choice forces: the only
	// name a call can have, however early the limit cut it.
	ForcedName string
	// Echo is the prompt text prepended to each completion (completions echo).
	Echo string
}

// FromChatCompletionRequest validates r and builds the prompt: messages are
// rendered with chat.RenderSegments and encoded segment by segment, so
// special-token text inside message content stays plain text.
func FromChatCompletionRequest(r *ChatCompletionRequest, p apiconv.Params) (*Generation, error) {
	g := &Generation{}
	if err := rejectUnsupportedChat(r); err != nil {
		return nil, err
	}
	if err := common(&r.CommonParams, p, g); err != nil {
		return nil, err
	}
	maxTokens, param := r.MaxTokens, "max_tokens"
	if r.MaxCompletionTokens != nil {
		maxTokens, param = r.MaxCompletionTokens, "max_completion_tokens"
	}
	if err := setMaxTokens(g, maxTokens, param, p); err != nil {
		return nil, err
	}
	if err := setLogprobs(g, r.Logprobs, r.TopLogprobs); err != nil {
		return nil, err
	}

	mode, err := toolChoice(r.ToolChoice)
	if err != nil {
		return nil, err
	}
	names, err := apiconv.ToolNames(r.Tools)
	if err != nil {
		return nil, err
	}
	opt := p.ChatOptions()
	tools, err := r.ChatTemplateKwargs.Apply(&opt, r.Tools)
	if err != nil {
		return nil, err
	}
	apiNames := names // forced calls follow the API's tools, whatever the template shows
	if k := r.ChatTemplateKwargs; k != nil && len(k.CustomTools) > 0 {
		names = customToolNames(tools)
	}
	if !mode.off && len(tools) > 0 {
		opt.Tools = tools
		g.Tools, g.ToolFormat = names, p.ToolFormat
	}
	thinking, err := apiconv.EffortThinking(r.ReasoningEffort, "reasoning_effort")
	if err != nil {
		return nil, err
	}
	apiconv.ApplyThinking(&opt, thinking)
	msgs, err := ToChatMessages(r.Messages)
	if err != nil {
		return nil, err
	}
	p.SplitTurns(msgs)
	if err = fitChat(g, &r.CommonParams, msgs, opt, p); err != nil {
		return nil, err
	}
	// The grammar last: a prompt too long for the window is refused before
	// a schema is compiled (cheap checks first).
	gr, err := FormatGrammar(r.ResponseFormat, "response_format", false, p.GrammarOptions())
	if err != nil {
		return nil, err
	}
	if mode.required {
		if gr != nil {
			return nil, invalid("response_format", "response_format cannot be combined with tool_choice %q", "required")
		}
		parallel := r.ParallelToolCalls == nil || *r.ParallelToolCalls
		if gr, err = toolGrammar(r.Tools, apiNames, mode, parallel, p.GrammarOptions()); err != nil {
			return nil, err
		}
		g.ForcedTools, g.ForcedName = true, mode.name
	}
	if err := constrain(g, gr, p); err != nil {
		return nil, err
	}
	p.Reason(&g.Request, thinking)
	return g, nil
}

// setLogprobs sets g's logprobs and top_logprobs (at most MaxTopLogprobs;
// more than 0 only with logprobs).
func setLogprobs(g *Generation, lp *bool, top *int) error {
	logprobs := lp != nil && *lp
	if top != nil {
		switch {
		case *top < 0 || *top > MaxTopLogprobs:
			return invalid("top_logprobs", "top_logprobs must be between 0 and %d, got %d", MaxTopLogprobs, *top)
		case !logprobs && *top > 0: // an explicit 0 is the default, and clients send it
			return invalid("top_logprobs", "top_logprobs requires logprobs to be true")
		}
		g.Request.TopLogprobs = *top
	}
	g.Request.Logprobs = logprobs
	return nil
}

// FromCompletionRequest validates r and tokenizes its prompt. A string
// prompt is encoded with special-token parsing and BOS prepended unless it
// already starts with one; a token-id prompt is used exactly as given.
func FromCompletionRequest(r *CompletionRequest, p apiconv.Params) (*Generation, error) {
	g := &Generation{}
	switch {
	case r.Suffix != nil && *r.Suffix != "":
		return nil, invalid("suffix", "suffix (fill-in-the-middle) is not supported by this model")
	case r.BestOf != nil && r.N != nil && *r.BestOf < *r.N:
		return nil, invalid("best_of", "best_of must be greater than or equal to n")
	case r.BestOf != nil && *r.BestOf != 1:
		return nil, invalid("best_of", "best_of other than 1 is not supported")
	}
	if err := common(&r.CommonParams, p, g); err != nil {
		return nil, err
	}
	if p.MaxTokens == 0 {
		p.MaxTokens = DefaultCompletionMaxTokens
	}
	if err := setMaxTokens(g, r.MaxTokens, "max_tokens", p); err != nil {
		return nil, err
	}
	gr, err := FormatGrammar(r.ResponseFormat, "response_format", false, p.GrammarOptions())
	if err != nil {
		return nil, err
	}
	if err := constrain(g, gr, p); err != nil {
		return nil, err
	}
	if r.Logprobs != nil {
		if *r.Logprobs < 0 || *r.Logprobs > MaxTopLogprobs {
			return nil, invalid("logprobs", "logprobs must be between 0 and %d, got %d", MaxTopLogprobs, *r.Logprobs)
		}
		g.Request.Logprobs, g.Request.TopLogprobs = true, *r.Logprobs
		if r.Echo {
			return nil, invalid("echo", "echo together with logprobs is not supported (prompt logprobs are not computed)")
		}
	}
	tok := p.Tokenizer
	pr := r.Prompt
	switch {
	case !pr.Set:
		return nil, invalid("prompt", "prompt is required")
	case len(pr.Texts) > 1 || len(pr.Tokens) > 1:
		return nil, invalid("prompt", "only one prompt per request is supported; send several prompts as separate requests")
	case len(pr.Texts) == 1:
		g.Request.Prompt = apiconv.EncodeText(tok, pr.Texts[0])
		g.Echo = pr.Texts[0]
	case len(pr.Tokens) == 1:
		ids := pr.Tokens[0]
		if len(ids) == 0 {
			return nil, invalid("prompt", "the prompt has no tokens")
		}
		vocab := tok.VocabSize()
		g.Request.Prompt = make([]int32, len(ids))
		for i, id := range ids {
			if id < 0 || id >= int64(vocab) {
				return nil, invalid("prompt", "token id %d at prompt[%d] is outside the vocabulary [0, %d)", id, i, vocab)
			}
			g.Request.Prompt[i] = int32(id)
		}
		g.Echo = tok.Decode(g.Request.Prompt, false)
	default:
		return nil, invalid("prompt", "prompt must not be an empty array")
	}
	if !r.Echo {
		g.Echo = ""
	}
	return g, fitCompletion(r, p, g)
}

// fitChat encodes msgs into g's prompt within p's window under c's
// context_overflow (default: the model's, else error), and sets its
// context_shift (default: the model's, else off), keeping the system
// prefix.
func fitChat(g *Generation, c *CommonParams, msgs []chat.Message, opt chat.Options, p apiconv.Params) error {
	pol, err := p.Policy(c.ContextOverflow, "context_overflow", overflow.Error)
	if err != nil {
		return err
	}
	f, err := p.FitChat(msgs, opt, "", pol, g.Request.MaxTokens)
	if err != nil {
		return err
	}
	g.Request.Prompt = f.Prompt
	p.ShiftChat(&g.Request, p.ContextShift(c.ContextShift, false), msgs, opt)
	return nil
}

// fitCompletion fits g's raw prompt in the window under r's
// context_overflow, keeping n_keep tokens after BOS and the newest tail.
func fitCompletion(r *CompletionRequest, p apiconv.Params, g *Generation) error {
	pol, err := p.Policy(r.ContextOverflow, "context_overflow", overflow.Error)
	if err != nil {
		return err
	}
	keep := 0
	if r.NKeep != nil {
		switch keep = *r.NKeep; {
		case keep == -1:
			keep = len(g.Request.Prompt) // all of it: a prompt over the window is refused
		case keep < 0:
			return invalid("n_keep", "n_keep must be -1 (the whole prompt) or >= 0, got %d", keep)
		}
	}
	if g.Request.Prompt, err = p.FitText(g.Request.Prompt, keep, pol, g.Request.MaxTokens); err != nil {
		return err
	}
	if g.Request.ContextShift = p.ContextShift(r.ContextShift, false); g.Request.ContextShift {
		g.Request.Keep = p.TextSink(g.Request.Prompt, keep)
	}
	return nil
}

func setMaxTokens(g *Generation, v *int, param string, p apiconv.Params) error {
	g.Request.MaxTokens = p.MaxTokens
	if v != nil {
		if *v < 1 {
			return invalid(param, "%s must be at least 1, got %d", param, *v)
		}
		g.Request.MaxTokens = *v
	}
	return nil
}

// cacheKey is the KV store's hint: prompt_cache_key, else user (which
// OpenAI's prompt_cache_key replaces).
func cacheKey(c *CommonParams) string {
	if c.PromptCacheKey != "" {
		return apiconv.CacheKey(c.PromptCacheKey)
	}
	return apiconv.CacheKey(c.User)
}

// common validates the shared parameters into g.
func common(c *CommonParams, p apiconv.Params, g *Generation) error {
	s := p.Defaults
	if s.LogitBias != nil {
		s.LogitBias = nil // defaults never carry a bias
	}
	for _, err := range []error{
		apiconv.InRange(c.Temperature, "temperature", 0, 2, false, &s.Temperature),
		apiconv.InRange(c.TopP, "top_p", 0, 1, true, &s.TopP),
		apiconv.InRange(c.PresencePenalty, "presence_penalty", -2, 2, false, &s.PresencePenalty),
		apiconv.InRange(c.FrequencyPenalty, "frequency_penalty", -2, 2, false, &s.FrequencyPenalty),
		apiconv.InRange(c.MinP, "min_p", 0, 1, false, &s.MinP),
		apiconv.InRange(c.RepetitionPenalty, "repetition_penalty", 0, 10, true, &s.RepetitionPenalty),
	} {
		if err != nil {
			return err
		}
	}
	if c.TopK != nil {
		switch k := *c.TopK; {
		case k == -1 || k == 0:
			s.TopK = 0 // vLLM's and llama.cpp's "off"
		case k < -1:
			return invalid("top_k", "top_k must be -1, 0 (off) or positive, got %d", k)
		default:
			s.TopK = k
		}
	}
	if c.Seed != nil {
		seed := *c.Seed
		s.Seed = &seed
	}
	if len(c.LogitBias) > 0 {
		vocab := p.Tokenizer.VocabSize()
		s.LogitBias = make(map[int32]float32, len(c.LogitBias))
		for k, v := range c.LogitBias {
			id, err := strconv.ParseInt(k, 10, 32)
			if err != nil || id < 0 || id >= int64(vocab) {
				return invalid("logit_bias", "logit_bias key %q is not a token id in [0, %d)", k, vocab)
			}
			if math.IsNaN(v) || v < -100 || v > 100 {
				return invalid("logit_bias", "logit_bias value %g for token %s is outside [-100, 100]", v, k)
			}
			s.LogitBias[int32(id)] = float32(v)
		}
	}
	g.Request.Sampling = s
	g.Request.CacheKey = cacheKey(c)
	g.Request.N = 1
	if c.N != nil {
		if *c.N < 1 || *c.N > MaxN {
			return invalid("n", "n must be between 1 and %d, got %d", MaxN, *c.N)
		}
		g.Request.N = *c.N
	}
	if len(c.Stop) > MaxStops {
		return invalid("stop", "at most %d stop sequences are allowed, got %d", MaxStops, len(c.Stop))
	}
	for i, st := range c.Stop {
		if st == "" {
			return invalid("stop", "stop sequence %d is empty", i)
		}
	}
	g.Request.Stop = c.Stop
	if c.StreamOptions != nil && !c.Stream {
		return invalid("stream_options", "stream_options is only allowed when stream is true")
	}
	g.Stream = c.Stream
	g.IncludeUsage = c.StreamOptions != nil && c.StreamOptions.IncludeUsage
	g.ReturnTokenIDs = c.ReturnTokenIDs
	pred, err := prediction(c.Prediction)
	if err != nil {
		return err
	}
	g.Request.Prediction = pred
	return nil
}

// prediction reads a Predicted Outputs object: {"type": "content",
// "content": a string or an array of text parts}.
func prediction(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var p struct {
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return "", invalid("prediction", "prediction must be an object like {\"type\": \"content\", \"content\": \"...\"}")
	}
	if p.Type != "content" {
		return "", invalid("prediction.type", "prediction type must be \"content\", got %q", p.Type)
	}
	if isNull(p.Content) {
		return "", invalid("prediction.content", "prediction content is required")
	}
	var text string
	if err := json.Unmarshal(p.Content, &text); err == nil {
		return text, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(p.Content, &parts); err != nil {
		return "", invalid("prediction.content", "prediction content must be a string or an array of text parts")
	}
	var b strings.Builder
	for i, part := range parts {
		if part.Type != "text" || part.Text == nil {
			return "", invalid(fmt.Sprintf("prediction.content[%d]", i), "prediction content parts must be {\"type\": \"text\", \"text\": \"...\"}")
		}
		b.WriteString(*part.Text)
	}
	return b.String(), nil
}

// rejectUnsupportedChat refuses the options this server cannot honour, and
// what OpenAI's API refuses ("tools": [], checkMessages).
func rejectUnsupportedChat(r *ChatCompletionRequest) error {
	switch {
	case !isNull(r.Audio):
		return invalid("audio", "audio output is not supported by this model")
	case !isNull(r.Functions):
		return invalid("functions", "functions is deprecated and not supported; use tools")
	case !isNull(r.FunctionCall):
		return invalid("function_call", "function_call is deprecated and not supported; use tool_choice")
	case r.Tools != nil && len(r.Tools) == 0: // as OpenAI's API
		return invalid("tools", "Invalid 'tools': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	for i, m := range r.Modalities {
		if m != "text" {
			return invalid(fmt.Sprintf("modalities[%d]", i), "modality %q is not supported; only \"text\"", m)
		}
	}
	return checkMessages(r.Messages)
}

// Apply sets the template options the kwargs give (k may be nil) and returns
// the tools the template renders: custom_tools when present, else tools.
func (k *TemplateKwargs) Apply(opt *chat.Options, tools []json.RawMessage) ([]json.RawMessage, error) {
	if k == nil {
		return tools, nil
	}
	if k.DateString != nil {
		opt.DateString = *k.DateString
	}
	opt.ToolsInSystem = k.ToolsInUserMessage != nil && !*k.ToolsInUserMessage
	if len(k.Other) > 0 {
		opt.Kwargs = make(map[string]any, len(k.Other))
		for name, v := range k.Other {
			opt.Kwargs[name] = v
		}
	}
	if len(k.CustomTools) == 0 {
		return tools, nil
	}
	var custom []json.RawMessage
	if err := json.Unmarshal(k.CustomTools, &custom); err != nil {
		return nil, invalid("chat_template_kwargs.custom_tools", "custom_tools must be an array of tool objects or null")
	}
	for i, c := range custom {
		if c = bytes.TrimSpace(c); len(c) == 0 || c[0] != '{' {
			return nil, invalid(fmt.Sprintf("chat_template_kwargs.custom_tools[%d]", i), "a custom tool must be an object")
		}
	}
	return custom, nil
}

// customToolNames are the function names of custom tools, in the OpenAI
// form ({"function": {"name"}}) or Llama's ({"name"}), for recognising calls.
func customToolNames(tools []json.RawMessage) []string {
	var names []string
	for _, raw := range tools {
		var t struct {
			Name     string `json:"name"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(raw, &t) == nil {
			names = append(names, t.Name, t.Function.Name)
		}
	}
	return slices.DeleteFunc(names, func(s string) bool { return s == "" })
}
