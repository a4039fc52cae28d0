package executorch

import (
	"testing"
	"time"

	"github.com/hexserve/hexserve/hexagon/plan"
)

// TestPlanner: the shared planner with the .pte's limits and measured costs.
func TestPlanner(t *testing.T) {
	ms := time.Millisecond
	const cl, ar = 64, 16
	measured := func(pre, dec time.Duration) map[string]plan.GraphStats {
		return map[string]plan.GraphStats{"prefill_forward": {Calls: 3, Recent: pre}, "kv_forward": {Calls: 3, Recent: dec}}
	}
	tests := []struct {
		name         string
		graphs       map[string]plan.GraphStats
		restride     time.Duration // mean per switch
		decodeLayout bool          // the caches are in kv_forward's layout
		n, from      int
		want         []plan.Step
	}{
		{"unmeasured: a run of 2+ is a prefill window", nil, 0, false, 13, 10, []plan.Step{{Prefill: true, Start: 10, N: 3}}},
		{"unmeasured: one token decodes", nil, 0, false, 11, 10, []plan.Step{{Start: 10, N: 1}}},
		{"windows end by CL − AR", nil, 0, false, 52, 40, []plan.Step{{Prefill: true, Start: 40, N: 8}, {Start: 48, N: 1}, {Start: 49, N: 1}, {Start: 50, N: 1}, {Start: 51, N: 1}}},
		{"cheap decode wins a short run", measured(100*ms, 10*ms), 0, false, 13, 10, []plan.Step{{Start: 10, N: 1}, {Start: 11, N: 1}, {Start: 12, N: 1}}},
		{"prefill wins a long run, decode its short tail", measured(100*ms, 10*ms), 0, false, 30, 10, []plan.Step{{Prefill: true, Start: 10, N: 16},
			{Start: 26, N: 1}, {Start: 27, N: 1}, {Start: 28, N: 1}, {Start: 29, N: 1}}},
		{"re-striding counts against prefill", measured(100*ms, 10*ms), 50 * ms, true, 22, 10, []plan.Step{
			{Start: 10, N: 1}, {Start: 11, N: 1}, {Start: 12, N: 1}, {Start: 13, N: 1}, {Start: 14, N: 1}, {Start: 15, N: 1},
			{Start: 16, N: 1}, {Start: 17, N: 1}, {Start: 18, N: 1}, {Start: 19, N: 1}, {Start: 20, N: 1}, {Start: 21, N: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Runner{cl: cl, stride: cl - ar,
				pre: &method{layout: &layout{method: "prefill_forward", ar: ar, cl: cl}, shards: 1},
				dec: &method{layout: &layout{method: "kv_forward", ar: 1, cl: cl}, shards: 1}}
			r.stats.Graphs = tt.graphs
			if tt.restride > 0 {
				r.stats.Restrides, r.stats.Restride = 2, 2*tt.restride
			}
			if tt.decodeLayout {
				r.stride = cl - 1
			}
			p := r.planner()
			var got []plan.Step
			p.Each(tt.n, tt.from, func(s plan.Step) { got = append(got, s) })
			if len(got) != len(tt.want) {
				t.Fatalf("steps %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("steps %v, want %v", got, tt.want)
				}
			}
		})
	}
}
