package inference

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/hexserve/hexserve/inference/sample"
)

// status is where a request or one of its sequences is in its life
// (vLLM's RequestStatus): a request waits in the queue, runs, and finishes;
// a sequence runs (open in the model's pool), may be preempted (released to
// make room: its rows come back from the KV store or are evaluated again),
// and finishes with a FinishReason. A running request whose choice failed
// or was cancelled is aborting: its other choices end with its finish.
type status uint8

const (
	waiting   status = iota // queued: no sequence yet
	running                 // active: its sequences hold rows in the pool
	preempted               // a sequence released to make room, to run again
	aborting                // a request ending early: its finish is the abnormal one
	finished                // ended; the FinishReason says why
)

// record is one request from Submit to its Done event: the queue's entry
// and, once admitted, its generation (accounting and choices). The worker
// owns it once it leaves the queue; until then status is guarded by
// Engine.mu.
type record struct {
	ctx      context.Context // the caller's
	req      Request
	s        *Stream
	enqueued time.Time
	status   status
	stop     func() bool // unregisters the queue's cancellation hook
	// shareWaits: the steps it waited at the head of the queue for a
	// prefix to fork (worker only; at most shareWaitSteps).
	shareWaits int

	// Set at admission (worker only).
	run     context.Context // ctx with the engine's Close and the timeout
	cancel  func()          // releases run's resources
	start   time.Time
	tm      Timings
	usage   Usage
	choices int // Request.N, at least 1
	maxNew  int // tokens per choice
	rows    int // the most rows a choice holds at once (rowLimit)
	seed    uint64
	wantLP  bool
	top     int
	rates   [nSources]float64 // acceptance estimates, shared by the choices

	seqs    []*seq // started choices not yet released, in choice order
	next    int    // the next choice to start
	genTime time.Duration
	finish  FinishReason // the request's: the last choice's, or (aborting) the first abnormal one
	runErr  error

	firstStep, counted int // the step of the first token (0: none yet), the last step counted in genTime
}

// seq is one choice of a request: a sequence in the model's pool.
type seq struct {
	g         *record
	c         int // choice index
	id        SeqID
	status    status       // running, preempted or finished
	fin       FinishReason // why it finished
	toks      []int32      // prompt and generated; the model holds toks[:committed]
	committed int          // rows the model holds
	generated int          // tokens sampled
	cap       int          // rows the sequence may hold (Open's or Fork's reserve, Grow)
	// evicted is how many rows before committed a ContextShifter's Shift
	// freed: toks stays indexed by position, and the model holds
	// committed − evicted rows. shifted: the sequence's rows are no longer
	// a prefix of its request's tokens (a Shift, or a re-read of its sink
	// and newest tail), so nothing reuses them as one.
	evicted int
	shifted bool
	// shared is how many rows a Fork gave it (0: none); a later Fork of
	// this sequence may share no more of them. lent is the most rows a
	// Fork took from it: a request that takes it over keeps at least those.
	shared, lent int

	smp *sample.Sampler
	det detok
	dr  drafter
	con Constraint
}

// maxNew is the tokens one choice of req may generate: MaxTokens, clamped
// to the context left after the prompt (0: all of it). With ContextShift
// the window does not bound them: MaxTokens, else one window's worth.
func (e *Engine) maxNew(req *Request) int {
	room := e.info.ContextLen - len(req.Prompt)
	switch {
	case req.ContextShift && req.MaxTokens > 0:
		return req.MaxTokens
	case req.ContextShift:
		return e.info.ContextLen
	case req.MaxTokens == 0 || req.MaxTokens > room:
		return room
	}
	return req.MaxTokens
}

// rowLimit is the most rows a choice of req holds at once: its prompt and
// its tokens, at most the window.
func (e *Engine) rowLimit(req *Request) int {
	return min(len(req.Prompt)+e.maxNew(req), e.info.ContextLen)
}

// reserve is how many slots a sequence that holds from rows sets aside:
// e.grow (growRows) more, at most limit, the most rows it may ever hold.
func (e *Engine) reserve(from, limit int) int { return min(from+e.grow, limit) }

// limit is the most rows s may ever hold at once.
func (s *seq) limit() int { return s.g.rows }

// held is how many rows the model holds for s.
func (s *seq) held() int { return s.committed - s.evicted }

