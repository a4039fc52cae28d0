package inference

import (
	"slices"
	"time"
)

// work is one sequence's part of a step: its run and the draft it carries.
type work struct {
	s     *seq
	run   Run
	draft []int32 // the drafter's proposal (shadow-checked when k = 0)
	src   int     // its source
	k     int     // draft tokens the run carries
}

// decoding reports whether w is a decode (or verify) run rather than
// prompt rows (or a preempted sequence's rows evaluated again).
func (w *work) decoding() bool { return !w.s.prefilling() }

// stepPlan is one step as plan chose it: the work in run order.
type stepPlan struct {
	work []work
	rows int // tokens over all runs
}

// runs are the plan's runs for Batcher.Step.
func (p *stepPlan) runs() []Run {
	runs := make([]Run, len(p.work))
	for i := range p.work {
		runs[i] = p.work[i].run
	}
	return runs
}

// candidates are what a step may run, as gather found them.
type candidates struct {
	decode  []work // decoding sequences with their draft proposals, in arrival order
	prefill []*seq // sequences with rows to evaluate, oldest request first
	rows    int    // BatchLimits().Rows
	align   int    // BatchLimits().Align
	turn    int    // rotates the order of decode rows when they are short
	drafts  bool   // speculative decoding is on
	cost    func(rows int) time.Duration
	// promptOnly: the last step ran prompt rows alone while sequences
	// waited to decode (at most one such step in a row).
	promptOnly bool
}

// plan chooses a step's runs from c, changing nothing: one decode row for
// every decoding sequence (round-robin from a rotating start when rows are
// short, leaving a waiting prompt at least one), then prompt chunks, oldest
// request first, then draft rows where the acceptance estimate and the
// model's step costs say they pay.
func plan(c candidates) stepPlan {
	budget := c.rows
	decode := c.decode
	if len(decode) > 0 {
		r := c.turn % len(decode)
		decode = append(slices.Clip(decode[r:]), decode[:r]...)
	}
	// When decode rows alone would fill the step, a waiting prompt still
	// gets a row (every other step when a step holds one row), so it
	// never starves behind decoding sequences.
	ndec := min(len(decode), budget)
	if len(c.prefill) > 0 && ndec == budget && (budget > 1 || (c.turn+1)%2 == 0) {
		ndec--
	}
	if ndec > 0 && c.additive(ndec) {
		// Runs take turns (each decode row costs a call of its own), so a
		// step of several decode rows costs no less than as many steps of
		// one, and every token of it waits for the slowest: a step carries
		// one decode row (round-robin), and a new prompt, which would wait
		// behind it, gets a step of its own, once; the streams lose one
		// row's time.
		ndec = 1
		if c.newPrompt() && !c.promptOnly {
			ndec = 0
		}
	}
	if c.align > 1 && len(c.prefill) > 0 && !c.promptOnly {
		// The oldest prompt's run goes whole: the decode rows make room
		// for it, and the next step is theirs.
		ndec = min(ndec, max(0, budget-c.chunk(c.prefill[0])))
	}
	var p stepPlan
	for _, w := range decode[:ndec] {
		s := w.s
		w.run = Run{Seq: s.id, Start: s.committed, Tokens: s.toks[s.committed : s.committed+1]}
		p.work = append(p.work, w)
	}
	budget -= ndec
	for _, s := range c.prefill {
		if budget == 0 {
			break
		}
		n := c.chunk(s)
		if n > budget {
			if c.align > 1 {
				continue // a run of an aligned model goes whole
			}
			n = budget
		}
		p.work = append(p.work, work{s: s, run: Run{Seq: s.id, Start: s.committed, Tokens: s.toks[s.committed : s.committed+n]}})
		budget -= n
	}
	p.rows = c.rows - budget
	if c.drafts {
		costs := stepCosts{c.cost, p.rows}
		for i := range ndec {
			w := &p.work[i]
			if budget <= 0 || len(w.draft) == 0 || !c.verifies(w.s) {
				continue
			}
			w.k = planDraft(costs, w.s.g.rates[w.src], len(w.draft), budget+1)
			w.run.Tokens = append(slices.Clip(w.run.Tokens), w.draft[:w.k]...)
			budget -= w.k
			p.rows += w.k
		}
	}
	return p
}

