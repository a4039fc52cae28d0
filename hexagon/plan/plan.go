// Package plan chooses and accounts for graph calls: the per-call cost
// estimates, the one policy by which every runner chooses a step's calls
// (Policy), the planner that splits one sequence's evaluation into prefill
// windows and decode steps (the QHexRT runner's single-sequence path), and
// the runners' counters keyed by graph name.
package plan

import "time"

// Costs are the estimated durations of one call of each graph. A runner
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

// Step is one graph call of a plan: a prefill window of N tokens at Start,
// or (N == 1, !Prefill) a decode step.
type Step struct {
	Prefill  bool
	Start, N int
}

// Planner chooses graph calls for an evaluation.
type Planner struct {
	Chunked bool // prefill windows may start anywhere
	Window  int  // AR
	// Limit, when > 0, is where prefill windows must end: positions from
	// Limit on go through decode steps (a .pte's prefill graph holds only
	// CL − AR cache slots).
	Limit int
	Costs Costs
	// DecodeMeasured is false until the decode graph's cost is measured:
	// until then a single token goes to decode (as on v79), so that an
	// estimate scaled from other graphs cannot lock decode out.
	DecodeMeasured bool
}

// From returns the first position to evaluate for a sequence of n tokens
// when rows [0, valid) are reusable: valid, or 0 when re-prefilling is
// cheaper.
func (p *Planner) From(n, valid int) int {
	if valid >= n {
		valid = n - 1 // the last token must run again to produce its logits
	}
	if valid <= 0 {
		return 0
	}
	if p.Cost(n, 0) < p.Cost(n, valid) {
		return 0
	}
	return valid
}

// Cost estimates evaluating positions [start, n).
func (p *Planner) Cost(n, start int) time.Duration {
	var c time.Duration
	p.Each(n, start, func(s Step) { c += p.StepCost(s) })
	return c + p.Costs.LMHead
}

// StepCost is the estimate of one call.
func (p *Planner) StepCost(s Step) time.Duration {
	if s.Prefill {
		return p.Costs.Prefill
	}
	return p.Costs.Decode
}

// Each calls f for each graph call that evaluates positions [start, n).
func (p *Planner) Each(n, start int, f func(Step)) {
	pos := start
	for pos < n {
		rest := n - pos
		k := min(rest, p.Window)
		if p.Limit > 0 {
			k = min(k, p.Limit-pos)
		}
		canPrefill := (pos == 0 || p.Chunked) && k > 0
		if rest == 1 && pos > 0 && !p.DecodeMeasured {
			canPrefill = false
		}
		if canPrefill && time.Duration(k)*p.Costs.Decode > p.Costs.Prefill {
			f(Step{Prefill: true, Start: pos, N: k})
			pos += k
			continue
		}
		f(Step{Start: pos, N: 1})
		pos++
	}
}
