package inference

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/inference/sample"
)

// Config configures an Engine.
type Config struct {
	QueueLen   int                   // requests waiting for a sequence slot beyond the free ones (active ones excluded); 0 means 8
	Timeout    time.Duration         // default generation time limit; 0: none
	Registerer prometheus.Registerer // nil: no metrics
	Logger     zerolog.Logger
	Now        func() time.Time // clock for timings; nil: time.Now
	// KVStore, when set and the model is a SeqKVSnapshotter, keeps the rows
	// of finished requests for later ones (see KVStore).
	KVStore KVStore
	// Speculative configures speculative decoding (zero: off).
	Speculative Speculative
	// MaxSequences is how many sequences (choices of active requests) may
	// advance side by side; 0 (auto) takes the model's BatchLimits.Auto, 1
	// runs one sequence at a time on the same scheduler.
	MaxSequences int
}

// growRows is how many slots beyond its prompt a sequence reserves at
// first and grows by (at most the pool over MaxSequences).
const growRows = 128

// MaxChoices limits Request.N (every API's n).
const MaxChoices = 8

// unhealthyAfter consecutive failed model calls make Healthy report an error.
const unhealthyAfter = 3

var errTimeout = errors.New("inference: generation timed out")

// Engine runs requests on one model: up to Config.MaxSequences sequences side
// by side, in arrival order (see the package doc).
type Engine struct {
	model Model
	info  ModelInfo
	vocab Vocab
	cfg   Config
	now   func() time.Time
	log   zerolog.Logger
	met   *metrics
	kv    *boundStore // nil: no store

	ctx    context.Context // ends on Close
	cancel context.CancelFunc
	wake   chan struct{} // capacity 1: the queue has work
	exited chan struct{} // closed when the worker returns

	mu       sync.Mutex
	queue    []*record // waiting, in arrival order
	closed   bool
	failures int   // consecutive failed Steps
	lastErr  error // the latest of them

	activeN atomic.Int64 // open sequences, for ActiveSequences
	hostNS  atomic.Int64 // host time of all steps, for StepTimes
	modelNS atomic.Int64 // model time of all steps

	// Worker-owned state.
	stepCost   func(rows int) time.Duration // model.StepCost, bound once (a method value allocates)
	lim        BatchLimits                  // the model's
	maxSeq     int
	grow       int             // slots a sequence reserves beyond its prompt, and grows by
	stalled    int             // sequences the last step could not grow
	active     []*record       // running, in arrival order
	retained   []*seq          // finished sequences kept in the pool with their rows, oldest first
	sampling   *sample.Workers // samples rows; a step's decode rows in parallel
	sampleJobs []sample.Job
	turn       int  // rotates the order of decode rows
	promptOnly bool // the last step ran prompt rows alone while sequences waited to decode
	stepNo     int
	rates      [nSources]float64 // acceptance estimates (prompt lookup's carries over)
	ratesOwner string            // the owner they were learnt from
}

// New starts an engine on m. The caller keeps ownership of m: Close stops
// the engine but does not close the model.
func New(m Model, v Vocab, cfg Config) *Engine {
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 8
	}
	e := &Engine{
		model:  m,
		info:   m.Info(),
		vocab:  v,
		cfg:    cfg,
		now:    cfg.Now,
		log:    cfg.Logger,
		wake:   make(chan struct{}, 1),
		exited: make(chan struct{}),
	}
	if e.now == nil {
		e.now = time.Now
	}
	e.stepCost = m.StepCost
	e.met = newMetrics(cfg.Registerer)
	lim := m.BatchLimits()
	e.lim = lim
	e.maxSeq = min(lim.resolve(cfg.MaxSequences), lim.Sequences)
	// A sequence's rows live in the pool: a context longer than the pool
	// cannot be held (the .pte pool spans the whole window).
	e.info.ContextLen = min(e.info.ContextLen, lim.Slots)
	e.grow = max(1, min(growRows, lim.Slots/e.maxSeq))
	if e.kv = bindStore(cfg.KVStore, m); e.kv != nil {
		e.met.registerKV(cfg.Registerer, e.kv.store)
	}
	e.sampling = sample.NewWorkers(sampleHelpers(e.maxSeq))
	e.rates = ratePrior
	e.ctx, e.cancel = context.WithCancel(context.Background())
	go e.worker()
	return e
}

// Info describes the model.
func (e *Engine) Info() ModelInfo { return e.info }

// ActiveSequences is the number of sequences the model is advancing now.
func (e *Engine) ActiveSequences() int { return int(e.activeN.Load()) }

