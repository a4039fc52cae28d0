package plan

import (
	"testing"
	"time"
)

func TestGraphStatsRecent(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name  string
		calls []time.Duration // a negative duration is a failed call of that length, 0 marks the stats stale
		want  GraphStats
	}{
		{"seeded with the first call", []time.Duration{5 * ms}, GraphStats{Calls: 1, Time: 5 * ms, Recent: 5 * ms}},
		{"a slow first call does not stick: the smallest of the first calls", []time.Duration{600 * ms, 10 * ms, 12 * ms}, GraphStats{Calls: 3, Time: 622 * ms, Recent: 10 * ms}},
		{"then weight 0.2", []time.Duration{10 * ms, 10 * ms, 10 * ms, 10 * ms, 20 * ms}, GraphStats{Calls: 5, Time: 60 * ms, Recent: 12 * ms}},
		{"failures are counted, not averaged", []time.Duration{-ms, 10 * ms, 10 * ms, 10 * ms, -50 * ms, 10 * ms, 15 * ms}, GraphStats{Calls: 7, Failed: 2, Time: 106 * ms, Recent: 11 * ms}},
		{"stale: the next call replaces it", []time.Duration{5 * ms, 5 * ms, 5 * ms, 5 * ms, 0, 600 * ms}, GraphStats{Calls: 5, Time: 620 * ms, Recent: 600 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g GraphStats
			for _, d := range tt.calls {
				if d == 0 { // a re-measure: MarkStale
					g.Stale = true
					continue
				}
				g.Observe(max(d, -d), 0, d < 0)
			}
			if g != tt.want {
				t.Errorf("stats = %+v, want %+v", g, tt.want)
			}
		})
	}
}

// TestGraphStatsWarming: a graph is warming from its first successful
// execute until its WarmExecutes-th.
func TestGraphStatsWarming(t *testing.T) {
	var g GraphStats
	for i, want := range []bool{false, true, true, true, false, false} {
		if g.Warming() != want {
			t.Errorf("after %d executes: warming %v, want %v", i, !want, want)
		}
		g.Observe(time.Millisecond, 0, false)
	}
	if f := (GraphStats{Calls: 5, Failed: 4}); !f.Warming() {
		t.Error("one success among five calls: not warming")
	}
}

func TestBoard(t *testing.T) {
	var b Board
	var s Stats
	s.Observe("decode", time.Millisecond, 0, false)
	b.Publish(s)
	got := b.Load()
	s.Observe("decode", time.Millisecond, 0, false) // the worker goes on
	if got.Graphs["decode"].Calls != 1 || b.Load().Graphs["decode"].Calls != 1 {
		t.Fatalf("published %+v, loaded again %+v: want 1 call each", got.Graphs, b.Load().Graphs)
	}
	got.Graphs["decode"] = GraphStats{Calls: 9} // a reader's copy is its own
	if b.Load().Graphs["decode"].Calls != 1 {
		t.Error("a reader changed the board")
	}
	if n := testing.AllocsPerRun(100, func() { b.Publish(s) }); n != 0 {
		t.Errorf("Publish allocates %.0f times", n)
	}
}

// TestTotalsCost: a graph's call cost is its recent time × the executes a
// call makes (shards), zero until measured.
func TestTotalsCost(t *testing.T) {
	var s Stats
	s.Observe("prefill_forward", 10*time.Millisecond, 0, false)
	s.Observe("kv_forward", 4*time.Millisecond, 0, false)
	s.Observe("lmhead", time.Millisecond, 0, true)
	shards := func(g string) int { return map[string]int{"prefill_forward": 3, "kv_forward": 3, "lmhead": 1}[g] }
	want := map[string]time.Duration{"prefill_forward": 30 * time.Millisecond, "kv_forward": 12 * time.Millisecond, "lmhead": 0}
	for _, g := range s.Totals(shards) {
		if g.Cost != want[g.Graph] {
			t.Errorf("%s: cost %v, want %v", g.Graph, g.Cost, want[g.Graph])
		}
	}
	if c := s.Totals(nil)[0].Cost; c != 4*time.Millisecond { // kv_forward, sorted first
		t.Errorf("without shards: cost %v, want 4ms", c)
	}
}

// BenchmarkGraphTotals measures what a runner's GraphTotals costs the
// engine at every step: a board of three graphs' totals, sorted.
func BenchmarkGraphTotals(b *testing.B) {
	var s Stats
	for _, g := range []string{"prefill_ar128_cl512", "decode_ar1_cl512", "lmhead"} {
		s.Observe(g, time.Millisecond, 0, false)
	}
	var board Board
	board.Publish(s)
	b.ReportAllocs()
	for b.Loop() {
		if len(board.Totals(nil)) != 3 {
			b.Fatal("want 3 graphs")
		}
	}
}
