package executorch

import (
	"time"

	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/inference"
)

// Stats returns the counters (graphs by name: prefill_forward, kv_forward;
// every shard's call counts) as of the end of the last call; safe from any
// goroutine.
func (r *Runner) Stats() plan.Stats { return r.board.Load() }

// TimeThreadCPU makes the runner read the calling thread's CPU time around
// each graph call, into Stats (GraphStats.CPU); call it before the first
// Step. Off by default: two system calls per graph call.
func (r *Runner) TimeThreadCPU() { r.life.ThreadCPU = true }

func (r *Runner) publish() { r.board.Publish(r.stats) }

// GraphTotals implements inference.GraphTimer: a call's cost is the recent
// per-shard time × the shards a step runs (what StepCost weighs).
func (r *Runner) GraphTotals() []inference.GraphTotal {
	return r.board.Totals(func(graph string) int {
		if graph == r.dec.method {
			return r.dec.shards
		}
		return r.pre.shards
	})
}

// BackgroundKVCopy is the copy workers' cumulative time copying new K/V
// entries off the critical path, while a later shard's graph call or the
// caller's own work (sampling) runs. Stats().KVCopy is the critical path's
// share: queuing the copies, and waiting for them or running them at the
// next call. Safe from any goroutine.
func (r *Runner) BackgroundKVCopy() time.Duration { return r.kc.OffPath() }