// MaxSequences is how many sequences may be active at once.
func (e *Engine) MaxSequences() int { return e.maxSeq }

// QueueDepth is the number of requests waiting (the active ones excluded).
func (e *Engine) QueueDepth() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.queue)
}

// Healthy returns nil, or why the engine cannot serve: it is closed, or the
// last unhealthyAfter (3) model calls failed. The next successful model call
// (the next request's) makes it healthy again.
func (e *Engine) Healthy() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return ErrClosed
	case e.failures >= unhealthyAfter:
		return fmt.Errorf("inference: %d consecutive model failures, last: %w", e.failures, e.lastErr)
	}
	return nil
}

// Close stops the worker: queued requests end with ErrClosed, active ones
// are cancelled (their Done events carry ErrClosed). It waits for the
// worker to return. It does not close the model.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		<-e.exited
		return nil
	}
	e.closed = true
	q := e.queue
	e.queue = nil
	for _, g := range q {
		g.status = finished
	}
	e.mu.Unlock()
	e.met.queueDepth.Set(0)
	for _, g := range q {
		g.stop()
		e.finishEarly(g, FinishCancelled, ErrClosed)
	}
	e.cancel()
	<-e.exited
	return nil
}

// Submit validates req and queues it. It fails with *InvalidRequestError,
// *ContextLengthError, ErrBusy (the queue holds QueueLen requests besides
// one for each free sequence slot), ErrClosed, or ctx's error. Ending ctx cancels the request, queued or running.
func (e *Engine) Submit(ctx context.Context, req Request) (*Stream, error) {
	if err := e.validate(&req); err != nil {
		e.met.requests.WithLabelValues("invalid").Inc()
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The worker reads the request later: it must not share the caller's memory.
	req.Prompt, req.Stop = slices.Clone(req.Prompt), slices.Clone(req.Stop)
	req.Sampling.LogitBias = maps.Clone(req.Sampling.LogitBias)
	if req.Sampling.Seed != nil {
		seed := *req.Sampling.Seed
		req.Sampling.Seed = &seed
	}
	g := &record{ctx: ctx, req: req, enqueued: e.now()}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	// The queue holds QueueLen requests beyond those the free sequence
	// slots take at the next step: a burst is refused only when the slots
	// are taken too.
	if len(e.queue) >= e.cfg.QueueLen+max(0, e.maxSeq-int(e.activeN.Load())) {
		e.mu.Unlock()
		e.met.requests.WithLabelValues("busy").Inc()
		return nil, ErrBusy
	}
	g.s = newStream(ctx)
	e.queue = append(e.queue, g)
	g.stop = context.AfterFunc(ctx, func() { e.dequeue(g) })
	e.met.queueDepth.Set(float64(len(e.queue)))
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
	return g.s, nil
}

// dequeue removes a cancelled request that is still waiting.
func (e *Engine) dequeue(g *record) {
	e.mu.Lock()
	if g.status != waiting {
		e.mu.Unlock()
		return
	}
	g.status = finished
	if i := slices.Index(e.queue, g); i >= 0 {
		e.queue = slices.Delete(e.queue, i, i+1)
	}
	e.met.queueDepth.Set(float64(len(e.queue)))
	e.mu.Unlock()
	e.finishEarly(g, FinishCancelled, context.Cause(g.ctx))
}

// finishEarly ends a request that never ran.
func (e *Engine) finishEarly(g *record, f FinishReason, err error) {
	g.status = finished
	e.met.requests.WithLabelValues(string(f)).Inc()
	g.s.push(Event{Done: true, Finish: f, Err: err,
		Usage:   Usage{PromptTokens: len(g.req.Prompt)},
		Timings: Timings{QueueWait: e.now().Sub(g.enqueued)}})
}

func (e *Engine) validate(r *Request) error {
	bad := func(param, format string, a ...any) error {
		return &InvalidRequestError{Param: param, Message: fmt.Sprintf(format, a...)}
	}
	v := e.info.VocabSize
	if len(r.Prompt) == 0 {
		return bad("prompt", "the prompt is empty")
	}
	for i, id := range r.Prompt {
		if id < 0 || int(id) >= v {
			return bad("prompt", "token %d at position %d is outside the vocabulary [0, %d)", id, i, v)
		}
	}
	if len(r.Prompt)+1 > e.info.ContextLen {
		return &ContextLengthError{PromptTokens: len(r.Prompt), MaxTokens: r.MaxTokens, ContextLen: e.info.ContextLen}
	}
	p := r.Sampling
	switch {
	case r.MaxTokens < 0:
		return bad("max_tokens", "max_tokens must not be negative")
	case r.N < 0 || r.N > MaxChoices:
		return bad("n", "n must be between 1 and %d", MaxChoices)
	case len(r.Stop) > MaxStops:
		return bad("stop", "at most %d stop strings", MaxStops)
	case slices.Contains(r.Stop, ""):
		return bad("stop", "stop strings must not be empty")
	case r.TopLogprobs < 0 || r.TopLogprobs > MaxTopLogprobs:
		return bad("top_logprobs", "top_logprobs must be between 0 and %d", MaxTopLogprobs)
	case r.Constrain != nil && r.IgnoreEOS:
		return bad("ignore_eos", "ignore_eos cannot be combined with structured outputs")
	case r.Timeout < 0:
		return bad("timeout", "the timeout must not be negative")
	case r.Keep < 0 || r.Keep > len(r.Prompt):
		return bad("n_keep", "n_keep must be between 0 and the prompt's %d tokens", len(r.Prompt))
	case !(p.Temperature >= 0 && p.Temperature <= 2):
		return bad("temperature", "temperature must be between 0 and 2")
	case !(p.TopP >= 0 && p.TopP <= 1):
		return bad("top_p", "top_p must be between 0 and 1")
	case !(p.MinP >= 0 && p.MinP <= 1):
		return bad("min_p", "min_p must be between 0 and 1")
	case p.TopK < 0:
		return bad("top_k", "top_k must not be negative")
	case !(p.PresencePenalty >= -2 && p.PresencePenalty <= 2):
		return bad("presence_penalty", "presence_penalty must be between -2 and 2")
	case !(p.FrequencyPenalty >= -2 && p.FrequencyPenalty <= 2):
		return bad("frequency_penalty", "frequency_penalty must be between -2 and 2")
	case !(p.RepetitionPenalty >= 0 && p.RepetitionPenalty <= 10):
		return bad("repetition_penalty", "repetition_penalty must be between 0 and 10")
	case p.RepeatLastN < 0:
		return bad("repeat_last_n", "repeat_last_n must not be negative")
	}
	if rs := r.Reasoning; rs != nil {
		for _, id := range rs.EndTokens {
			if id < 0 || int(id) >= v {
				return bad("reasoning", "reasoning end token %d is outside the vocabulary [0, %d)", id, v)
			}
		}
		if rs.End == "" || rs.Budget < 0 {
			return bad("reasoning", "a reasoning needs an end marker and a budget >= 0")
		}
	}
	for id, b := range p.LogitBias {
		if id < 0 || int(id) >= v {
			return bad("logit_bias", "token %d is outside the vocabulary [0, %d)", id, v)
		}
		if !(b >= -100 && b <= 100) {
			return bad("logit_bias", "bias %v for token %d is outside [-100, 100]", b, id)
		}
	}
	return nil
}

// modelResult records a model call's outcome for Healthy.
func (e *Engine) modelResult(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err == nil {
		e.failures, e.lastErr = 0, nil
		return
	}
	e.failures++
	e.lastErr = err
}

// row reads row i of a Step's run, turning a panic or a malformed result
// into an error.
func (e *Engine) row(ctx context.Context, rows Rows, i int) (l sample.Logits, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in Rows.Logits: %v", r)
		}
	}()
	l, err = rows.Logits(ctx, i)
	if err == nil && l.Len() != e.info.VocabSize {
		err = fmt.Errorf("Step returned %d logits for a vocabulary of %d", l.Len(), e.info.VocabSize)
	}
	return l, err
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// stopReason classifies a cancelled request.
func (e *Engine) stopReason(g *record) (FinishReason, error) {
	switch cause := context.Cause(g.run); {
	case errors.Is(cause, errTimeout):
		return FinishTimeout, nil
	case errors.Is(cause, ErrClosed):
		return FinishCancelled, ErrClosed
	case g.ctx.Err() != nil:
		return FinishCancelled, g.ctx.Err()
	default:
		return FinishCancelled, cause
	}
}

// emit sends a delta (and the choice's finish) when there is anything to say.
func (e *Engine) emit(g *record, choice int, out textOut, f FinishReason) {
	if out.empty() && f == "" {
		return
	}
	g.s.push(Event{Choice: choice, Text: out.text, Reasoning: out.reasoning, Tokens: out.ids, Logprobs: out.lps, Finish: f, Stop: out.stop,
		Usage: Usage{PromptTokens: g.usage.PromptTokens, CachedTokens: g.usage.CachedTokens}})
}
