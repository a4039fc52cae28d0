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

// gen is one active request: its context, accounting and choices.
type gen struct {
	j      *job
	req    Request
	ctx    context.Context
	cancel func() // releases the context's resources
	start  time.Time
	tm     Timings
	usage  Usage
	n      int // choices
	maxNew int // tokens per choice
	seed   uint64
	wantLP bool
	top    int
	rates  [nSources]float64 // acceptance estimates, shared by the choices

	seqs    []*seq // started choices, in choice order
	next    int    // the next choice to start
	live    int    // started choices not finished
	first   bool   // no token yet (TTFT)
	genTime time.Duration
	finish  FinishReason // the last finished choice's
	runErr  error
	failed  bool         // a choice failed or was cancelled: the rest end with it
	failFin FinishReason // and how

	firstStep, counted int // the step of the first token, the last step counted in genTime
}

// seq is one choice of a gen: a sequence in the model's pool.
type seq struct {
	g    *gen
	c    int // choice index
	id   SeqID
	open bool
	toks []int32 // prompt and generated; the model holds toks[:done]
	done int
	smp  *sample.Sampler
	det  detok
	dr   drafter
	con  Constraint
	n    int // generated tokens
	fin  FinishReason
	cap  int // rows the sequence may hold (Open's or Fork's reserve, Grow)
	// shared is how many rows a Fork gave it (0: none); a later Fork of
	// this sequence may share no more of them.
	shared int

	refill bool // released to make room: its rows are evaluated again
	reaped bool // finished and accounted for

	// This step's run and draft.
	run    Run
	draft  []int32
	src, k int
}

// startGen makes a queued job active.
func (e *Engine) startGen(j *job) *gen {
	req := j.req
	g := &gen{j: j, req: req, start: e.now(), first: true}
	g.tm.QueueWait = g.start.Sub(j.enqueued)
	e.met.queueWait.Observe(g.tm.QueueWait.Seconds())
	g.usage.PromptTokens = len(req.Prompt)
	ctx, cancel := context.WithCancelCause(j.ctx)
	stop := context.AfterFunc(e.ctx, func() { cancel(ErrClosed) })
	timeout := req.Timeout
	if timeout == 0 {
		timeout = e.cfg.Timeout
	}
	cancelT := context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancelT = context.WithTimeoutCause(ctx, timeout, errTimeout)
	}
	g.ctx = ctx
	g.cancel = func() { cancelT(); stop(); cancel(nil) }
	g.n = max(req.N, 1)
	room := e.info.ContextLen - len(req.Prompt)
	g.maxNew = req.MaxTokens
	if g.maxNew == 0 || g.maxNew > room {
		g.maxNew = room
	}
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
	return g
}

// newSeq prepares choice c of g (not yet open in the model).
func (e *Engine) newSeq(g *gen) *seq {
	s := &seq{g: g, c: g.next}
	g.next++
	s.smp = sample.New(e.info.VocabSize)
	// Each choice has its own random stream, so the choices of a seeded
	// request are reproducible however they interleave.
	s.smp.Reset(g.req.Sampling, g.req.Prompt, g.seed+uint64(s.c)*0x9e3779b97f4a7c15)
	s.smp.StartChoice()
	stops := g.req.Stop
	if g.req.Constrain != nil {
		s.con, stops = g.req.Constrain(), nil
	}
	s.det.reset(e.vocab, stops)
	s.dr.reset(e.vocab, g.req.Prediction, g.req.PredictionTokens, e.cfg.Speculative.PromptLookup, &g.rates)
	s.toks = append(s.toks, g.req.Prompt...)
	return s
}

// target is the row a prefilling sequence evaluates up to: the prompt,
// or for a refill every row but the pending last token.
func (s *seq) target() int {
	if s.refill {
		return len(s.toks) - 1
	}
	return len(s.g.req.Prompt)
}

// take handles one sampled token: penalties, usage, stop handling and
// emission. It reports whether the choice finished.
func (e *Engine) take(s *seq, tok int32, lp *Logprob) bool {
	g := s.g
	s.smp.Accept(tok)
	s.dr.push(tok)
	s.n++
	g.usage.CompletionTokens++
	if lp != nil {
		lp.Bytes = e.vocab.Piece(tok)
		for i := range lp.Top {
			lp.Top[i].Bytes = e.vocab.Piece(lp.Top[i].ID)
		}
	}
	var out textOut
	switch {
	case !g.req.IgnoreEOS && slices.Contains(e.info.EOS, tok):
		out, s.fin = s.det.flush(), FinishStop
	default:
		var stopped bool
		out, stopped = s.det.add(tok, lp)
		if stopped {
			s.fin = FinishStop
		} else if s.n >= g.maxNew {
			out2 := s.det.flush()
			out.text += out2.text
			out.ids = append(out.ids, out2.ids...)
			out.lps = append(out.lps, out2.lps...)
			s.fin = FinishLength
		}
	}
	e.emit(g.j, s.c, out, s.fin)
	s.toks = append(s.toks, tok)
	return s.fin != ""
}

// sampleRow samples the next token of s from l. It reports false when the
// choice ended because the constraint allows no token.
func (e *Engine) sampleRow(s *seq, l Logits) (int32, *Logprob, bool) {
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
	if s.fin != "" {
		return
	}
	s.fin = f
	e.emit(s.g.j, s.c, s.det.flush(), f)
	if g := s.g; f != FinishStop && f != FinishLength && !g.failed {
		g.failed, g.failFin, g.runErr = true, f, err
	}
}

// failStep ends the choices of a failed model call: as cancelled or timed
// out when their context has ended, else as a model failure.
func (e *Engine) failStep(ss []*seq, err error) {
	failed := false
	for _, s := range ss {
		if g := s.g; g.ctx.Err() != nil {
			f, cause := e.stopReason(g.ctx, g.j)
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

// finishGen ends a request whose choices have all finished: the choices
// that never started get the request's finish, and Done is sent.
func (e *Engine) finishGen(g *gen) {
	finish := g.finish
	for _, s := range g.seqs {
		if s.fin != FinishStop && s.fin != FinishLength {
			finish = s.fin
		}
	}
	for c := g.next; c < g.n; c++ {
		e.emit(g.j, c, textOut{}, finish)
	}
	g.cancel()
	e.met.running.Dec()
	if g.req.Owner == e.ratesOwner || e.single != nil {
		e.rates, e.ratesOwner = g.rates, g.req.Owner
	}
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
	if e.single != nil {
		e.single.save(&g.req)
	}
	g.j.s.push(Event{Done: true, Finish: finish, Err: g.runErr, Usage: usage, Timings: tm})
}
