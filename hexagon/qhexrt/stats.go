package qhexrt

import (
	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/inference"
)

// Stats returns the cumulative counters (graphs by name) as of the end of
// the last Step. It may be called from any goroutine, also while a Step
// runs.
func (r *Runner) Stats() plan.Stats { return r.board.Load() }

// TimeThreadCPU makes the runner read the calling thread's CPU time around
// each graph call, into Stats (GraphStats.CPU); call it before the first
// Step. Off by default: two system calls per graph call.
func (r *Runner) TimeThreadCPU() { r.life.ThreadCPU = true }

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

// GraphTotals implements inference.GraphTimer, so the engine exports the
// runner's per-graph execution counts and times as metrics.
func (r *Runner) GraphTotals() []inference.GraphTotal { return r.board.Totals(nil) }
