package inference

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hexserve/hexserve/inference/sample"
)

// worker runs steps until Close, and then until the active requests have
// ended (their contexts end with ErrClosed).
func (e *Engine) worker() {
	defer close(e.exited)
	defer e.sampling.Stop()
	for {
		closed := e.admit()
		if len(e.active) > 0 {
			if !e.step() {
				// Nothing could run (sequences waiting for room that a
				// release or an arrival brings): do not spin.
				e.idle()
			}
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

// openSeqs counts the sequences open in the model.
func (e *Engine) openSeqs() int {
	n := 0
	for _, g := range e.active {
		for _, s := range g.seqs {
			if s.open {
				n++
			}
		}
	}
	return n
}

// admit starts the waiting choices of active requests, then queued
// requests in arrival order, while sequences are free and the pool holds
// them. It reports whether the engine is closed.
func (e *Engine) admit() bool {
	defer e.releaseLinger()
	open := e.openSeqs()
	waiting := e.reopen(&open)
	for _, g := range e.active {
		for open < e.maxSeq && g.next < g.n && !g.failed && g.seqs[0].done >= len(g.req.Prompt) {
			if !e.openChoice(g, open) {
				break
			}
			open++
		}
	}
	for {
		e.mu.Lock()
		if e.closed || open >= e.maxSeq || len(e.queue) == 0 || waiting {
			closed := e.closed
			e.mu.Unlock()
			e.setActive(open)
			return closed
		}
		j := e.queue[0]
		if e.single != nil {
			e.single.setOwner(j.req.Owner)
		}
		if j.shareWaits < shareWaitSteps && e.pendingShare(&j.req, shareWaitSteps-j.shareWaits) {
			// Its prefix is a few steps away in a sequence of its owner:
			// the head (and what is behind it) waits for it, to fork it.
			j.shareWaits++
			e.mu.Unlock()
			e.setActive(open)
			return false
		}
		id, shared, err := e.openShared(&j.req)
		if errors.Is(err, ErrNoSlots) && open > 0 {
			e.mu.Unlock() // the head waits for a release; so does everything behind it
			e.setActive(open)
			return false
		}
		e.queue = slices.Delete(e.queue, 0, 1)
		j.state = running
		e.met.queueDepth.Set(float64(len(e.queue)))
		e.mu.Unlock()
		j.stop()
		if err != nil {
			e.finishEarly(j, FinishError, fmt.Errorf("inference: model: %w", err))
			continue
		}
		g := e.startGen(j)
		s := e.newSeq(g)
		s.id, s.open, s.cap = id, true, len(j.req.Prompt)+min(g.maxNew, e.grow)
		s.done, s.shared = shared, shared
		if shared == 0 {
			p := j.req.Prompt
			s.done = e.seqKV.restore(e, s, p[:len(p)-1])
		}
		g.usage.CachedTokens = s.done
		g.seqs, g.live = append(g.seqs, s), 1
		e.active = append(e.active, g)
		open++
	}
}

// minShareRows is the shortest prompt prefix a new request forks from a
// live sequence of its owner rather than evaluating again.
const minShareRows = 16

// openShared opens a sequence for a queued request: a Fork of the live
// (or just finished, see lingers) sequence of the same owner whose
// committed rows share the longest prefix with the prompt (at least
// minShareRows; never another owner's), or else a sequence of its own.
// It returns the rows shared.
func (e *Engine) openShared(req *Request) (SeqID, int, error) {
	reserve := len(req.Prompt) + min(e.maxNew(req), e.grow)
	if parent, rows := e.sharedPrefix(req); parent != nil {
		id, err := e.pool.Fork(parent.id, rows, reserve-rows)
		if err == nil {
			e.met.sharedRows.Add(float64(rows))
			return id, rows, nil
		}
	}
	e.releaseLinger() // their slots may be what Open needs
	id, err := e.pool.Open(reserve)
	return id, 0, err
}

// sharedPrefix finds the live sequence of req's owner whose committed rows
// share the longest prefix with req's prompt (all but its last token), and
// how many rows; nil when none shares minShareRows.
func (e *Engine) sharedPrefix(req *Request) (*seq, int) {
	if e.single != nil || req.N > 1 {
		// n > 1: the choices fork the first one's whole prompt, which a
		// fork of a fork may not share (Batcher.Fork of a fork's rows
		// past its shared ones fails on the .pte pool).
		return nil, 0
	}
	p := req.Prompt[:len(req.Prompt)-1]
	var best *seq
	n := minShareRows - 1
	try := func(s *seq) {
		if s.g.req.Owner != req.Owner {
			return // rows are never shared across owners
		}
		if rows := s.shareable(p); rows > n {
			best, n = s, rows
		}
	}
	for _, g := range e.active {
		for _, s := range g.seqs {
			if s.open && s.fin == "" {
				try(s)
			}
		}
	}
	for _, s := range e.linger {
		try(s)
	}
	return best, n
}

// shareable is how many of s's committed rows a Fork for prompt prefix p
// may share.
func (s *seq) shareable(p []int32) int {
	rows := commonPrefix(p, s.toks[:s.done])
	if s.shared > 0 {
		rows = min(rows, s.shared) // a fork shares on only its parent's rows
	}
	return rows
}

// lingers reports whether finished sequence s should stay in the pool
// until the next admission, because a queued request of its owner may fork
// its rows (see sharedPrefix); releaseLinger then releases it.
func (e *Engine) lingers(s *seq) bool {
	if e.single != nil || (s.fin != FinishStop && s.fin != FinishLength) {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, j := range e.queue {
		if j.req.Owner == s.g.req.Owner && j.req.N <= 1 && s.shareable(j.req.Prompt[:len(j.req.Prompt)-1]) >= minShareRows {
			return true
		}
	}
	return false
}

// releaseLinger releases the finished sequences kept for a fork.
func (e *Engine) releaseLinger() {
	for _, s := range e.linger {
		e.pool.Release(s.id)
	}
	clear(e.linger)
	e.linger = e.linger[:0]
}

// shareWaitSteps bounds the steps a request waits at the head of the
// queue for a prefix of its owner's to fork (see pendingShare).
const shareWaitSteps = 4

// pendingShare reports whether a live sequence of req's owner will, within
// steps steps, hold a prefix of req's prompt (all but its last token) that
// is at least minShareRows long and longer than any held now: a prompt
// being evaluated whose rows left fit in those steps. Waiting for it costs
// the request no more than evaluating the same rows itself.
func (e *Engine) pendingShare(req *Request, steps int) bool {
	_, held := e.sharedPrefix(req)
	if e.single != nil || req.N > 1 {
		return false
	}
	p := req.Prompt[:len(req.Prompt)-1]
	rows := steps * e.pool.BatchLimits().Rows
	for _, g := range e.active {
		if g.req.Owner != req.Owner || g.failed {
			continue
		}
		for _, s := range g.seqs {
			if !s.open || s.fin != "" || s.shared > 0 || s.done >= s.target() {
				continue
			}
			n := commonPrefix(p, s.toks[:s.target()])
			if n >= minShareRows && n > held && n > s.done && n-s.done <= rows {
				return true
			}
		}
	}
	return false
}

// reopen opens again the sequences released to make room, oldest first,
// once no sequence waits for slots. It reports whether one still waits
// (then no new request starts: the room goes to it first).
func (e *Engine) reopen(open *int) bool {
	waiting := false
	for _, g := range e.active {
		for _, s := range g.seqs {
			if !s.refill || s.open || s.fin != "" {
				continue
			}
			if e.stalled > 0 || *open >= e.maxSeq {
				waiting = true
				continue
			}
			rows := len(s.toks) + min(g.maxNew-s.n, e.grow)
			id, err := e.pool.Open(rows)
			if err != nil {
				if !errors.Is(err, ErrNoSlots) || *open == 0 {
					e.endSeq(s, FinishError, fmt.Errorf("inference: model: %w", err))
					continue
				}
				waiting = true
				continue
			}
			s.id, s.open, s.cap, s.shared = id, true, rows, 0
			// Its rows saved at preemption come back from the store; the
			// rest are evaluated again.
			s.done = e.seqKV.restore(e, s, s.toks[:len(s.toks)-1])
			s.refill = s.done < s.target()
			*open++
		}
	}
	return waiting
}

func (e *Engine) setActive(n int) {
	e.activeN.Store(int64(n))
	e.met.activeSeqs.Set(float64(n))
}

// maxNew is the tokens one choice of req may generate.
func (e *Engine) maxNew(req *Request) int {
	room := e.info.ContextLen - len(req.Prompt)
	if req.MaxTokens == 0 || req.MaxTokens > room {
		return room
	}
	return req.MaxTokens
}

// openChoice starts g's next choice as a sequence of its own that
// evaluates the prompt again (its rows could not be forked). A pool that
// cannot hold it even with nothing else open fails the request.
func (e *Engine) openChoice(g *gen, open int) bool {
	if e.single != nil {
		e.single.setOwner(g.req.Owner)
	}
	rows := len(g.req.Prompt) + min(g.maxNew, e.grow)
	id, err := e.pool.Open(rows)
	if err != nil {
		if !errors.Is(err, ErrNoSlots) || open == 0 {
			g.failed, g.runErr = true, fmt.Errorf("inference: model: %w", err)
			g.finish = FinishError
		}
		return false
	}
	s := e.newSeq(g)
	s.id, s.open, s.cap = id, true, rows
	g.seqs = append(g.seqs, s)
	g.live++
	return true
}

// forkChoices starts g's waiting choices on the rows of parent's prompt
// and samples their first token from l, its last row's logits.
func (e *Engine) forkChoices(g *gen, parent *seq, l Logits) {
	open := e.openSeqs()
	for ; open < e.maxSeq && g.next < g.n && !g.failed; open++ {
		id, err := e.pool.Fork(parent.id, len(g.req.Prompt), min(g.maxNew, e.grow))
		if err != nil {
			return // the choice opens a sequence of its own later
		}
		s := e.newSeq(g)
		s.id, s.open, s.done, s.shared = id, true, len(g.req.Prompt), len(g.req.Prompt)
		s.cap = len(g.req.Prompt) + min(g.maxNew, e.grow)
		g.seqs = append(g.seqs, s)
		g.live++
		if tok, lp, ok := e.sampleRow(s, l); ok {
			e.take(s, tok, lp)
		}
	}
}

// step runs one model step over the active sequences.
func (e *Engine) step() bool {
	e.stepNo++
	start := e.now()
	ss := e.plan()
	if len(ss) == 0 {
		n := len(e.active)
		preempted := e.stalled > 0 && e.preempt()
		e.reap()
		return preempted || len(e.active) < n
	}
	runs := make([]Run, len(ss))
	rowsN := 0
	for i, s := range ss {
		runs[i] = s.run
		rowsN += len(s.run.Tokens)
	}
	ctx := e.ctx
	if len(ss) == 1 {
		ctx = ss[0].g.ctx
	}
	t0 := e.now()
	rows, err := e.callStep(ctx, runs)
	t1 := e.now()
	e.met.observeGraphs(e.model)
	if err != nil {
		e.failStep(ss, err)
		e.reap()
		return true
	}
	e.modelResult(nil)
	e.met.stepRows.Observe(float64(rowsN))
	e.consumeAll(ss, rows, t0, t1)
	end := e.now()
	e.met.hostTime.Observe(end.Sub(t1).Seconds())
	e.observeShare(t0.Sub(start)+end.Sub(t1), t1.Sub(t0))
	e.account(ss, t0, end)
	e.reap()
	return true
}

// idle waits briefly for an arrival or Close.
func (e *Engine) idle() {
	t := time.NewTimer(time.Millisecond)
	defer t.Stop()
	select {
	case <-e.wake:
	case <-e.ctx.Done():
	case <-t.C:
	}
}

// account adds a step's time to the generation time of the requests whose
// first token came before it, once per request.
func (e *Engine) account(ss []*seq, t0, end time.Time) {
	for _, s := range ss {
		if g := s.g; !g.first && g.firstStep < e.stepNo && g.counted != e.stepNo {
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
	rows, err = e.pool.Step(ctx, runs)
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

// plan chooses this step's runs: one decode row for every decoding
// sequence (round-robin from a rotating start when rows are short, leaving
// a waiting prompt at least one), then prompt chunks, oldest request
// first, then draft rows.
func (e *Engine) plan() []*seq {
	budget := e.pool.BatchLimits().Rows
	var decode, prefill []*seq
	stalled := 0
	defer func() { e.stalled = stalled }()
	for _, g := range e.active {
		if err := g.ctx.Err(); err != nil && !g.failed {
			f, cause := e.stopReason(g.ctx, g.j)
			g.failed, g.failFin, g.runErr = true, f, cause
		}
		if g.failed {
			for _, s := range g.seqs {
				e.endSeq(s, g.failFin, nil)
			}
			continue
		}
		for _, s := range g.seqs {
			switch {
			case !s.open || s.fin != "":
			case s.done < s.target():
				prefill = append(prefill, s)
			case e.fits(s):
				decode = append(decode, s)
			default:
				stalled++
			}
		}
	}
	if len(decode) > 0 {
		r := e.turn % len(decode)
		decode = append(decode[r:], decode[:r]...)
		e.turn++
	}
	// When decode rows alone would fill the step, a waiting prompt still
	// gets a row (every other step when a step holds one row), so it
	// never starves behind decoding sequences.
	ndec := min(len(decode), budget)
	if len(prefill) > 0 && ndec == budget && (budget > 1 || e.turn%2 == 0) {
		ndec--
	}
	var picked []*seq
	for _, s := range decode[:ndec] {
		s.run = Run{Seq: s.id, Start: s.done, Tokens: s.toks[s.done : s.done+1]}
		s.draft, s.k = nil, 0
		budget--
		picked = append(picked, s)
	}
	for _, s := range prefill {
		if budget == 0 {
			break
		}
		n := min(budget, s.target()-s.done)
		s.run = Run{Seq: s.id, Start: s.done, Tokens: s.toks[s.done : s.done+n]}
		s.draft, s.k = nil, 0
		budget -= n
		picked = append(picked, s)
	}
	if e.cfg.Speculative.Enabled {
		rowsN := e.pool.BatchLimits().Rows - budget
		for _, s := range picked[:min(len(picked), len(decode))] {
			budget -= e.planSeqDraft(s, budget, rowsN)
		}
	}
	return picked
}

// planSeqDraft adds draft rows to decoding sequence s's run, at most
// budget, when its acceptance estimate and the model's costs say they pay;
// it returns how many.
func (e *Engine) planSeqDraft(s *seq, budget, rowsN int) int {
	g := s.g
	if budget <= 0 && e.single == nil {
		return 0
	}
	room := min(g.maxNew-s.n, e.info.ContextLen-len(s.toks), s.cap-s.done) - 1
	if m := e.cfg.Speculative.MaxDraft; m > 0 {
		room = min(room, m)
	}
	s.draft, s.src = s.dr.draft(s.toks, room)
	if len(s.draft) == 0 {
		return 0
	}
	var costs draftCoster
	maxRows := budget + 1
	if e.single != nil {
		if e.single.verifier == nil {
			return 0
		}
		costs, maxRows = e.single.verifier, e.single.maxVerify()
	} else {
		costs = stepCosts{e.pool, rowsN}
	}
	s.k = planDraft(costs, g.rates[s.src], len(s.draft), maxRows)
	if s.k > 0 {
		s.run.Tokens = append(slices.Clip(s.run.Tokens), s.draft[:s.k]...)
	}
	return s.k
}

// stepCosts prices a sequence's 1+k rows in a step that already carries
// base rows (its own one included): the step's time either way.
type stepCosts struct {
	b    Batcher
	base int
}

func (c stepCosts) Costs(k int) (verify, decode time.Duration) {
	return c.b.StepCost(c.base - 1 + k), c.b.StepCost(c.base)
}

// consumeAll samples a step's runs into their sequences. The single-row
// decodes (no draft to verify, no constraint) whose rows are held together
// are sampled in parallel by the sample workers, then taken in order; the
// other runs are consumed one after another.
func (e *Engine) consumeAll(ss []*seq, rows []Rows, t0, t1 time.Time) {
	jobs, js := e.jobs[:0], e.jobSeqs[:0]
	var rest []int
	for i, s := range ss {
		if !e.parallelRow(s, rows[i]) {
			rest = append(rest, i)
			continue
		}
		l, err := e.row(s.g.ctx, rows[i], 0)
		if err != nil {
			e.failStep([]*seq{s}, err)
			continue
		}
		jobs = append(jobs, sample.Job{S: s.smp, L: l, WantLP: s.g.wantLP, Top: s.g.top})
		js = append(js, s)
	}
	e.sampling.Run(jobs)
	for i, j := range jobs {
		e.takeDecode(js[i], j.Tok, j.LP, t0)
	}
	clear(jobs)
	clear(js)
	e.jobs, e.jobSeqs = jobs[:0], js[:0]
	for _, i := range rest {
		e.consume(ss[i], rows[i], t0, t1)
	}
}

// parallelRow reports whether s's run is a plain decode row that the
// sample workers may sample.
func (e *Engine) parallelRow(s *seq, r Rows) bool {
	h, ok := r.(HeldRows)
	return ok && h.Held() && s.fin == "" && s.k == 0 && s.con == nil &&
		s.done >= s.target() && s.done >= len(s.g.req.Prompt) && len(s.run.Tokens) == 1
}

// takeDecode takes the token sampled from a plain decode row (as
// consumeDecode does for a run without draft rows).
func (e *Engine) takeDecode(s *seq, tok int32, lp *Logprob, t0 time.Time) {
	s.done = s.run.Start + 1
	e.take(s, tok, lp)
	if len(s.draft) > 0 {
		// Shadow check: keeps the estimate fresh at no cost.
		s.dr.observe(s.src, b2i(tok == s.draft[0]), tok != s.draft[0])
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
func (e *Engine) consume(s *seq, rows Rows, t0, t1 time.Time) {
	g := s.g
	r := s.run
	prompt := len(g.req.Prompt)
	if s.refill && s.done < s.target() {
		s.done = r.Start + len(r.Tokens)
		s.refill = s.done < s.target() // rows back: it decodes on
		return
	}
	if s.done < prompt {
		if s.c == 0 && r.Start == 0 && s.done == 0 && e.single != nil {
			g.usage.CachedTokens = min(e.single.reused, prompt)
		}
		s.done = r.Start + len(r.Tokens)
		if s.done < prompt {
			return
		}
		l, err := e.row(g.ctx, rows, len(r.Tokens)-1)
		if err != nil {
			e.failStep([]*seq{s}, err)
			return
		}
		if g.first {
			g.tm.PromptEval = t1.Sub(g.start)
			g.tm.PromptN = prompt - g.usage.CachedTokens
		}
		if tok, lp, ok := e.sampleRow(s, l); ok {
			e.take(s, tok, lp)
		}
		e.firstToken(g)
		if s.c == 0 {
			e.forkChoices(g, s, l)
		}
		return
	}
	e.consumeDecode(s, rows, t0)
}

// firstToken records a request's time to first token.
func (e *Engine) firstToken(g *gen) {
	if g.first {
		g.first, g.firstStep = false, e.stepNo
		e.met.ttft.Observe(e.now().Sub(g.start).Seconds())
	}
}

// consumeDecode samples a decode (or verify) run: its rows in order while
// the draft tokens match.
func (e *Engine) consumeDecode(s *seq, rows Rows, t0 time.Time) {
	g := s.g
	s.done = s.run.Start + 1
	produced, accepted, mismatch := 0, 0, false
	for i := 0; i <= s.k && s.fin == ""; i++ {
		l, err := e.row(g.ctx, rows, i)
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
		case i < s.k && tok == s.draft[i]:
			accepted++
			s.done++
		case i < s.k:
			mismatch = true
		case s.k == 0 && len(s.draft) > 0:
			// Shadow check: keeps the estimate fresh at no cost.
			s.dr.observe(s.src, b2i(tok == s.draft[0]), tok != s.draft[0])
		}
		if mismatch {
			break
		}
	}
	if s.k > 0 {
		e.met.verifyCalls.Inc()
		e.met.draftTokens.WithLabelValues(sourceNames[s.src], "accepted").Add(float64(accepted))
		e.met.draftTokens.WithLabelValues(sourceNames[s.src], "rejected").Add(float64(s.k - accepted))
		s.dr.observe(s.src, accepted, mismatch)
		if s.src == srcPrediction {
			g.usage.AcceptedPredictionTokens += accepted
			g.usage.RejectedPredictionTokens += s.k - accepted
		}
	}
	per := e.now().Sub(t0) / time.Duration(max(produced, 1))
	for range produced {
		e.met.tpot.Observe(per.Seconds())
	}
	e.firstToken(g)
}

// reap releases finished sequences' slots and ends requests whose choices
// have all finished.
func (e *Engine) reap() {
	kept := e.active[:0]
	for _, g := range e.active {
		for _, s := range g.seqs {
			if s.fin != "" && !s.reaped {
				if s.open {
					if e.single != nil {
						e.single.truncate(s.done) // only committed rows stay resident
					}
					if s.c == 0 && s.fin != FinishError {
						e.seqKV.save(e, s, g.req.CacheKey)
					}
					if e.lingers(s) {
						e.linger = append(e.linger, s)
					} else {
						e.pool.Release(s.id)
					}
					s.open = false
				}
				s.reaped = true
				s.smp = nil
				g.live--
				g.finish = s.fin
			}
		}
		if g.live == 0 && (g.next == g.n || g.failed) {
			e.finishGen(g)
			continue
		}
		kept = append(kept, g)
	}
	clear(e.active[len(kept):])
	e.active = kept
	e.setActive(e.openSeqs())
}

// fits reports whether decoding sequence s has a slot for its next row,
// growing it when not (by e.grow rows, up to what the request may use).
func (e *Engine) fits(s *seq) bool {
	if s.done+1 <= s.cap {
		return true
	}
	g := s.g
	rows := min(s.cap+e.grow, len(g.req.Prompt)+g.maxNew)
	if err := e.pool.Grow(s.id, rows); err != nil {
		return false
	}
	s.cap = rows
	return true
}

// preempt makes room when every open sequence waits for slots: the
// youngest is released, to evaluate its rows again once there is room
// (the same rows: on float32 caches the same bits); with a KV store its
// committed rows are saved first and restored instead. It reports whether
// there was one.
func (e *Engine) preempt() bool {
	for i := len(e.active) - 1; i >= 0; i-- {
		g := e.active[i]
		for j := len(g.seqs) - 1; j >= 0; j-- {
			if s := g.seqs[j]; s.open && s.fin == "" {
				e.seqKV.save(e, s, "") // restored when it opens again
				e.pool.Release(s.id)
				s.open, s.refill, s.done = false, true, 0
				e.met.preemptions.Inc()
				return true
			}
		}
	}
	return false
}
