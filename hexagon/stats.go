package hexagon

import (
	"time"

	"github.com/hexserve/hexserve/inference"
)

// GraphStats counts one graph kind's executions.
type GraphStats struct {
	Calls  int64         // executes, including failed ones
	Failed int64         // executes that returned an error
	Time   time.Duration // wall time inside Execute
	// CPU is the calling thread's CPU time inside Execute (Linux; zero
	// elsewhere): on a phone the FastRPC call's host share; under hostsim
	// also the graph work the calling thread computes itself. Exact when
	// the caller's goroutine is locked to its OS thread (bench locks it);
	// otherwise the two readings may come from different threads.
	CPU time.Duration
	// Recent is the exponentially weighted moving average (weight
	// RecentWeight) of the successful executes' times, seeded with the
	// first one; the planner's cost estimate, so plans follow latency
	// changes instead of lifetime averages.
	Recent time.Duration
}

// RecentWeight is the weight of the newest call in GraphStats.Recent.
const RecentWeight = 0.2

// observe records one execute of d.
func (g *GraphStats) observe(d time.Duration, failed bool) {
	g.Calls++
	g.Time += d
	if failed {
		g.Failed++
		return
	}
	if g.Calls-g.Failed == 1 {
		g.Recent = d
		return
	}
	g.Recent += time.Duration(RecentWeight * float64(d-g.Recent))
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

// Stats returns the cumulative counters as of the end of the last Eval. It
// may be called from any goroutine, also while an Eval runs.
func (r *Runner) Stats() Stats {
	r.pubMu.Lock()
	defer r.pubMu.Unlock()
	return r.pub
}

// publish makes the worker's counters visible to Stats.
func (r *Runner) publish() {
	r.pubMu.Lock()
	r.pub = r.stats
	r.pubMu.Unlock()
}

// Estimates returns the per-call cost estimates the planner uses now.
func (r *Runner) Estimates() Costs { c, _ := r.measuredCosts(); return c }

// measuredCosts replaces the initial estimates with the recent averages
// (GraphStats.Recent) once a graph has run successfully. A graph not measured yet keeps its initial estimate scaled
// by how far its closest measured sibling is from its own (prefill and
// decode stand for each other; the lm-head takes the mean of both), so a
// host much faster or slower than the v79 figures compares like with like.
func (r *Runner) measuredCosts() (Costs, [nRoles]bool) {
	c := r.cfg.Costs
	if c == (Costs{}) {
		c = V79Costs
	}
	est := [nRoles]*time.Duration{&c.Prefill, &c.Decode, &c.LMHead}
	var measured [nRoles]bool
	var ratio [nRoles]float64
	for i, g := range r.stats.Graphs {
		if ok := g.Calls - g.Failed; ok >= 1 && *est[i] > 0 {
			recent := max(g.Recent, 1)
			ratio[i] = float64(recent) / float64(*est[i])
			*est[i], measured[i] = recent, true
		}
	}
	scale := func(i int, from ...int) {
		if measured[i] {
			return
		}
		var sum float64
		n := 0
		for _, j := range from {
			if measured[j] {
				sum += ratio[j]
				n++
			}
		}
		if n > 0 {
			*est[i] = time.Duration(float64(*est[i]) * sum / float64(n))
		}
	}
	scale(rolePrefill, roleDecode)
	scale(roleDecode, rolePrefill)
	scale(roleLMHead, rolePrefill, roleDecode)
	return c, measured
}

// GraphTotals implements inference.GraphTimer, so the engine exports the
// runner's per-graph execution counts and times as metrics.
func (r *Runner) GraphTotals() []inference.GraphTotal {
	s := r.Stats()
	names := [...]string{PrefillGraph: "prefill", DecodeGraph: "decode", LMHeadGraph: "lmhead"}
	out := make([]inference.GraphTotal, len(names))
	for i, n := range names {
		out[i] = inference.GraphTotal{Graph: n, Calls: s.Graphs[i].Calls, Time: s.Graphs[i].Time}
	}
	return out
}
