// Package plan chooses and accounts for graph calls: the per-call cost
// estimates, the one policy by which every runner chooses a step's calls
// (Policy), and the runners' counters keyed by graph name.
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
// the QHexRT runner's StepCost starts from them and `hexserve bench`
// emulates them.
var V79Costs = Costs{Prefill: 64500 * time.Microsecond, Decode: 55 * time.Millisecond, LMHead: 7500 * time.Microsecond}
