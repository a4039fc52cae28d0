// Package apiconv holds what every API's conversion (openai/, anthropic/,
// ollama/) turns a request into and shares: the server's conversion
// parameters (Params), tool definitions and the parsing of the model's tool
// calls in its family's format (ToolFormat), the prompt's encoding (EncodeChat), structured-output constraints
// and their errors (Constraint, SchemaError, ToolGrammar), response ids
// (NewID) and the 400s of invalid fields (Invalid). Like the API packages it
// does not import net/http.
package apiconv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/google/uuid"
	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/grammar"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/overflow"
	"github.com/hexserve/hexserve/tokenizer"
)

// Params is what converting a request needs from the server.
type Params struct {
	Tokenizer *tokenizer.Tokenizer
	// Template is the model's chat template (nil: the built-in Llama-3.2
	// one), which EncodeChat renders through ChatOptions.
	Template *chat.Template
	// Defaults are the sampling parameters a request leaves out.
	Defaults sample.Params
	// MaxTokens is the default completion limit; 0: until the context ends.
	MaxTokens int
	// ContextLen is the model's window in tokens (0: unknown).
	ContextLen int
	// Vocab is the model's grammar vocabulary for structured outputs
	// (response formats, forced tool calls), called for each structured
	// request before it is queued, so it may build the index lazily; nil:
	// structured outputs are refused. Each choice's matcher stops when
	// Context is done.
	Vocab func() *grammar.Vocab
	// Compiled, when set, is told each structured request's compiled
	// grammar (for the compile metrics).
	Compiled func(*grammar.Grammar)
	// Grammar bounds compiling grammars and each mask (Limits) and holds
	// the shared Cache; its Context is Params.Context.
	Grammar grammar.Options
	// Date is the chat template's date when the request gives none; ""
	// means the template default (chat.DefaultDate).
	Date string
	// MaxPromptBytes, when > 0, stops rendering a chat prompt longer than
	// this (see PromptByteLimit).
	MaxPromptBytes int
	// Context, when set, stops rendering a chat prompt (and compiling a
	// grammar) once it is done.
	Context context.Context
	// ToolFormat is how the model writes tool calls, for parsing replies
	// and forcing calls; nil: Llama3JSON.
	ToolFormat ToolFormat
	// Overflow is the model's context_overflow policy; "": the API's
	// default (Policy).
	Overflow overflow.Policy
	// Shift is the model's context_shift (config engine.context_shift,
	// models[].context_shift); nil: the API's default (ContextShift).
	Shift *bool
	// Truncated, when set, is told that fitting the prompt in the window
	// left dropped messages (raw prompts: tokens) out, and the tokens kept.
	Truncated func(dropped, promptTokens int)
	// Reasoning is the model's reasoning parser (nil: the output is all
	// answer, as for Llama 3.x).
	Reasoning *ReasoningParser
	// ReasoningKey signs the reasoning the Anthropic API returns in
	// thinking blocks (a per-server secret).
	ReasoningKey []byte
}

// PromptByteLimit is the rendered length past which a prompt cannot fit a
// context of ctxLen tokens, since no token is longer than maxPieceBytes.
func PromptByteLimit(ctxLen, maxPieceBytes int) int { return ctxLen * maxPieceBytes }

// ChatOptions are the template options of a chat prompt for p: p's
// template, the generation prompt added, p's date, byte bound and context.
func (p Params) ChatOptions() chat.Options {
	return chat.Options{Template: p.Template, AddGenerationPrompt: true, DateString: p.Date, MaxBytes: p.MaxPromptBytes, Context: p.Context}
}

// GrammarOptions are the compile options of p's request: forced calls
// in p's ToolFormat.
func (p Params) GrammarOptions() grammar.Options {
	o := p.Grammar
	o.Context = p.Context
	if p.ToolFormat != nil {
		o.Calls = p.ToolFormat.Syntax()
	}
	return o
}

// Constraint is the engine's per-choice constraint factory for gr: each
// choice matches gr against the tokens of p.Vocab, stopping when p.Context
// is done, and p.Compiled is told of gr. ok is false when p has no
// vocabulary (structured outputs are off).
func (p Params) Constraint(gr *grammar.Grammar) (c func() inference.Constraint, ok bool) {
	if p.Vocab == nil {
		return nil, false
	}
	if p.Compiled != nil {
		p.Compiled(gr)
	}
	v, ctx := p.Vocab(), p.Context
	return func() inference.Constraint { return gr.NewMatcherContext(ctx, v) }, true
}

