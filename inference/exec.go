package inference

import (
	"context"
	"fmt"
	"time"

	"github.com/hexserve/hexserve/inference/sample"
)

// step runs one model step over the active sequences: gather, plan, one
// Batcher.Step, then sampling. It reports false when nothing could run.
func (e *Engine) step() bool {
	e.stepNo++
	start := e.now()
	c := e.gather()
	p := plan(c)
	if len(c.decode) > 0 {
		e.turn++
	}
	e.promptOnly = len(c.decode) > 0 && len(p.work) > 0 && !p.work[0].decoding()
	if len(p.work) == 0 {
		n := len(e.active)
		preempted := e.stalled > 0 && e.preempt()
		e.reap()
		return preempted || len(e.active) < n
	}
	ctx := e.ctx
	if len(p.work) == 1 {
		ctx = p.work[0].s.g.run
	}
	t0 := e.now()
	rows, err := e.callStep(ctx, p.runs())
	t1 := e.now()
	e.met.observeGraphs(e.model)
	if err != nil {
		ss := make([]*seq, len(p.work))
		for i := range p.work {
			ss[i] = p.work[i].s
		}
		e.failStep(ss, err)
		e.reap()
		return true
	}
	e.modelResult(nil)
	e.met.stepRows.Observe(float64(p.rows))
	e.consumeAll(p.work, rows, t0, t1)
	end := e.now()
	e.met.hostTime.Observe(end.Sub(t1).Seconds())
	e.observeShare(t0.Sub(start)+end.Sub(t1), t1.Sub(t0))
	e.account(p.work, t0, end)
	e.reap()
	return true
}

// account adds a step's time to the generation time of the requests whose
// first token came before it, once per request.
func (e *Engine) account(ws []work, t0, end time.Time) {
	for i := range ws {
		if g := ws[i].s.g; g.firstStep > 0 && g.firstStep < e.stepNo && g.counted != e.stepNo {
			g.genTime += end.Sub(t0)
			g.counted = e.stepNo
		}
	}
}

// callStep calls the model's Step, turning a panic or a malformed result
// into an error.
func (e *Engine) callStep(ctx context.Context, runs []Run) (rows []Rows, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in Step: %v", r)
		}
	}()
	rows, err = e.model.Step(ctx, runs)
	if err == nil && len(rows) != len(runs) {
		err = fmt.Errorf("Step returned %d results for %d runs", len(rows), len(runs))
	}
	for i := 0; err == nil && i < len(rows); i++ {
		if rows[i] == nil || rows[i].Len() != len(runs[i].Tokens) {
			err = fmt.Errorf("Step returned a bad row count for a run of %d tokens", len(runs[i].Tokens))
		}
	}
	return rows, err
}

// consumeAll samples a step's runs into their sequences. The one-row
// decodes (no draft to verify, no constraint) whose rows are held together
// are sampled in parallel by the sample workers, then taken in order; the
// other runs are consumed one after another.
func (e *Engine) consumeAll(ws []work, rows []Rows, t0, t1 time.Time) {
	jobs := e.sampleJobs[:0]
	var par, rest []int
	for i := range ws {
		w := &ws[i]
		if !e.parallelRow(w, rows[i]) {
			rest = append(rest, i)
			continue
		}
		l, err := e.row(w.s.g.run, rows[i], 0)
		if err != nil {
			e.failStep([]*seq{w.s}, err)
			continue
		}
		jobs = append(jobs, sample.Job{S: w.s.smp, L: l, WantLP: w.s.g.wantLP, Top: w.s.g.top})
		par = append(par, i)
	}
	e.sampling.Run(jobs)
	for n, j := range jobs {
		e.takeDecode(&ws[par[n]], j.Tok, j.LP, t0)
	}
	clear(jobs)
	e.sampleJobs = jobs[:0]
	for _, i := range rest {
		e.consume(&ws[i], rows[i], t0, t1)
	}
}

// parallelRow reports whether w is a plain decode row that the sample
// workers may sample.
func (e *Engine) parallelRow(w *work, r Rows) bool {
	h, ok := r.(HeldRows)
	return ok && h.Held() && w.s.status == running && w.k == 0 && w.s.con == nil &&
		w.decoding() && len(w.run.Tokens) == 1
}

