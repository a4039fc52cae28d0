package qhexrt

import (
	"time"

	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/inference"
)

// Stats returns the cumulative counters (graphs by name) as of the end of
// the last Step. It may be called from any goroutine, also while a Step
// runs.
func (r *Runner) Stats() plan.Stats { return r.board.Load() }

// publish makes the worker's counters visible to Stats.
func (r *Runner) publish() { r.board.Publish(r.stats) }

// GraphKey is the name under which role's graph ("prefill", "decode",
// "lmhead") is counted in Stats.Graphs.
func (r *Runner) GraphKey(role string) string {
	for i, n := range roleNames {
		if n == role {
			return r.spec.key(i)
		}
	}
	return ""
}

// Estimates returns the per-call cost estimates the planner uses now.
func (r *Runner) Estimates() plan.Costs { c, _ := r.measuredCosts(); return c }

// measuredCosts replaces the initial estimates with the recent averages
// (GraphStats.Recent) once a graph has run successfully. A graph not
// measured yet keeps its initial estimate scaled by how far its closest
// measured sibling is from its own (prefill and decode stand for each
// other; the lm-head takes the mean of both), so a host much faster or
// slower than the v79 figures compares like with like.
func (r *Runner) measuredCosts() (plan.Costs, [nRoles]bool) {
	c := r.cfg.Costs
	if c == (plan.Costs{}) {
		c = plan.V79Costs
	}
	est := [nRoles]*time.Duration{&c.Prefill, &c.Decode, &c.LMHead}
	var measured [nRoles]bool
	var ratio [nRoles]float64
	for i := range nRoles {
		g := r.stats.Graphs[r.spec.key(i)]
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
func (r *Runner) GraphTotals() []inference.GraphTotal { return r.Stats().Totals(nil) }
