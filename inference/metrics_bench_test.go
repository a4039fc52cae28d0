package inference

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// growingGraphs is a GraphTimer of three graphs, each called once more per
// GraphTotals, as a runner's are per decode step.
type growingGraphs struct{ tot []GraphTotal }

func (g *growingGraphs) GraphTotals() []GraphTotal {
	for i := range g.tot {
		g.tot[i].Calls++
		g.tot[i].Time += time.Millisecond
	}
	return g.tot
}

// BenchmarkObserveGraphs measures the engine's per-step export of a
// runner's graph counters as metrics (one op: one step).
func BenchmarkObserveGraphs(b *testing.B) {
	m := newMetrics(prometheus.NewRegistry())
	g := &growingGraphs{tot: []GraphTotal{{Graph: "decode_ar1_cl512"}, {Graph: "lmhead"}, {Graph: "prefill_ar128_cl512", Cost: time.Millisecond}}}
	var model struct {
		Model
		*growingGraphs
	}
	model.growingGraphs = g
	for b.Loop() {
		m.observeGraphs(model)
	}
}