// EncodeChat renders msgs with opt.Template (the model's chat template) and
// tokenizes them segment by segment, so special-token text inside content
// stays plain text (see chat's package doc); tail,
// when not empty, follows the template as plain text (an assistant
// prefill) and counts against opt.MaxBytes.
func EncodeChat(tok *tokenizer.Tokenizer, msgs []chat.Message, opt chat.Options, tail string) ([]int32, error) {
	if opt.MaxBytes > 0 && tail != "" {
		if opt.MaxBytes -= len(tail); opt.MaxBytes <= 0 {
			return nil, &chat.LengthError{MaxBytes: opt.MaxBytes + len(tail)}
		}
	}
	segs, err := chat.RenderSegments(msgs, opt)
	if err != nil {
		return nil, err
	}
	tsegs := make([]tokenizer.Segment, len(segs), len(segs)+1)
	for i, s := range segs {
		tsegs[i] = tokenizer.Segment{Text: s.Text, Special: s.Special}
	}
	if tail != "" {
		tsegs = append(tsegs, tokenizer.Segment{Text: tail})
	}
	return tok.EncodeSegments(tsegs, false), nil // the template emits BOS
}

// EncodeText tokenizes a raw prompt (a completions prompt, Ollama's raw
// generate): special-token text is parsed, and BOS is prepended unless the
// text already starts with it.
func EncodeText(tok *tokenizer.Tokenizer, text string) []int32 {
	ids := tok.Encode(text, false, true)
	if bos := tok.Specials().BOS; bos >= 0 && (len(ids) == 0 || ids[0] != bos) {
		ids = append([]int32{bos}, ids...)
	}
	return ids
}

// CacheKey is the KV store's hint from a client's key (OpenAI's
// prompt_cache_key or user, Anthropic's metadata.user_id): a key longer
// than 64 bytes is kept as its hash.
func CacheKey(k string) string {
	if len(k) > 64 {
		sum := sha256.Sum256([]byte(k))
		k = "sha256:" + hex.EncodeToString(sum[:16])
	}
	return k
}

// NewID returns prefix followed by 32 hex digits ("resp_…", "msg_…").
func NewID(prefix string) string {
	return prefix + strings.ReplaceAll(uuid.NewString(), "-", "")
}

// Invalid is the 400 for the request field param.
func Invalid(param, format string, args ...any) error {
	return &inference.InvalidRequestError{Param: param, Message: fmt.Sprintf(format, args...)}
}

// IsNull reports whether raw is absent or JSON null.
func IsNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// SchemaError is the 400 for a schema the constrained decoder cannot
// enforce, naming param and the keyword's path
// (param.properties.x.not); a client that went away passes through.
func SchemaError(param string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, grammar.ErrBusy) {
		return err // the client left, or the server is busy: not the schema's fault
	}
	e, ok := err.(*grammar.Error)
	if !ok {
		return Invalid(param, "%v", err)
	}
	if e.Path != "" {
		param += "." + e.Path
	}
	return Invalid(param, "invalid schema for structured outputs at %s: %s", param, e.Message)
}

// InRange sets *dst to *v when v is given (not nil) and in [lo, hi] ((lo,
// hi] with loOpen); outside, or NaN, it is the 400 "param must be in [lo,
// hi], got v".
func InRange(v *float64, param string, lo, hi float64, loOpen bool, dst *float32) error {
	if v == nil {
		return nil
	}
	if math.IsNaN(*v) || *v < lo || *v > hi || loOpen && *v == lo {
		open := "["
		if loOpen {
			open = "("
		}
		return Invalid(param, "%s must be in %s%g, %g], got %g", param, open, lo, hi, *v)
	}
	*dst = float32(*v)
	return nil
}

// Constrain makes r's choices follow gr (nil: no constraint). Without a
// grammar vocabulary (structured outputs off) it is the 400 msg naming
// param.
func (p Params) Constrain(r *inference.Request, gr *grammar.Grammar, param, msg string) error {
	if gr == nil {
		return nil
	}
	c, ok := p.Constraint(gr)
	if !ok {
		return Invalid(param, "%s", msg)
	}
	r.Constrain = c
	return nil
}

// FinishReason is how a choice ended in the words OpenAI's and Ollama's
// APIs share: "length" (max_tokens, the end of the window, or a timeout) or
// "stop".
func FinishReason(f inference.FinishReason) string {
	switch f {
	case inference.FinishLength, inference.FinishContext, inference.FinishTimeout:
		return "length"
	}
	return "stop"
}