// verifies reports whether s's draft rows may be verified. On an aligned
// model a verify row's bits differ from a decode row's (it reads its run's
// earlier rows at the graph's precision), so a seeded request's drafts are
// only shadow-checked: it repeats exactly. Others keep speculation.
func (c *candidates) verifies(s *seq) bool {
	return c.align <= 1 || s.g.req.Sampling.Seed == nil
}

// chunk is how many rows s's next prompt run evaluates: the rest up to its
// target; on a model that states an alignment (BatchLimits.Align), its
// prompt rows up to the next multiple of align, and a generated row (a
// preempted sequence's, evaluated again) alone, as its decode was.
func (c *candidates) chunk(s *seq) int {
	if c.align <= 1 {
		return s.target() - s.committed
	}
	p := len(s.g.req.Prompt)
	if s.committed >= p {
		return 1
	}
	return min(p, s.committed-s.committed%c.align+c.align) - s.committed
}

// newPrompt reports whether a prompt waits for its request's first token.
func (c *candidates) newPrompt() bool {
	for _, s := range c.prefill {
		if s.generated == 0 && s.g.firstStep == 0 {
			return true
		}
	}
	return false
}

// additive reports whether a step of n decode rows (at least 2) costs the
// sum of its rows' (a QHexRT-contract bundle runs each sequence's rows as
// calls of their own) rather than one multi-row call's. It asks about the
// step's own rows: on a Genie bundle two rows cost as much as two AR-1
// calls (AR-128 37 ms, AR-1 18.6 ms), eight rows still one AR-128 call.
func (c *candidates) additive(n int) bool {
	n = max(n, 2)
	one := c.cost(1)
	return one > 0 && c.cost(n) >= time.Duration(n)*one*19/20
}

// stepCosts prices a sequence's 1+k rows in a step that already carries
// base rows (its own one included): the step's time either way.
type stepCosts struct {
	cost func(rows int) time.Duration
	base int
}

func (c stepCosts) Costs(k int) (verify, decode time.Duration) {
	return c.cost(c.base - 1 + k), c.cost(c.base)
}

// gather finds the step's candidates: it ends the choices of cancelled,
// timed-out or failed requests, grows decoding sequences that need a slot
// (counting in e.stalled those that cannot have one) and asks the drafters
// for proposals.
func (e *Engine) gather() candidates {
	c := candidates{rows: e.lim.Rows, align: e.lim.Align, turn: e.turn,
		drafts: e.cfg.Speculative.Enabled, cost: e.stepCost, promptOnly: e.promptOnly}
	e.stalled = 0
	for _, g := range e.active {
		if err := g.run.Err(); err != nil && g.status != aborting {
			g.abort(e.stopReason(g))
		}
		if g.status == aborting {
			for _, s := range g.seqs {
				e.endSeq(s, g.finish, nil)
			}
			continue
		}
		for _, s := range g.seqs {
			if s.status == running && !s.prefilling() && e.full(s) {
				e.shift(s) // it may read rows again (prefill) or wait to (preempted)
			}
			switch {
			case s.status != running:
			case s.prefilling():
				c.prefill = append(c.prefill, s)
			case e.fits(s):
				c.decode = append(c.decode, e.propose(s))
			default:
				e.stalled++
			}
		}
	}
	return c
}

// propose is decoding sequence s's work before planning: its drafter's
// proposal when speculative decoding is on.
func (e *Engine) propose(s *seq) work {
	w := work{s: s}
	if !e.cfg.Speculative.Enabled {
		return w
	}
	room := min(s.g.maxNew-s.generated, e.info.ContextLen-s.held()-1, s.cap-s.held()) - 1
	if m := e.cfg.Speculative.MaxDraft; m > 0 {
		room = min(room, m)
	}
	w.draft, w.src = s.dr.draft(s.toks, room)
	return w
}
