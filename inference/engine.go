package inference

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Config configures an Engine.
type Config struct {
	QueueLen   int                   // requests waiting behind the running one; 0 means 8
	Timeout    time.Duration         // default generation time limit; 0: none
	Registerer prometheus.Registerer // nil: no metrics
	Logger     zerolog.Logger
	Now        func() time.Time // clock for timings; nil: time.Now
	// KVStore, when set and the model is a KVSnapshotter, keeps the rows of
	// finished requests for later ones (see KVStore).
	KVStore KVStore
	// Speculative configures speculative decoding (zero: off).
	Speculative Speculative
}

// MaxChoices limits Request.N.
const MaxChoices = 16

// unhealthyAfter consecutive failed model calls make Healthy report an error.
const unhealthyAfter = 3

var errTimeout = errors.New("inference: generation timed out")

// Engine runs requests on one model, one at a time, in arrival order.
type Engine struct {
	model Model
	info  ModelInfo
	vocab Vocab
	cfg   Config
	now   func() time.Time
	log   zerolog.Logger
	met   *metrics
	kv    *kvStore // nil: no store

	ctx    context.Context // ends on Close
	cancel context.CancelFunc
	wake   chan struct{} // capacity 1: the queue has work
	exited chan struct{} // closed when the worker returns

	mu       sync.Mutex
	queue    []*job
	closed   bool
	failures int   // consecutive failed Evals
	lastErr  error // the latest of them

	// Worker-owned state.
	cached      []int32 // tokens whose KV rows the model holds
	cachedOwner string  // the Request.Owner those rows were computed for
	smp         *sampler
	det         detok
	seq         []int32
	draft       drafter
	rates       [nSources]float64 // acceptance estimates (prompt lookup's carries over)
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
	if e.kv = newKVStore(cfg.KVStore, m); e.kv != nil {
		e.met.registerKV(cfg.Registerer, e.kv.store)
	}
	e.smp = newSampler(e.info.VocabSize)
	e.rates = ratePrior
	e.ctx, e.cancel = context.WithCancel(context.Background())
	go e.worker()
	return e
}

// Info describes the model.
func (e *Engine) Info() ModelInfo { return e.info }

// QueueDepth is the number of requests waiting (the running one excluded).
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