// admitted starts a queued request's generation.
func (e *Engine) admitted(g *record) {
	req := &g.req
	g.start = e.now()
	g.tm.QueueWait = g.start.Sub(g.enqueued)
	e.met.queueWait.Observe(g.tm.QueueWait.Seconds())
	g.usage.PromptTokens = len(req.Prompt)
	ctx, cancel := context.WithCancelCause(g.ctx)
	stop := context.AfterFunc(e.ctx, func() { cancel(ErrClosed) })
	timeout := req.Timeout
	if timeout == 0 {
		timeout = e.cfg.Timeout
	}
	cancelT := context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancelT = context.WithTimeoutCause(ctx, timeout, errTimeout)
	}
	g.run = ctx
	g.cancel = func() { cancelT(); stop(); cancel(nil) }
	g.choices = max(req.N, 1)
	g.maxNew = e.maxNew(req)
	g.rows = e.rowLimit(req)
	if req.Sampling.Seed != nil {
		g.seed = uint64(*req.Sampling.Seed)
	} else {
		g.seed = rand.Uint64()
	}
	g.wantLP = req.Logprobs
	if g.wantLP {
		g.top = req.TopLogprobs
	}
	g.rates = ratePrior
	if req.Owner == e.ratesOwner {
		// Prompt lookup's estimate carries over within one owner; another
		// owner's text never steers this one's drafting.
		g.rates[srcLookup] = e.rates[srcLookup]
	}
	e.met.running.Inc()
}

// newSeq prepares choice g.next of g (not yet open in the model).
func (e *Engine) newSeq(g *record) *seq {
	s := &seq{g: g, c: g.next, status: running}
	g.next++
	s.smp = sample.New(e.info.VocabSize)
	// Each choice has its own random stream, so the choices of a seeded
	// request are reproducible however they interleave.
	s.smp.Reset(g.req.Sampling, g.req.Prompt, g.seed+uint64(s.c)*0x9e3779b97f4a7c15)
	s.smp.StartChoice()
	stops := g.req.Stop
	if g.req.Constrain != nil {
		// After an Open reasoning the constraint starts with the answer;
		// else the text may not start with a reasoning.
		stops = nil
		if r := g.req.Reasoning; r == nil || !r.Open {
			s.con = g.req.Constrain()
		}
	}
	s.det.reset(e.vocab, stops)
	p := g.req.Prompt
	startsText := len(p) == 0 || e.vocab.IsSpecial(p[len(p)-1])
	if startsText {
		s.det.startText()
	}
	s.det.startThink(g.req.Reasoning)
	s.dr.reset(e.vocab, g.req.Prediction, g.req.PredictionTokens, startsText, e.cfg.Speculative.PromptLookup, &g.rates)
	s.toks = append(s.toks, g.req.Prompt...)
	return s
}

// target is the row a sequence evaluates up to before it samples or
// decodes: its prompt, or once it has generated (after a preemption, a
// re-read) every row but the pending last token.
func (s *seq) target() int {
	if s.generated > 0 {
		return len(s.toks) - 1
	}
	return len(s.toks)
}

// prefilling reports whether s has rows to evaluate before its next token.
func (s *seq) prefilling() bool { return s.committed < s.target() }

// take handles one sampled token: penalties, usage, stop handling and
// emission. It reports whether the choice finished.
func (e *Engine) take(s *seq, tok int32, lp *sample.Logprob) bool {
	g := s.g
	s.smp.Accept(tok)
	s.dr.push(tok)
	s.generated++
	g.usage.CompletionTokens++
	if lp != nil {
		// As the text reads them: a reply's first token without
		// SentencePiece's leading space (StartPiece).
		lp.Bytes = s.det.next(tok)
		for i := range lp.Top {
			lp.Top[i].Bytes = s.det.next(lp.Top[i].ID)
		}
	}
	var out textOut
	var fin FinishReason
	switch {
	case !g.req.IgnoreEOS && slices.Contains(e.info.EOS, tok):
		out, fin = s.det.flush(), FinishStop
	default:
		var stopped bool
		out, stopped = e.addText(s, tok, lp)
		if stopped {
			fin = FinishStop
		} else if s.generated >= g.maxNew {
			out.join(s.det.flush())
			fin = FinishContext
			if g.req.ContextShift || g.req.MaxTokens > 0 && s.generated >= g.req.MaxTokens {
				fin = FinishLength
			}
		}
	}
	e.emit(g, s.c, out, fin)
	s.toks = append(s.toks, tok)
	if fin != "" {
		s.end(fin)
	}
	return fin != ""
}

