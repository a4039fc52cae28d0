package plan

import "time"

// Option is one way to run a step: Calls calls, each executing every graph
// of Graphs (a Genie AR's parts; one name for a .pte method or a QHexRT
// graph) Execs times (a .pte method's shards), plus Extra host work (a
// re-striding of the cache).
type Option struct {
	Graphs []string
	Execs  int // executes of each graph per call; 0: 1
	Calls  int // calls the step makes (rows one by one: the rows); 0: 1
	Extra  time.Duration
}

func (o Option) calls() int { return max(o.Calls, 1) }

// Cost is o's cost from the graphs' measured estimates (GraphStats.Recent);
// ok is false while one of its graphs has no successful execute.
func (s *Stats) Cost(o Option) (d time.Duration, ok bool) {
	for _, name := range o.Graphs {
		g := s.Graphs[name]
		if g.Calls <= g.Failed {
			return 0, false
		}
		d += g.Recent * time.Duration(max(o.Execs, 1))
	}
	return d*time.Duration(o.calls()) + o.Extra, true
}

// IdleSteps is how many steps a graph may go unchosen before a step that
// can run it in one call gives it that call again, so that a cost measured
// once (a slow first call, a loaded moment) does not keep it unused: its
// estimate is only renewed by calls.
const IdleSteps = 32

// IdleStepsWarming is IdleSteps for a graph whose estimate is still warming
// (GraphStats.Warming): a slow first call, such as the first after a build
// with cold caches, would otherwise keep the graph unused for IdleSteps
// steps (a bench run after a build once stayed on one-row calls).
const IdleStepsWarming = 4

// Policy is the one graph-choice rule of the runners: it chooses among a
// step's candidate calls (one multi-row call, rows one by one, which AR's
// graphs) by measured cost, and explores: an option of one call whose graph
// has no measured execute, or has gone unchosen for IdleSteps steps
// (IdleStepsWarming while warming), is taken first, in the runner's order,
// so that every graph gets measured and re-measured. A re-measured graph's
// estimate starts again from its new calls (Stats.MarkStale), and while
// fewer than WarmExecutes calls are in it, it is the lowest of them, so one
// slow call does not steer the choice. The zero Policy is ready.
type Policy struct {
	steps int64
	used  map[string]int64 // the step each graph was last chosen in
}

// Choose returns the index of the option to run among opts (at least one,
// in the order exploration tries them: the cheapest expected first), and
// records its graphs as used.
func (p *Policy) Choose(s *Stats, opts []Option) int {
	p.steps++
	i := p.explore(s, opts)
	if i < 0 {
		i = p.cheapest(s, opts)
	}
	if p.used == nil {
		p.used = map[string]int64{}
	}
	for _, name := range opts[i].Graphs {
		p.used[name] = p.steps
	}
	return i
}

// Best is the option Choose would take by cost alone, without exploring
// (for a runner's StepCost).
func (p *Policy) Best(s *Stats, opts []Option) int { return p.cheapest(s, opts) }

// explore is the first one-call option with an unmeasured or idle graph
// (marking an idle one stale), or -1.
func (p *Policy) explore(s *Stats, opts []Option) int {
	for i, o := range opts {
		if o.calls() != 1 {
			continue
		}
		found := false
		for _, name := range o.Graphs {
			g := s.Graphs[name]
			if g.Calls <= g.Failed {
				return i
			}
			idle := int64(IdleSteps)
			if g.Warming() {
				idle = IdleStepsWarming
			}
			if p.steps-p.used[name] > idle {
				if !g.Warming() {
					s.MarkStale(name)
				}
				found = true
			}
		}
		if found {
			return i
		}
	}
	return -1
}

// cheapest is the measured option of least cost (the first of equals), or
// the first option when none is measured.
func (p *Policy) cheapest(s *Stats, opts []Option) int {
	best, bestCost := 0, time.Duration(-1)
	for i, o := range opts {
		if c, ok := s.Cost(o); ok && (bestCost < 0 || c < bestCost) {
			best, bestCost = i, c
		}
	}
	return best
}