func (e *Engine) worker() {
	defer close(e.exited)
	for {
		e.mu.Lock()
		var j *job
		if len(e.queue) > 0 {
			j = e.queue[0]
			e.queue = slices.Delete(e.queue, 0, 1)
			j.state = running
			e.met.queueDepth.Set(float64(len(e.queue)))
		}
		closed := e.closed
		e.mu.Unlock()
		if j != nil {
			j.stop()
			e.run(j)
			continue
		}
		if closed {
			return
		}
		select {
		case <-e.wake:
		case <-e.ctx.Done():
		}
	}
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

// run executes one request on the worker.
func (e *Engine) run(j *job) {
	req := j.req
	start := e.now()
	tm := Timings{QueueWait: start.Sub(j.enqueued)}
	usage := Usage{PromptTokens: len(req.Prompt)}
	e.met.running.Inc()
	defer e.met.running.Dec()

	ctx, cancel := context.WithCancelCause(j.ctx)
	defer cancel(nil)
	defer context.AfterFunc(e.ctx, func() { cancel(ErrClosed) })()
	timeout := req.Timeout
	if timeout == 0 {
		timeout = e.cfg.Timeout
	}
	if timeout > 0 {
		var c context.CancelFunc
		ctx, c = context.WithTimeoutCause(ctx, timeout, errTimeout)
		defer c()
	}

	if req.Owner != e.cachedOwner {
		// Rows computed for another owner are never reused: their reuse
		// (cached_tokens, or the time saved) would tell this owner how far
		// its prompt matches the other's.
		e.cached, e.cachedOwner = e.cached[:0], req.Owner
		// Nor does another owner's text steer this one's drafting.
		e.rates = ratePrior
	}
	n := max(req.N, 1)
	room := e.info.ContextLen - len(req.Prompt)
	maxNew := req.MaxTokens
	if maxNew == 0 || maxNew > room {
		maxNew = room
	}
	var seed uint64
	if req.Sampling.Seed != nil {
		seed = uint64(*req.Sampling.Seed)
	} else {
		seed = rand.Uint64()
	}
	smp := e.smp
	smp.reset(req.Sampling, req.Prompt, seed)
	defer smp.clear()
	wantLP := req.Logprobs
	top := 0
	if wantLP {
		top = req.TopLogprobs
	}

	var finish FinishReason
	var runErr error
	var genTime time.Duration
	first := true
	seq := append(e.seq[:0], req.Prompt...)
	started := 0
	verifier, _ := e.model.(Verifier)
	spec := e.cfg.Speculative
	if !spec.Enabled {
		verifier = nil
	}
	dr := &e.draft
	e.rates[srcPrediction] = ratePrior[srcPrediction]
	dr.reset(e.vocab, req.Prediction, spec.PromptLookup, &e.rates)
	var gen int
	// take handles one sampled token exactly as plain decoding does:
	// penalties, usage, stop handling and emission.
	take := func(c int, tok int32, lp *Logprob) {
		smp.accept(tok)
		dr.push(tok)
		gen++
		usage.CompletionTokens++
		if lp != nil {
			lp.Bytes = e.vocab.Piece(tok)
			for i := range lp.Top {
				lp.Top[i].Bytes = e.vocab.Piece(lp.Top[i].ID)
			}
		}
		var out textOut
		switch {
		case !req.IgnoreEOS && slices.Contains(e.info.EOS, tok):
			out, finish = e.det.flush(), FinishStop
		default:
			var stopped bool
			out, stopped = e.det.add(tok, lp)
			if stopped {
				finish = FinishStop
			} else if gen >= maxNew {
				out2 := e.det.flush()
				out.text += out2.text
				out.ids = append(out.ids, out2.ids...)
				out.lps = append(out.lps, out2.lps...)
				finish = FinishLength
			}
		}
		e.emit(j, c, out, finish)
		seq = append(seq, tok)
	}
	// fail ends the choice after a failed model call.
	fail := func(c int, err error) {
		e.cached = e.cached[:0]
		if ctx.Err() != nil {
			finish, runErr = e.stopReason(ctx, j)
		} else {
			e.modelResult(err)
			finish, runErr = FinishError, fmt.Errorf("inference: model: %w", err)
			e.log.Error().Err(err).Msg("model eval failed")
		}
		e.emit(j, c, e.det.flush(), finish)
	}
	for c := 0; c < n && (c == 0 || finish == FinishStop || finish == FinishLength); c++ {
		started = c + 1
		seq = seq[:len(req.Prompt)]
		smp.startChoice()
		var con Constraint
		stops := req.Stop
		if req.Constrain != nil {
			con, stops = req.Constrain(), nil
		}
		e.det.reset(e.vocab, stops)
		dr.startChoice()
		finish = ""
		for gen = 0; finish == ""; {
			if ctx.Err() != nil {
				finish, runErr = e.stopReason(ctx, j)
				e.emit(j, c, e.det.flush(), finish)
				break
			}
			stepStart := e.now()
			valid := commonPrefix(e.cached, seq)
			if first {
				valid = e.kv.restore(e, req.Owner, seq, valid)
			}
			if valid >= len(seq) {
				valid = len(seq) - 1
			}
			// A draft, and how much of it to verify (k = 0: decode plainly).
			var draft []int32
			var src, k int
			if verifier != nil && !first {
				room := min(maxNew-gen, e.info.ContextLen-len(seq)) - 1
				if spec.MaxDraft > 0 {
					room = min(room, spec.MaxDraft)
				}
				draft, src = dr.draft(seq, room)
				if len(draft) > 0 && valid == len(seq)-1 {
					k = planDraft(verifier, e.rates[src], len(draft), verifier.MaxVerify(valid))
				}
			}
			var logits Logits
			var rows Rows
			var reused int
			var err error
			if k > 0 {
				rows, err = e.verify(ctx, verifier, append(seq, draft[:k]...), valid)
			} else {
				logits, reused, err = e.eval(ctx, seq, valid)
			}
			evalDone := e.now()
			e.met.observeGraphs(e.model)
			if err != nil {
				fail(c, err)
				break
			}
			e.modelResult(nil)
			committed := len(seq) // rows the call made hold seq
			e.cached = append(e.cached[:0], seq...)
			if first {
				usage.CachedTokens = min(reused, len(req.Prompt))
				tm.PromptEval = evalDone.Sub(stepStart)
				tm.PromptN = len(req.Prompt) - usage.CachedTokens
			}
			produced, accepted, mismatch := 0, 0, false
			for i := 0; i <= k && finish == ""; i++ {
				if k > 0 {
					if logits, err = e.row(ctx, rows, i); err != nil {
						fail(c, err)
						break
					}
				}
				var tok int32
				var lp *Logprob
				if con != nil {
					t0 := e.now()
					tok, lp = smp.sampleConstrained(logits, wantLP, top, con)
					if tok < 0 || con.Accept(tok) != nil {
						finish, runErr = FinishError, errors.New("inference: the constraint allows no token")
						e.emit(j, c, e.det.flush(), finish)
						break
					}
					e.met.maskTime.Observe(e.now().Sub(t0).Seconds())
				} else {
					tok, lp = smp.sample(logits, wantLP, top)
				}
				take(c, tok, lp)
				produced++
				switch {
				case i < k && tok == draft[i]:
					accepted++
				case i < k:
					mismatch = true
				case k == 0 && len(draft) > 0:
					// Shadow check: keeps the estimate fresh at no cost.
					dr.observe(src, b2i(tok == draft[0]), tok != draft[0])
				}
				if mismatch {
					break
				}
			}
			if err != nil {
				break
			}
			if k > 0 {
				e.met.verifyCalls.Inc()
				e.met.draftTokens.WithLabelValues(sourceNames[src], "accepted").Add(float64(accepted))
				e.met.draftTokens.WithLabelValues(sourceNames[src], "rejected").Add(float64(k - accepted))
				dr.observe(src, accepted, mismatch)
				if src == srcPrediction {
					usage.AcceptedPredictionTokens += accepted
					usage.RejectedPredictionTokens += k - accepted
				}
				// Only the rows of accepted tokens are committed; the rest
				// are rolled back by the next call's valid count.
				e.cached = append(e.cached[:0], seq[:committed+accepted]...)
			}
			end := e.now()
			if first {
				e.met.ttft.Observe(end.Sub(start).Seconds())
				first = false
			} else {
				genTime += end.Sub(stepStart)
				per := end.Sub(stepStart) / time.Duration(max(produced, 1))
				for range produced {
					e.met.tpot.Observe(per.Seconds())
				}
			}
			e.met.hostTime.Observe(end.Sub(evalDone).Seconds())
		}
	}
	// Choices that never started (a timeout, cancellation or failure ended
	// the request early) still get their finish, so every choice has one.
	for c := started; c < n; c++ {
		e.emit(j, c, textOut{}, finish)
	}
	e.seq = seq[:0]
	tm.Generation = genTime
	tm.PredictedN = usage.CompletionTokens
	e.met.requests.WithLabelValues(string(finish)).Inc()
	e.met.promptTokens.Add(float64(usage.PromptTokens))
	e.met.cachedTokens.Add(float64(usage.CachedTokens))
	e.met.generatedTokens.Add(float64(usage.CompletionTokens))
	e.log.Debug().Str("finish", string(finish)).AnErr("err", runErr).
		Int("prompt_tokens", usage.PromptTokens).Int("cached_tokens", usage.CachedTokens).
		Int("completion_tokens", usage.CompletionTokens).Dur("queue_wait", tm.QueueWait).
		Dur("prompt_eval", tm.PromptEval).Dur("generation", tm.Generation).Msg("request done")
	e.kv.save(e, &req)
	j.s.push(Event{Done: true, Finish: finish, Err: runErr, Usage: usage, Timings: tm})
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