// addText adds tok to s's text. With a reasoning, it counts the reasoning
// tokens, forces the reasoning's end when its budget is spent, and starts
// the request's constraint when the answer starts.
func (e *Engine) addText(s *seq, tok int32, lp *sample.Logprob) (textOut, bool) {
	th := s.det.think
	if th == nil {
		return s.det.add(tok, lp)
	}
	before := th.phase
	out, stopped := s.det.add(tok, lp)
	spent := th.count(before)
	f, forcing := s.con.(*forced)
	switch {
	case forcing && (f.done() || th.phase == answering), before == reasoning && th.phase == answering:
		s.con = nil
		if c := s.g.req.Constrain; c != nil && th.phase == answering {
			s.con = c()
		}
	case spent && s.con == nil && !th.forced:
		th.forced = true
		s.con = &forced{toks: th.r.EndTokens}
	}
	return out, stopped
}

// end marks s finished with f and folds f into its request's finish.
func (s *seq) end(f FinishReason) {
	s.status, s.fin = finished, f
	if th := s.det.think; th != nil {
		s.g.usage.ReasoningTokens += th.tokens
	}
	if g := s.g; g.status != aborting && (!abnormal(g.finish) || abnormal(f)) {
		g.finish = f
	}
}

// abort ends g early with f (its first abnormal finish: later ones do not
// replace it) and err: its choices end with f.
func (g *record) abort(f FinishReason, err error) {
	if g.status == aborting {
		return
	}
	g.status, g.finish, g.runErr = aborting, f, err
}

// abnormal reports whether f ends a choice other than by its text.
func abnormal(f FinishReason) bool {
	return f != "" && f != FinishStop && f != FinishLength && f != FinishContext
}

// sampleRow samples the next token of s from l. It reports false when the
// choice ended because the constraint allows no token.
func (e *Engine) sampleRow(s *seq, l sample.Logits) (int32, *sample.Logprob, bool) {
	g := s.g
	if s.con == nil {
		tok, lp := s.smp.Sample(e.sampling.Scratch(), l, g.wantLP, g.top)
		return tok, lp, true
	}
	t0 := e.now()
	tok, lp := s.smp.SampleConstrained(e.sampling.Scratch(), l, g.wantLP, g.top, s.con)
	if tok < 0 || s.con.Accept(tok) != nil {
		e.endSeq(s, FinishError, errors.New("inference: the constraint allows no token"))
		return 0, nil, false
	}
	e.met.maskTime.Observe(e.now().Sub(t0).Seconds())
	return tok, lp, true
}

// endSeq finishes a choice early (error, cancellation, timeout): the
// detokenizer's held text is flushed with the finish, and the request's
// other choices end with it.
func (e *Engine) endSeq(s *seq, f FinishReason, err error) {
	if s.status == finished {
		return
	}
	e.emit(s.g, s.c, s.det.flush(), f)
	s.end(f)
	if abnormal(f) {
		s.g.abort(f, err)
	}
}

// failStep ends the choices of a failed model call: as cancelled or timed
// out when their context has ended, else as a model failure.
func (e *Engine) failStep(ss []*seq, err error) {
	failed := false
	for _, s := range ss {
		if g := s.g; g.run.Err() != nil {
			f, cause := e.stopReason(g)
			e.endSeq(s, f, cause)
		} else {
			failed = true
			e.endSeq(s, FinishError, fmt.Errorf("inference: model: %w", err))
		}
	}
	if failed {
		e.modelResult(err)
		e.log.Error().Err(err).Msg("model step failed")
	}
}

// finishRecord ends a request whose choices have all finished: the choices
// that never started get the request's finish, and Done is sent.
func (e *Engine) finishRecord(g *record) {
	finish := g.finish
	for c := g.next; c < g.choices; c++ {
		e.emit(g, c, textOut{}, finish)
	}
	g.status = finished
	g.cancel()
	e.met.running.Dec()
	e.rates, e.ratesOwner = g.rates, g.req.Owner
	tm, usage := g.tm, g.usage
	tm.Generation = g.genTime
	tm.PredictedN = usage.CompletionTokens
	e.met.requests.WithLabelValues(string(finish)).Inc()
	e.met.promptTokens.Add(float64(usage.PromptTokens))
	e.met.cachedTokens.Add(float64(usage.CachedTokens))
	e.met.generatedTokens.Add(float64(usage.CompletionTokens))
	e.log.Debug().Str("finish", string(finish)).AnErr("err", g.runErr).
		Int("prompt_tokens", usage.PromptTokens).Int("cached_tokens", usage.CachedTokens).
		Int("completion_tokens", usage.CompletionTokens).Dur("queue_wait", tm.QueueWait).
		Dur("prompt_eval", tm.PromptEval).Dur("generation", tm.Generation).Msg("request done")
	g.s.push(Event{Done: true, Finish: finish, Err: g.runErr, Usage: usage, Timings: tm})
}