// takeDecode takes the token sampled from a plain decode row (as
// consumeDecode does for a run without draft rows).
func (e *Engine) takeDecode(w *work, tok int32, lp *sample.Logprob, t0 time.Time) {
	s := w.s
	s.committed = w.run.Start + 1
	e.take(s, tok, lp)
	if len(w.draft) > 0 {
		// Shadow check: keeps the estimate fresh at no cost.
		s.dr.observe(w.src, b2i(tok == w.draft[0]), tok != w.draft[0])
	}
	e.met.tpot.Observe(e.now().Sub(t0).Seconds())
	e.firstToken(s.g)
}

// observeShare records the host's share of a step: plan, sampling, text
// and events against the model's Step call.
func (e *Engine) observeShare(host, model time.Duration) {
	if host+model <= 0 {
		return
	}
	e.met.hostShare.Observe(host.Seconds() / (host + model).Seconds())
	e.hostNS.Add(int64(host))
	e.modelNS.Add(int64(model))
}

// StepTimes are the host's time (planning, sampling, text, events) and the
// model's (Step calls) over all steps so far; host ÷ (host + model) is the
// host's share of a step.
func (e *Engine) StepTimes() (host, model time.Duration) {
	return time.Duration(e.hostNS.Load()), time.Duration(e.modelNS.Load())
}

// consume samples a run's rows into its sequence.
func (e *Engine) consume(w *work, rows Rows, t0, t1 time.Time) {
	s, r := w.s, w.run
	if w.decoding() {
		e.consumeDecode(w, rows, t0)
		return
	}
	g := s.g
	s.committed = r.Start + len(r.Tokens)
	if s.prefilling() || s.generated > 0 {
		// More rows to go, or a preempted sequence's rows are back: it
		// decodes on.
		return
	}
	l, err := e.row(g.run, rows, len(r.Tokens)-1)
	if err != nil {
		e.failStep([]*seq{s}, err)
		return
	}
	if g.firstStep == 0 {
		g.tm.PromptEval = t1.Sub(g.start)
		g.tm.PromptN = len(g.req.Prompt) - g.usage.CachedTokens
	}
	if tok, lp, ok := e.sampleRow(s, l); ok {
		e.take(s, tok, lp)
	}
	e.firstToken(g)
	if s.c == 0 {
		e.forkChoices(g, s, l)
	}
}

// firstToken records a request's time to first token.
func (e *Engine) firstToken(g *record) {
	if g.firstStep == 0 {
		g.firstStep = e.stepNo
		e.met.ttft.Observe(e.now().Sub(g.start).Seconds())
	}
}

// consumeDecode samples a decode (or verify) run: its rows in order while
// the draft tokens match.
func (e *Engine) consumeDecode(w *work, rows Rows, t0 time.Time) {
	s := w.s
	g := s.g
	s.committed = w.run.Start + 1
	produced, accepted, mismatch := 0, 0, false
	for i := 0; i <= w.k && s.status != finished; i++ {
		l, err := e.row(g.run, rows, i)
		if err != nil {
			e.failStep([]*seq{s}, err)
			return
		}
		tok, lp, ok := e.sampleRow(s, l)
		if !ok {
			return
		}
		e.take(s, tok, lp)
		produced++
		switch {
		case i < w.k && tok == w.draft[i]:
			accepted++
			s.committed++
		case i < w.k:
			mismatch = true
		case w.k == 0 && len(w.draft) > 0:
			// Shadow check: keeps the estimate fresh at no cost.
			s.dr.observe(w.src, b2i(tok == w.draft[0]), tok != w.draft[0])
		}
		if mismatch {
			break
		}
	}
	if w.k > 0 {
		e.met.verifyCalls.Inc()
		e.met.draftTokens.WithLabelValues(sourceNames[w.src], "accepted").Add(float64(accepted))
		e.met.draftTokens.WithLabelValues(sourceNames[w.src], "rejected").Add(float64(w.k - accepted))
		s.dr.observe(w.src, accepted, mismatch)
		if w.src == srcPrediction {
			g.usage.AcceptedPredictionTokens += accepted
			g.usage.RejectedPredictionTokens += w.k - accepted
		}
	}
	per := e.now().Sub(t0) / time.Duration(max(produced, 1))
	for range produced {
		e.met.tpot.Observe(per.Seconds())
	}
	e.firstToken(g)
}
