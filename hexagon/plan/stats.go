package plan

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hexserve/hexserve/inference"
)

// GraphStats counts one graph's executions (every shard's call counts).
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
	// Recent is the smallest of the first WarmExecutes successful
	// executes' times (a first call slowed by cold caches or a loaded
	// moment does not stick), then their exponentially weighted moving
	// average (weight RecentWeight); Policy's cost estimate, so its choices
	// follow latency changes instead of lifetime averages.
	Recent time.Duration
	// Stale makes the next successful execute's time replace Recent (a
	// runner re-measuring a graph it has not called for a long time).
	Stale bool
}

// RecentWeight is the weight of the newest call in GraphStats.Recent.
const RecentWeight = 0.2

// WarmExecutes is how many successful executes GraphStats.Recent takes the
// smallest of before it averages.
const WarmExecutes = 4

// Warming reports whether g has run, but fewer than WarmExecutes times
// successfully: its estimate may still be one slow call's, so a runner
// that stopped choosing the graph gives it a call again sooner.
func (g GraphStats) Warming() bool {
	n := g.Calls - g.Failed
	return n > 0 && n < WarmExecutes
}

// Observe records one execute of d taking cpu of the calling thread.
func (g *GraphStats) Observe(d, cpu time.Duration, failed bool) {
	g.Calls++
	g.Time += d
	g.CPU += cpu
	if failed {
		g.Failed++
		return
	}
	switch n := g.Calls - g.Failed; {
	case n == 1 || g.Stale:
		g.Recent, g.Stale = d, false
	case n <= WarmExecutes:
		g.Recent = min(g.Recent, d)
	default:
		g.Recent += time.Duration(RecentWeight * float64(d-g.Recent))
	}
}

// Mean is the average time per call.
func (g GraphStats) Mean() time.Duration {
	if g.Calls == 0 {
		return 0
	}
	return g.Time / time.Duration(g.Calls)
}

// Stats are a runner's cumulative counters: graph executions by graph name,
// and host-side time split by what it does, each measured with time.Now
// around the work.
type Stats struct {
	Graphs    map[string]GraphStats
	Embed     time.Duration // graph inputs from ids: embedding rows (QHexRT) or token ids and positions (.pte)
	Rope      time.Duration // cos/sin rows
	Mask      time.Duration // mask updates
	KVCopy    time.Duration // new K/V entries → cache slots
	Convert   time.Duration // hidden state → lm-head input
	Restride  time.Duration // cache re-striding between graphs of different windows
	Restrides int64
	Reloads   int64 // context reloads after device restarts
	KVMoves   int64 // sequences moved within a slot pool to grow (.pte)
}

// MarkStale sets graph's Stale (see GraphStats.Stale).
func (s *Stats) MarkStale(graph string) {
	if g, ok := s.Graphs[graph]; ok {
		g.Stale = true
		s.Graphs[graph] = g
	}
}

// Observe records one execute of graph.
func (s *Stats) Observe(graph string, d, cpu time.Duration, failed bool) {
	if s.Graphs == nil {
		s.Graphs = map[string]GraphStats{}
	}
	g := s.Graphs[graph]
	g.Observe(d, cpu, failed)
	s.Graphs[graph] = g
}

// Host is the total host-side time.
func (s Stats) Host() time.Duration {
	return s.Embed + s.Rope + s.Mask + s.KVCopy + s.Convert + s.Restride
}

// Clone is a deep copy.
func (s Stats) Clone() Stats {
	s.Graphs = maps.Clone(s.Graphs)
	return s
}

// Totals lists the graphs' counts and times, by name, with Recent × the
// graph's executes per call (shards(name); nil: one) as the call's cost
// (the engine exports them as metrics through inference.GraphTimer).
func (s Stats) Totals(shards func(graph string) int) []inference.GraphTotal {
	names := make([]string, 0, len(s.Graphs))
	for name := range s.Graphs {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]inference.GraphTotal, 0, len(names))
	for _, name := range names {
		g := s.Graphs[name]
		n := 1
		if shards != nil {
			n = shards(name)
		}
		out = append(out, inference.GraphTotal{Graph: name, Calls: g.Calls, Time: g.Time, Cost: g.Recent * time.Duration(n)})
	}
	return out
}

// Board publishes a worker's Stats to other goroutines.
type Board struct {
	mu sync.Mutex
	s  Stats
}

// Publish makes a copy of s visible to Load. It reuses the board's map, so
// a worker publishing after every call does not allocate.
func (b *Board) Publish(s Stats) {
	b.mu.Lock()
	g := b.s.Graphs
	if g == nil {
		g = make(map[string]GraphStats, len(s.Graphs))
	}
	for k := range g {
		if _, ok := s.Graphs[k]; !ok {
			delete(g, k)
		}
	}
	for k, v := range s.Graphs {
		g[k] = v
	}
	b.s, b.s.Graphs = s, g
	b.mu.Unlock()
}

// Totals is Load().Totals(shards) without copying the graphs: what a
// runner's GraphTotals returns, which the engine reads at every step.
func (b *Board) Totals(shards func(graph string) int) []inference.GraphTotal {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.s.Totals(shards)
}

// Load returns the last published Stats.
func (b *Board) Load() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.s.Clone()
}
