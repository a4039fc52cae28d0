package hexagon

import "time"

// GraphStats counts one graph kind's executions.
type GraphStats struct {
	Calls  int64         // executes, including failed ones
	Failed int64         // executes that returned an error
	Time   time.Duration // wall time inside Execute
}

// Mean is the average time per call.
func (g GraphStats) Mean() time.Duration {
	if g.Calls == 0 {
		return 0
	}
	return g.Time / time.Duration(g.Calls)
}

// Stats are a Runner's cumulative counters. Host-side time is split by what
// it does; everything is measured with time.Now around the work.
type Stats struct {
	Graphs  [3]GraphStats // indexed by PrefillGraph, DecodeGraph, LMHeadGraph
	Embed   time.Duration // embedding rows → x
	Rope    time.Duration // cos/sin rows
	Mask    time.Duration // mask updates
	KVCopy  time.Duration // new_k/new_v rows → cache
	Convert time.Duration // y → lm-head input
	Reloads int64         // context reloads after device restarts
}

// Indexes of Stats.Graphs.
const (
	PrefillGraph = rolePrefill
	DecodeGraph  = roleDecode
	LMHeadGraph  = roleLMHead
)

// Host is the total host-side time.
func (s Stats) Host() time.Duration { return s.Embed + s.Rope + s.Mask + s.KVCopy + s.Convert }

// Stats returns the cumulative counters.
func (r *Runner) Stats() Stats { return r.stats }

// Costs returns the per-call cost estimates the planner uses now.
func (r *Runner) Costs() Costs { return r.measuredCosts() }

// measuredCosts replaces the initial estimates with measured means once a
// graph has run successfully a few times.
func (r *Runner) measuredCosts() Costs {
	c := r.plan.costs
	if r.cfg.Costs != (Costs{}) || c == (Costs{}) {
		c = r.cfg.Costs
		if c == (Costs{}) {
			c = V79Costs
		}
	}
	set := func(dst *time.Duration, g GraphStats) {
		if ok := g.Calls - g.Failed; ok >= 2 && g.Failed == 0 {
			*dst = g.Mean()
		}
	}
	set(&c.Prefill, r.stats.Graphs[rolePrefill])
	set(&c.Decode, r.stats.Graphs[roleDecode])
	set(&c.LMHead, r.stats.Graphs[roleLMHead])
	return c
}
