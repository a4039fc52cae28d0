package inference

import (
	"errors"
	"fmt"
	"time"

	"github.com/hexserve/hexserve/inference/sample"
)

// Request is one generation job: a tokenized prompt and how to continue it.
type Request struct {
	Prompt      []int32 // token ids, BOS included when wanted
	MaxTokens   int     // 0: until the context ends; larger than the room left: clamped
	N           int     // choices from the same prompt rows: side by side on a Batcher, else one after another (0 means 1)
	Sampling    sample.Params
	Stop        []string      // up to MaxStops strings; the emitted text never contains one
	Logprobs    bool          // report the chosen token's logprob
	TopLogprobs int           // and up to MaxTopLogprobs alternatives
	Timeout     time.Duration // generation time limit; 0: the engine's default
	// IgnoreEOS keeps generating past end-of-turn tokens (benchmarks).
	IgnoreEOS bool
	// Constrain, when set, makes one Constraint per choice: only tokens it
	// allows are sampled, so a choice that finishes with FinishStop is a
	// complete value of its grammar. Stop strings do not apply. With
	// Reasoning it starts when the reasoning ends.
	Constrain func() Constraint
	// Reasoning, when set, is where the model's reasoning is in its text:
	// it comes back apart from the answer (Event.Reasoning).
	Reasoning *Reasoning
	// Owner identifies who sent the request (a hash of the API key; empty
	// without keys). KV rows computed for one owner are never reused for, nor
	// reported as cached to, another (prefix cache and KV store alike).
	Owner string
	// Prediction is the expected output (OpenAI's Predicted Outputs): the
	// draft for speculative decoding on models that verify drafts. It never
	// changes the output, only how fast it comes.
	Prediction string
	// PredictionTokens is Prediction tokenised (without BOS), done before
	// the request is queued so the step never tokenises the whole of it;
	// nil: the drafter tokenises what it needs as it goes.
	PredictionTokens []int32
	// CacheKey is the client's hint for the KV store (prompt_cache_key, else
	// user): the owner's entry saved under the same key is replaced by this
	// request's, so a conversation keeps one branch. It never widens what a
	// request may reuse.
	CacheKey string
	// ContextShift lets each choice go on past the window: when its next
	// row would not fit, a quarter of the window is freed (a ring-buffer
	// Shift on a ContextShifter model, else the kept tokens are read
	// again at new positions) and generation goes on until MaxTokens (0:
	// one window of new tokens) or a stop. Off: a choice ends at the
	// window (FinishContext).
	ContextShift bool
	// Keep is how many of the prompt's first tokens every shift keeps (the
	// sink: BOS, the system prompt, the tool declarations); 0: the first
	// token alone. At most half the window is kept.
	Keep int
}

// Constraint restricts the tokens of one choice (structured outputs). The
// sampler first checks the token it drew with Allowed and builds the full
// Mask only when that token is rejected; every emitted token goes through
// Accept. End-of-turn tokens are allowed only when Complete.
type Constraint interface {
	Allowed(id int32) bool
	// Mask sets in allowed (one bit per vocabulary id) exactly the
	// tokens Allowed accepts.
	Mask(allowed []uint64)
	Accept(id int32) error
	Complete() bool
}

// Limits on a request's options.
const (
	MaxStops       = 16
	MaxTopLogprobs = 20
)

// FinishReason says why a choice ended.
type FinishReason string

// Finish reasons. The API layer maps a parsed tool call to its own reason.
const (
	FinishStop      FinishReason = "stop"      // end-of-turn token or stop string
	FinishLength    FinishReason = "length"    // max_tokens
	FinishContext   FinishReason = "context"   // the end of the context window, before max_tokens
	FinishCancelled FinishReason = "cancelled" // the client went away
	FinishTimeout   FinishReason = "timeout"   // the generation time limit
	FinishError     FinishReason = "error"     // the model failed; Event.Err says why
)

// Usage counts tokens of a finished request.
type Usage struct {
	PromptTokens     int
	CachedTokens     int // prompt tokens whose KV rows were reused
	CompletionTokens int // over all choices
	ReasoningTokens  int // the completion tokens inside the reasoning (Request.Reasoning)
	// Prediction tokens the model verified: accepted (they are in the
	// output) and rejected (evaluated, then discarded).
	AcceptedPredictionTokens int
	RejectedPredictionTokens int
}

// Timings reports where a request's time went (llama.cpp's `timings`).
type Timings struct {
	QueueWait  time.Duration
	PromptEval time.Duration
	Generation time.Duration
	PromptN    int // tokens actually evaluated for the prompt
	PredictedN int
}

// PromptPerSecond is the prompt evaluation rate (evaluated prompt tokens per second).
func (t Timings) PromptPerSecond() float64 { return rate(t.PromptN, t.PromptEval) }

// PredictedPerSecond is the generation rate. Generation excludes the step
// that evaluated the prompt and sampled the first token, so the rate is over
// PredictedN-1 tokens.
func (t Timings) PredictedPerSecond() float64 { return rate(t.PredictedN-1, t.Generation) }

func rate(n int, d time.Duration) float64 {
	if n <= 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Event is one step of a request's stream. Deltas carry text and tokens, and
// Usage's PromptTokens and CachedTokens (known once the request runs); the
// last event of each choice has Finish set; the final event of the request
// has Done set with the whole Usage and Timings (and Err when it failed).
type Event struct {
	Choice int
	Text   string // new text, UTF-8 complete, stop strings withheld
	// Reasoning is new reasoning text (Request.Reasoning); in an event
	// holding both, it comes before Text.
	Reasoning string
	Tokens    []int32          // ids generated since the previous event of this choice
	Logprobs  []sample.Logprob // one per token in Tokens, when requested
	Finish    FinishReason
	// Stop is the stop string that ended the choice (Finish is FinishStop);
	// "" when an end-of-turn token ended it.
	Stop    string
	Done    bool
	Usage   Usage
	Timings Timings
	Err     error
}

// Errors the engine reports at submission; the server maps them to statuses.
var (
	ErrBusy    = errors.New("inference: queue full")
	ErrClosed  = errors.New("inference: engine closed")
	ErrNoModel = errors.New("inference: no model loaded")
)

// ContextLengthError reports a prompt that does not fit the context.
type ContextLengthError struct {
	PromptTokens int
	MaxTokens    int // requested completion tokens (0 if none)
	ContextLen   int
	// Kept, when set, says what a context_overflow policy kept of the
	// prompt: the part that still did not fit.
	Kept string
}

func (e *ContextLengthError) Error() string {
	return fmt.Sprintf("this model's maximum context length is %d tokens, but the prompt has %d tokens", e.ContextLen, e.PromptTokens)
}

// InvalidRequestError reports a request the engine cannot run (e.g. a token id out of range).
type InvalidRequestError struct {
	Param   string
	Message string
}

func (e *InvalidRequestError) Error() string { return e.Message }
