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
	QueueLen   int                   // requests waiting for a sequence slot; 0 means 8
	Timeout    time.Duration         // default generation time limit; 0: none
	Registerer prometheus.Registerer // nil: no metrics
	Logger     zerolog.Logger
	Now        func() time.Time // clock for timings; nil: time.Now
	// KVStore, when set and the model is a KVSnapshotter, keeps the rows of
	// finished requests for later ones (see KVStore).
	KVStore KVStore
	// Speculative configures speculative decoding (zero: off).
	Speculative Speculative
	// MaxSequences is how many sequences (choices of active requests) may
	// advance side by side on a model that is a Batcher; 0 means
	// DefaultMaxSequences, 1 drives even a Batcher one request at a time
	// (through Eval, with the resident prefix cache and the KV store).
	MaxSequences int
}

// DefaultMaxSequences is Config.MaxSequences when it is 0.
const DefaultMaxSequences = 4

// growRows is how many slots beyond its prompt a sequence reserves at
// first and grows by (at most the pool over MaxSequences).
const growRows = 128

// MaxChoices limits Request.N.
const MaxChoices = 16

// unhealthyAfter consecutive failed model calls make Healthy report an error.
const unhealthyAfter = 3

var errTimeout = errors.New("inference: generation timed out")

// Engine runs requests on one model: up to Config.MaxSequences side by side
// on a Batcher, else one at a time, in arrival order (see the package doc).
type Engine struct {
	model Model
	info  ModelInfo
	vocab Vocab
	cfg   Config
	now   func() time.Time
	log   zerolog.Logger
	met   *metrics
	kv    *kvStore    // nil: no store (one request at a time)
	seqKV *seqKVStore // nil: no store (side by side)

	ctx    context.Context // ends on Close
	cancel context.CancelFunc
	wake   chan struct{} // capacity 1: the queue has work
	exited chan struct{} // closed when the worker returns

	mu       sync.Mutex
	queue    []*job
	closed   bool
	failures int   // consecutive failed Evals
	lastErr  error // the latest of them

	activeN atomic.Int64 // open sequences, for ActiveSequences
	hostNS  atomic.Int64 // host time of all steps, for StepTimes
	modelNS atomic.Int64 // model time of all steps

	// Worker-owned state.
	pool       Batcher
	single     *single // the adapter when the model is driven one request at a time
	maxSeq     int
	grow       int             // slots a sequence reserves beyond its prompt, and grows by
	stalled    int             // sequences the last step could not grow
	active     []*gen          // in arrival order
	linger     []*seq          // finished sequences kept open for a queued request's Fork
	sampling   *sample.Workers // samples rows; a step's decode rows in parallel
	jobs       []sample.Job
	jobSeqs    []*seq // the sequence of each job
	turn       int    // rotates the order of decode rows
	stepNo     int
	rates      [nSources]float64 // acceptance estimates (prompt lookup's carries over)
	ratesOwner string            // the owner they were learnt from
}

type jobState uint8

const (
	queued jobState = iota
	running
	finished
)

type job struct {
	ctx      context.Context
	req      Request
	s        *Stream
	enqueued time.Time
	state    jobState // guarded by Engine.mu
	stop     func() bool
	// shareWaits: the steps it waited at the head of the queue for a
	// prefix to fork (worker only; at most shareWaitSteps).
	shareWaits int
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
	e.met = newMetrics(cfg.Registerer)
	e.maxSeq = cfg.MaxSequences
	if e.maxSeq <= 0 {
		e.maxSeq = DefaultMaxSequences
	}
	if b, ok := m.(Batcher); ok && e.maxSeq > 1 {
		e.pool = b
		lim := b.BatchLimits()
		e.maxSeq = min(e.maxSeq, lim.Sequences)
		// A sequence's rows live in the pool: a context longer than the
		// pool cannot be held (the .pte pool spans the whole window).
		e.info.ContextLen = min(e.info.ContextLen, lim.Slots)
		e.grow = max(1, min(growRows, lim.Slots/e.maxSeq))
		if e.seqKV = newSeqKVStore(cfg.KVStore, m); e.seqKV != nil {
			e.met.registerKV(cfg.Registerer, e.seqKV.store)
		}
	} else {
		e.single = newSingle(e, m)
		e.pool, e.maxSeq, e.grow = e.single, 1, e.info.ContextLen
		if e.kv = newKVStore(cfg.KVStore, m); e.kv != nil {
			e.met.registerKV(cfg.Registerer, e.kv.store)
		}
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

// Close stops the worker: queued requests end with ErrClosed, the running
// one is cancelled (its Done event carries ErrClosed). It waits for the
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
	for _, j := range q {
		j.state = finished
	}
	e.mu.Unlock()
	e.met.queueDepth.Set(0)
	for _, j := range q {
		j.stop()
		e.finishEarly(j, FinishCancelled, ErrClosed)
	}
	e.cancel()
	<-e.exited
	return nil
}

// Submit validates req and queues it. It fails with *InvalidRequestError,
// *ContextLengthError, ErrBusy (the queue is full), ErrClosed, or ctx's
// error. Ending ctx cancels the request, queued or running.
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
	j := &job{ctx: ctx, req: req, enqueued: e.now()}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	if len(e.queue) >= e.cfg.QueueLen {
		e.mu.Unlock()
		e.met.requests.WithLabelValues("busy").Inc()
		return nil, ErrBusy
	}
	j.s = newStream(ctx)
	e.queue = append(e.queue, j)
	j.stop = context.AfterFunc(ctx, func() { e.dequeue(j) })
	e.met.queueDepth.Set(float64(len(e.queue)))
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
	return j.s, nil
}

