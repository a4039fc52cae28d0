package plan

import (
	"testing"
	"time"
)

// TestPolicy: an unmeasured one-call option is tried first, a measured
// choice goes by cost (rows one by one priced per call, Execs and Extra
// added), and a graph left unchosen is given a call again after
// IdleStepsWarming steps while warming, IdleSteps once settled.
func TestPolicy(t *testing.T) {
	ms := time.Millisecond
	one := Option{Graphs: []string{"ar1"}}
	wide := Option{Graphs: []string{"ar128"}}
	measured := func(times map[string][]time.Duration) *Stats {
		var s Stats
		for g, ds := range times {
			for _, d := range ds {
				s.Observe(g, d, 0, false)
			}
		}
		return &s
	}
	tests := []struct {
		name  string
		stats *Stats
		opts  []Option
		want  int
	}{
		{"unmeasured one-call option first", measured(map[string][]time.Duration{"ar1": {ms}}), []Option{one, wide}, 1},
		{"unmeasured rows one by one is not explored", measured(map[string][]time.Duration{"ar128": {37 * ms}}), []Option{{Graphs: []string{"ar1"}, Calls: 4}, wide}, 1},
		{"cheapest by cost", measured(map[string][]time.Duration{"ar1": {18 * ms}, "ar128": {37 * ms}}), []Option{one, wide}, 0},
		{"rows one by one priced per row", measured(map[string][]time.Duration{"ar1": {18 * ms}, "ar128": {37 * ms}}), []Option{{Graphs: []string{"ar1"}, Calls: 3}, wide}, 1},
		{"execs and extra count: 2 × 7 + 5 > 18", measured(map[string][]time.Duration{"ar1": {18 * ms}, "ar128": {7 * ms}}), []Option{one, {Graphs: []string{"ar128"}, Execs: 2, Extra: 5 * ms}}, 0},
		{"parts add up", measured(map[string][]time.Duration{"a1": {5 * ms}, "a2": {5 * ms}, "b1": {8 * ms}}), []Option{{Graphs: []string{"a1", "a2"}}, {Graphs: []string{"b1"}}}, 1},
		{"a failed-only graph is unmeasured", func() *Stats {
			s := measured(map[string][]time.Duration{"ar1": {ms}})
			s.Observe("ar128", ms, 0, true)
			return s
		}(), []Option{one, wide}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Policy
			p.used = map[string]int64{"ar1": 1, "ar128": 1, "a1": 1, "a2": 1, "b1": 1} // none idle
			if got := p.Choose(tt.stats, tt.opts); got != tt.want {
				t.Errorf("Choose = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestPolicyRemeasures: a graph whose one measured call was slow (cold
// caches) is given a call again after IdleStepsWarming steps, and once its
// real cost is in, chosen; a settled graph left unchosen is re-measured
// after IdleSteps steps, its estimate starting again from the new call.
func TestPolicyRemeasures(t *testing.T) {
	ms := time.Millisecond
	var s Stats
	s.Observe("ar1", 18*ms, 0, false)
	s.Observe("ar128", 600*ms, 0, false) // a slow first call
	opts := []Option{{Graphs: []string{"ar1"}, Calls: 2}, {Graphs: []string{"ar128"}}}
	var p Policy
	run := func(want string, steps int) {
		t.Helper()
		for i := range steps {
			got := opts[p.Choose(&s, opts)].Graphs[0]
			if got != want {
				t.Fatalf("step %d: chose %s, want %s", i, got, want)
			}
			if got == "ar128" {
				s.Observe("ar128", 30*ms, 0, false) // its real cost, below two AR-1 calls
			}
		}
	}
	p.used = map[string]int64{"ar1": 0, "ar128": 0}
	p.steps = 0
	run("ar1", IdleStepsWarming) // priced at 600 ms: rows one by one
	run("ar128", 8)              // re-measured at 30 ms: chosen from then on
	if r := s.Graphs["ar128"].Recent; r != 30*ms {
		t.Fatalf("ar128's estimate %v, want 30ms", r)
	}
	// Settled at 30 ms; now AR-1 is cheaper per row: AR-128 goes unchosen
	// until IdleSteps steps pass, then gets one call.
	s.Observe("ar1", 5*ms, 0, false)
	s.Graphs["ar1"] = GraphStats{Calls: 10, Recent: 5 * ms}
	before := s.Graphs["ar128"].Calls
	run("ar1", IdleSteps)
	if got := opts[p.Choose(&s, opts)].Graphs[0]; got != "ar128" || !s.Graphs["ar128"].Stale || s.Graphs["ar128"].Calls != before {
		t.Fatalf("after %d idle steps: chose %s (stale %v), want a re-measure of ar128", IdleSteps, got, s.Graphs["ar128"].Stale)
	}
}
