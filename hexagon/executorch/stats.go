package executorch

import (
	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/inference"
)

// Stats returns the counters (graphs by name: prefill_forward, kv_forward;
// every shard's call counts) as of the end of the last call; safe from any
// goroutine.
func (r *Runner) Stats() plan.Stats { return r.board.Load() }

func (r *Runner) publish() { r.board.Publish(r.stats) }

// GraphTotals implements inference.GraphTimer.
func (r *Runner) GraphTotals() []inference.GraphTotal { return r.Stats().Totals() }