// dequeue removes a cancelled request that is still waiting.
func (e *Engine) dequeue(j *job) {
	e.mu.Lock()
	if j.state != queued {
		e.mu.Unlock()
		return
	}
	j.state = finished
	if i := slices.Index(e.queue, j); i >= 0 {
		e.queue = slices.Delete(e.queue, i, i+1)
	}
	e.met.queueDepth.Set(float64(len(e.queue)))
	e.mu.Unlock()
	e.finishEarly(j, FinishCancelled, context.Cause(j.ctx))
}

// finishEarly ends a request that never ran.
func (e *Engine) finishEarly(j *job, f FinishReason, err error) {
	e.met.requests.WithLabelValues(string(f)).Inc()
	j.s.push(Event{Done: true, Finish: f, Err: err,
		Usage:   Usage{PromptTokens: len(j.req.Prompt)},
		Timings: Timings{QueueWait: e.now().Sub(j.enqueued)}})
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

// eval calls the model, turning a panic or a malformed result into an error.
func (e *Engine) eval(ctx context.Context, seq []int32, valid int) (l Logits, reused int, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in Eval: %v", r)
		}
	}()
	l, reused, err = e.model.Eval(ctx, seq, valid)
	if err == nil && l.Len() != e.info.VocabSize {
		err = fmt.Errorf("Eval returned %d logits for a vocabulary of %d", l.Len(), e.info.VocabSize)
	}
	return l, reused, err
}

// verify calls the model's Verify, turning a panic or a malformed result
// into an error.
func (e *Engine) verify(ctx context.Context, v Verifier, seq []int32, valid int) (rows Rows, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in Verify: %v", r)
		}
	}()
	rows, err = v.Verify(ctx, seq, valid)
	if err == nil && rows.Len() != len(seq)-valid {
		err = fmt.Errorf("Verify returned %d rows for %d tokens", rows.Len(), len(seq)-valid)
	}
	return rows, err
}

// row reads row i of a Verify call, checked like eval's logits.
func (e *Engine) row(ctx context.Context, rows Rows, i int) (l Logits, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in Rows.Logits: %v", r)
		}
	}()
	l, err = rows.Logits(ctx, i)
	if err == nil && l.Len() != e.info.VocabSize {
		err = fmt.Errorf("Verify returned %d logits for a vocabulary of %d", l.Len(), e.info.VocabSize)
	}
	return l, err
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// stopReason classifies a cancelled run.
func (e *Engine) stopReason(ctx context.Context, j *job) (FinishReason, error) {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errTimeout):
		return FinishTimeout, nil
	case errors.Is(cause, ErrClosed):
		return FinishCancelled, ErrClosed
	case j.ctx.Err() != nil:
		return FinishCancelled, j.ctx.Err()
	default:
		return FinishCancelled, cause
	}
}

// emit sends a delta (and the choice's finish) when there is anything to say.
func (e *Engine) emit(j *job, choice int, out textOut, f FinishReason) {
	if out.empty() && f == "" {
		return
	}
	j.s.push(Event{Choice: choice, Text: out.text, Tokens: out.ids, Logprobs: out.lps, Finish: f, Stop: out.stop})
}

func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
