package hexagon

import "time"

// Costs are the estimated durations of one call of each graph. The runner
// starts from the v79 figures and replaces them with recent measured
// averages (GraphStats.Recent).
type Costs struct {
	Prefill time.Duration // one prefill window
	Decode  time.Duration // one decode step, without the lm-head
	LMHead  time.Duration // one lm-head call
}

// V79Costs are the measured per-call costs of the seed bundle on a Snapdragon
// 8 Elite (prefill ≈ 64.5 ms per window, decode ≈ 62.5 ms per token with the
// lm-head, which costs ≈ 7.5 ms a row). They are the one set of v79 figures:
// the planner starts from them and `hexserve bench` emulates them.
var V79Costs = Costs{Prefill: 64500 * time.Microsecond, Decode: 55 * time.Millisecond, LMHead: 7500 * time.Microsecond}

// step is one graph call of a plan: a prefill window of n tokens at start, or
// (n == 1, decode) a decode step.
type step struct {
	prefill  bool
	start, n int
}

// planner chooses graph calls for an evaluation.
type planner struct {
	chunked bool // prefill windows may start anywhere
	window  int  // AR
	ctxLen  int  // CTX
	costs   Costs
	// decodeMeasured is false until the decode graph's cost is measured:
	// until then a single token goes to decode (as on v79), so that an
	// estimate scaled from other graphs cannot lock decode out.
	decodeMeasured bool
}

// from returns the first position to evaluate for a sequence of n tokens when
// rows [0, valid) are reusable: valid, or 0 when re-prefilling is cheaper.
func (p *planner) from(n, valid int) int {
	if valid >= n {
		valid = n - 1 // the last token must run again to produce its logits
	}
	if valid <= 0 {
		return 0
	}
	if p.cost(n, 0) < p.cost(n, valid) {
		return 0
	}
	return valid
}

// cost estimates evaluating positions [start, n).
func (p *planner) cost(n, start int) time.Duration {
	var c time.Duration
	p.each(n, start, func(s step) { c += p.stepCost(s) })
	return c + p.costs.LMHead
}

func (p *planner) stepCost(s step) time.Duration {
	if s.prefill {
		return p.costs.Prefill
	}
	return p.costs.Decode
}

// each calls f for each graph call that evaluates positions [start, n).
func (p *planner) each(n, start int, f func(step)) {
	pos := start
	for pos < n {
		rest := n - pos
		canPrefill := pos == 0 || p.chunked
		if rest == 1 && pos > 0 && !p.decodeMeasured {
			canPrefill = false
		}
		if canPrefill && time.Duration(min(rest, p.window))*p.costs.Decode > p.costs.Prefill {
			k := min(rest, p.window)
			f(step{prefill: true, start: pos, n: k})
			pos += k
			continue
		}
		f(step{start: pos, n: 1})
		pos++
	}
}
