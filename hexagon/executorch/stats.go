package executorch

import (
	"sort"
	"time"

	"github.com/hexserve/hexserve/inference"
)

// GraphStats counts one graph's executions (every shard's call counts).
type GraphStats struct {
	Calls  int64
	Failed int64
	Time   time.Duration // wall time inside Execute
	// CPU is the calling thread's CPU time inside Execute (Linux), exact
	// when the caller's goroutine is locked to its OS thread (bench locks it).
	CPU time.Duration
}

// Mean is the average time per call.
func (g GraphStats) Mean() time.Duration {
	if g.Calls == 0 {
		return 0
	}
	return g.Time / time.Duration(g.Calls)
}

// Stats are a Runner's cumulative counters.
type Stats struct {
	Graphs    map[string]GraphStats // by graph name (prefill_forward, kv_forward)
	Host      time.Duration         // tokens, positions and mask before the calls
	KVCopy    time.Duration         // new entries → cache slots
	Restride  time.Duration         // cache re-striding between the graphs
	Restrides int64
	Reloads   int64
}

func (s *Stats) observe(graph string, d, cpu time.Duration, failed bool) {
	if s.Graphs == nil {
		s.Graphs = map[string]GraphStats{}
	}
	g := s.Graphs[graph]
	g.Calls++
	g.Time += d
	g.CPU += cpu
	if failed {
		g.Failed++
	}
	s.Graphs[graph] = g
}

func (s Stats) clone() Stats {
	c := s
	c.Graphs = make(map[string]GraphStats, len(s.Graphs))
	for k, v := range s.Graphs {
		c.Graphs[k] = v
	}
	return c
}

// Stats returns the counters as of the end of the last call; safe from any
// goroutine.
func (r *Runner) Stats() Stats {
	r.pubMu.Lock()
	defer r.pubMu.Unlock()
	return r.pub.clone()
}

func (r *Runner) publish() {
	c := r.stats.clone()
	r.pubMu.Lock()
	r.pub = c
	r.pubMu.Unlock()
}

// GraphTotals implements inference.GraphTimer.
func (r *Runner) GraphTotals() []inference.GraphTotal {
	s := r.Stats()
	var out []inference.GraphTotal
	for name, g := range s.Graphs {
		out = append(out, inference.GraphTotal{Graph: name, Calls: g.Calls, Time: g.Time})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Graph < out[j].Graph })
	return out
}
