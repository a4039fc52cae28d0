package ollama

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/grammar"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/overflow"
)

// MaxStops is the most stop strings a request may give.
const MaxStops = inference.MaxStops

// Generation is a validated request: the engine request plus what building
// the reply needs.
type Generation struct {
	Request inference.Request
	Stream  bool
	// Chat: replies are /api/chat messages; else /api/generate responses.
	Chat bool
	// Tools are the offered function names; nil: output is never parsed as
	// tool calls.
	Tools []string
	// ToolFormat is how the model writes calls (apiconv.Params.ToolFormat).
	ToolFormat apiconv.ToolFormat
	// Load is a request with nothing to generate (no messages, or an empty
	// prompt): Ollama clients send one to load a model. The reply is a single
	// done line with done_reason "load", or "unload" for keep_alive 0.
	Load       bool
	DoneReason string
	// KeepAlive is the request's keep_alive: how long the model stays loaded
	// after this request; nil: the server's setting.
	KeepAlive *time.Duration
	// Thinking is the request's think.
	Thinking apiconv.Thinking
}

// FromChatRequest validates r and renders its messages with the Llama-3.2
// template.
func FromChatRequest(r *ChatRequest, p apiconv.Params) (*Generation, error) {
	g := &Generation{Chat: true, Stream: r.Stream == nil || *r.Stream}
	if err := common(&r.Common, g); err != nil {
		return nil, err
	}
	if len(r.Messages) == 0 {
		return load(g, r.KeepAlive), nil
	}
	names, err := apiconv.ToolNames(r.Tools)
	if err != nil {
		return nil, err
	}
	opt := p.ChatOptions()
	apiconv.ApplyThinking(&opt, g.Thinking)
	if len(r.Tools) > 0 {
		opt.Tools, g.Tools, g.ToolFormat = r.Tools, names, p.ToolFormat
	}
	msgs, err := toChatMessages(r.Messages)
	if err != nil {
		return nil, err
	}
	p.SplitTurns(msgs)
	if err = fitChat(g, msgs, opt, &r.Common, r.Options, p); err != nil {
		return nil, err
	}
	if err := finish(g, r.Format, r.Options, p); err != nil {
		return nil, err
	}
	p.Reason(&g.Request, g.Thinking)
	return g, nil
}

// FromGenerateRequest validates r and builds its prompt: the prompt (and
// system) rendered as one user turn, or with raw the prompt text itself,
// special tokens parsed and begin-of-text prepended unless it starts with it.
func FromGenerateRequest(r *GenerateRequest, p apiconv.Params) (*Generation, error) {
	g := &Generation{Stream: r.Stream == nil || *r.Stream}
	if err := common(&r.Common, g); err != nil {
		return nil, err
	}
	switch {
	case r.Suffix != "":
		return nil, invalid("suffix", "suffix (fill-in-the-middle) is not supported by this model")
	case r.Template != "":
		return nil, invalid("template", "template is not supported: the prompt template is the model's own (see /api/show)")
	case len(r.Images) > 0:
		return nil, invalid("images", "images are not supported: the model reads text only")
	case r.Raw && r.System != "":
		return nil, invalid("system", "raw mode does not support system")
	}
	if r.Prompt == "" {
		return load(g, r.KeepAlive), nil
	}
	tok := p.Tokenizer
	if r.Raw {
		pw, maxTokens := window(r.Options, p)
		var err error
		if g.Request.Prompt, err = pw.FitText(apiconv.EncodeText(tok, r.Prompt), 0, truncation(&r.Common, p), maxTokens); err != nil {
			return nil, err
		}
		if g.Request.ContextShift = p.ContextShift(r.Shift, true); g.Request.ContextShift {
			g.Request.Keep = p.TextSink(g.Request.Prompt, 0)
		}
	} else {
		var msgs []chat.Message
		if r.System != "" {
			msgs = append(msgs, chat.Message{Role: "system", Content: r.System})
		}
		msgs = append(msgs, chat.Message{Role: "user", Content: r.Prompt})
		opt := p.ChatOptions()
		apiconv.ApplyThinking(&opt, g.Thinking)
		if err := fitChat(g, msgs, opt, &r.Common, r.Options, p); err != nil {
			return nil, err
		}
	}
	if err := finish(g, r.Format, r.Options, p); err != nil {
		return nil, err
	}
	if !r.Raw { // raw text has no template to open a reasoning
		p.Reason(&g.Request, g.Thinking)
	}
	return g, nil
}

// fitChat renders msgs into g's prompt within the window of o's num_ctx
// under the request's truncate (truncation), and sets its shift (nil: the
// model's context_shift, else true, as Ollama's), keeping the system
// prefix.
func fitChat(g *Generation, msgs []chat.Message, opt chat.Options, c *Common, o *Options, p apiconv.Params) error {
	pw, maxTokens := window(o, p)
	f, err := pw.FitChat(msgs, opt, "", truncation(c, p), maxTokens)
	if err != nil {
		return err
	}
	g.Request.Prompt = f.Prompt
	p.ShiftChat(&g.Request, p.ContextShift(c.Shift, true), msgs, opt)
	return nil
}

// truncation is Ollama's truncate as a context_overflow policy: off is
// overflow.Error, on (the default) the model's truncating policy, else
// overflow.Rolling (Ollama keeps the system messages and the latest turns).
func truncation(c *Common, p apiconv.Params) overflow.Policy {
	switch {
	case c.Truncate != nil && !*c.Truncate:
		return overflow.Error
	case p.Overflow.Truncates():
		return p.Overflow
	}
	return overflow.Rolling
}

// window is p with num_ctx as its window when it is smaller than the
// model's, and the output limit num_predict sets (0: none).
func window(o *Options, p apiconv.Params) (apiconv.Params, int) {
	if o == nil {
		return p, p.MaxTokens
	}
	if n := o.NumCtx; n != nil && *n > 0 && *n < p.ContextLen {
		p.ContextLen = *n
	}
	maxTokens := p.MaxTokens
	if n := o.NumPredict; n != nil {
		maxTokens = max(*n, 0)
	}
	return p, maxTokens
}

// finish applies the options and the format once the prompt is known.
func finish(g *Generation, format json.RawMessage, o *Options, p apiconv.Params) error {
	if err := options(g, o, p); err != nil {
		return err
	}
	gr, err := formatGrammar(format, p.GrammarOptions())
	if err != nil {
		return err
	}
	return p.Constrain(&g.Request, gr, "format", "format is not available on this server")
}

// common checks the fields every request has: keep_alive, think (true,
// false or a level, all but false switching thinking on) and top_logprobs.
func common(c *Common, g *Generation) error {
	ka, err := keepAlive(c.KeepAlive)
	if err != nil {
		return err
	}
	g.KeepAlive = ka
	if !isNull(c.Think) {
		var b bool
		var s string
		if json.Unmarshal(c.Think, &b) != nil {
			if json.Unmarshal(c.Think, &s) != nil || (s != "low" && s != "medium" && s != "high" && s != "max") {
				return invalid("think", "think must be true, false, \"low\", \"medium\", \"high\" or \"max\"")
			}
			b = true
		}
		g.Thinking = apiconv.Thinking{Set: true, Off: !b}
	}
	if c.TopLogprobs != nil && (*c.TopLogprobs < 0 || *c.TopLogprobs > inference.MaxTopLogprobs) {
		return invalid("top_logprobs", "top_logprobs must be between 0 and %d", inference.MaxTopLogprobs)
	}
	g.Request.N = 1
	return nil
}

// load makes g the reply to a load (or, with keep_alive 0, unload) request.
func load(g *Generation, ka json.RawMessage) *Generation {
	g.Load, g.DoneReason = true, "load"
	if d, _ := keepAlive(ka); d != nil && *d == 0 {
		g.DoneReason = "unload"
	}
	return g
}

// keepAlive parses keep_alive: a Go duration string, or a number of seconds;
// nil when absent.
func keepAlive(raw json.RawMessage) (*time.Duration, error) {
	if isNull(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if d, err := time.ParseDuration(s); err == nil {
			return &d, nil
		}
		if n, err := strconv.ParseFloat(s, 64); err == nil {
			return seconds(n)
		}
		return nil, invalid("keep_alive", "keep_alive %q is not a duration (like \"5m\" or \"-1s\") or a number of seconds", s)
	}
	var n float64
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, invalid("keep_alive", "keep_alive must be a duration string or a number of seconds")
	}
	return seconds(n)
}

// seconds is keep_alive's number of seconds as a duration, the same for a
// number and a numeric string: NaN, an infinity or more seconds than a
// duration holds (about 292 years) is a 400, never a conversion that
// wraps (to forever on amd64, to 0 on arm64).
func seconds(n float64) (*time.Duration, error) {
	if math.IsNaN(n) || math.Abs(n) > math.MaxInt64/float64(time.Second) {
		return nil, invalid("keep_alive", "keep_alive must be a duration string or a number of seconds within ±%d", math.MaxInt64/int64(time.Second))
	}
	d := time.Duration(n * float64(time.Second))
	return &d, nil
}

// options sets g's sampling and limits from o over the server defaults.
func options(g *Generation, o *Options, p apiconv.Params) error {
	s := p.Defaults
	s.LogitBias = nil
	if o == nil {
		o = &Options{}
	}
	for _, err := range []error{
		apiconv.InRange(o.Temperature, "options.temperature", 0, 2, false, &s.Temperature),
		apiconv.InRange(o.TopP, "options.top_p", 0, 1, true, &s.TopP),
		apiconv.InRange(o.MinP, "options.min_p", 0, 1, false, &s.MinP),
		apiconv.InRange(o.RepeatPenalty, "options.repeat_penalty", 0, 10, false, &s.RepetitionPenalty),
		apiconv.InRange(o.PresencePenalty, "options.presence_penalty", -2, 2, false, &s.PresencePenalty),
		apiconv.InRange(o.FrequencyPenalty, "options.frequency_penalty", -2, 2, false, &s.FrequencyPenalty),
	} {
		if err != nil {
			return err
		}
	}
	if o.TopK != nil {
		s.TopK = max(*o.TopK, 0) // llama.cpp: 0 or less is off
	}
	switch {
	case o.Seed == nil: // the model's default seed, if it has one
	case *o.Seed == -1: // random, Ollama's default
		s.Seed = nil
	default:
		seed := *o.Seed
		s.Seed = &seed
	}
	if o.RepeatLastN != nil {
		switch n := *o.RepeatLastN; {
		case n == 0:
			s.RepetitionPenalty = 0 // Ollama: 0 disables the penalty
		case n == -1:
			s.RepeatLastN = 0 // the whole window
		case n < -1:
			return invalid("options.repeat_last_n", "options.repeat_last_n must be -1 (the whole context), 0 (off) or positive, got %d", n)
		default:
			s.RepeatLastN = n
		}
	} else if s.RepeatLastN == 0 {
		s.RepeatLastN = defaultRepeatLastN
	}
	g.Request.Sampling = s
	if len(o.Stop) > MaxStops {
		return invalid("options.stop", "at most %d stop sequences are allowed, got %d", MaxStops, len(o.Stop))
	}
	for i, st := range o.Stop {
		if st == "" {
			return invalid(fmt.Sprintf("options.stop[%d]", i), "stop sequence %d is empty", i)
		}
	}
	g.Request.Stop = o.Stop
	return limits(g, o, p)
}

// defaultRepeatLastN is Ollama's repeat_last_n default.
const defaultRepeatLastN = 64

// limits sets the output limit from num_predict and num_ctx: the prompt and
// the output together stay within num_ctx, at most the model's window.
func limits(g *Generation, o *Options, p apiconv.Params) error {
	g.Request.MaxTokens = p.MaxTokens
	if o.NumPredict != nil {
		switch n := *o.NumPredict; {
		case n == -1 || n == -2 || n == 0: // until the context is full
			g.Request.MaxTokens = 0
		case n < 0:
			return invalid("options.num_predict", "options.num_predict must be -1 (until the context is full) or positive, got %d", n)
		default:
			g.Request.MaxTokens = n
		}
	}
	if o.NumCtx == nil || p.ContextLen <= 0 {
		return nil
	}
	n := *o.NumCtx
	switch {
	case n < 0:
		return invalid("options.num_ctx", "options.num_ctx must be positive, got %d", n)
	case n == 0 || n > p.ContextLen:
		n = p.ContextLen // more than the window is clamped
	}
	room := n - len(g.Request.Prompt)
	if g.Request.ContextShift && room >= 1 {
		return nil // it goes on past num_ctx (the model's window: the engine shifts there)
	}
	if room < 1 {
		return invalid("options.num_ctx", "the prompt has %d tokens, which leaves no room for output within options.num_ctx %d "+
			"(the model's window is %d tokens)", len(g.Request.Prompt), n, p.ContextLen)
	}
	if g.Request.MaxTokens == 0 || g.Request.MaxTokens > room {
		g.Request.MaxTokens = room
	}
	return nil
}

// formatGrammar compiles format: "json" (any JSON object) or a JSON schema;
// nil for "" or null. A schema over o.Limits is a 400 naming its part; a
// done o.Context returns its error.
func formatGrammar(raw json.RawMessage, o grammar.Options) (*grammar.Grammar, error) {
	if isNull(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "":
			return nil, nil
		case "json":
			return grammar.Compile([]byte(`{"type":"object"}`), o)
		}
		return nil, invalid("format", "format must be \"json\" or a JSON schema object, got %q", s)
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return nil, invalid("format", "format must be \"json\" or a JSON schema object")
	}
	o.Strict = true // keys in schema order, as Ollama generates them
	o.Closed = true // no keys beyond the properties unless additionalProperties says so, as Ollama's
	g, err := grammar.Compile(raw, o)
	if err != nil {
		return nil, apiconv.SchemaError("format", err)
	}
	return g, nil
}

// toChatMessages converts the wire messages; roles are case-insensitive as
// in Ollama, a tool result's tool_name becomes the message name.
func toChatMessages(msgs []Message) ([]chat.Message, error) {
	out := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		p := fmt.Sprintf("messages[%d]", i)
		if len(m.Images) > 0 {
			return nil, invalid(p+".images", "images are not supported: the model reads text only")
		}
		cm := chat.Message{Role: strings.ToLower(m.Role), Content: m.Content, Name: m.ToolName, ToolCallID: m.ToolCallID,
			ReasoningContent: m.Thinking}
		for j, tc := range m.ToolCalls {
			tp := fmt.Sprintf("%s.tool_calls[%d].function", p, j)
			if tc.Function.Name == "" {
				return nil, invalid(tp+".name", "tool call has no function name")
			}
			var args json.RawMessage
			if a := bytes.TrimSpace(tc.Function.Arguments); !isNull(a) {
				if a[0] != '{' {
					return nil, invalid(tp+".arguments", "function arguments must be a JSON object")
				}
				args = a
			}
			cm.ToolCalls = append(cm.ToolCalls, chat.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
		}
		out[i] = cm
	}
	return out, nil
}

var (
	invalid = apiconv.Invalid
	isNull  = apiconv.IsNull
)
