package qhexrt

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/internal/threadcpu"
)

// TestPlanFollowsLatency: after many fast decode steps, decode becomes slow
// (an emulated latency switched on): within a few calls the planner's
// estimate follows and a prompt goes back to a prefill window, where a
// lifetime average would still choose decode steps.
func TestPlanFollowsLatency(t *testing.T) {
	ms := time.Millisecond
	r := &Runner{cfg: Config{Costs: plan.V79Costs},
		spec: &spec{graphs: [nRoles]graphRef{{"p.bin", "prefill"}, {"d.bin", "decode"}, {"d.bin", "lm_head"}}}}
	r.plan = plan.Planner{Chunked: true, Window: 16}
	calls := func(n int) (prefills, decodes int) {
		var m [nRoles]bool
		r.plan.Costs, m = r.measuredCosts()
		r.plan.DecodeMeasured = m[roleDecode]
		r.plan.Each(n, r.plan.From(n, 0), func(s plan.Step) {
			if s.Prefill {
				prefills++
			} else {
				decodes++
			}
		})
		return
	}
	observe := func(role int, d time.Duration) { r.stats.Observe(r.spec.key(role), d, 0, false) }
	observe(roleLMHead, ms/10)
	observe(rolePrefill, 20*ms)
	for range 200 {
		observe(roleDecode, ms/10)
	}
	if p, d := calls(16); p != 0 || d != 16 {
		t.Fatalf("fast decode: %d prefill windows and %d decode steps, want 16 decode steps", p, d)
	}
	steps := 0
	for {
		observe(roleDecode, 5*ms)
		steps++
		if p, d := calls(16); p == 1 && d == 0 {
			break
		}
		if steps > 20 {
			t.Fatalf("after %d slow decode steps the plan still decodes (estimate %v)", steps, r.Estimates().Decode)
		}
	}
	dec := r.stats.Graphs["decode"]
	t.Logf("plan switched to prefill after %d slow decode steps (recent %v, lifetime mean %v)", steps, dec.Recent, dec.Mean())
	if 16*dec.Mean() > 20*ms {
		t.Errorf("the lifetime mean %v would have switched too: the test shows nothing", dec.Mean())
	}
}

// TestGraphCPU: on a thread-locked caller, the CPU time recorded inside
// graph executes is positive (hostsim computes on the calling thread too)
// and within the thread's CPU time over the whole Eval.
func TestGraphCPU(t *testing.T) {
	if _, ok := threadcpu.Time(); !ok {
		t.Skip("no thread CPU clock on " + runtime.GOOS)
	}
	cfg := hostsimConfig(t)
	dir := tinyBundle(t, f32(simfile.QHexRT, 16, simfile.MaskAdditive))
	r, err := Open(Config{Bundle: dir, QNN: cfg, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	seq := loadGolden(t).get(t, "cross128").PromptIDs[:20]
	c0, _ := threadcpu.Time()
	if _, _, err := evalOn(r).Eval(context.Background(), seq, 0); err != nil {
		t.Fatal(err)
	}
	c1, _ := threadcpu.Time()
	var graph time.Duration
	for _, g := range r.Stats().Graphs {
		if g.Calls > 0 && g.CPU <= 0 {
			t.Errorf("%d calls with no CPU time recorded: %+v", g.Calls, g)
		}
		graph += g.CPU
	}
	if graph <= 0 || graph > c1-c0 {
		t.Errorf("graph CPU %v, thread CPU over the Eval %v: want 0 < graph ≤ Eval", graph, c1-c0)
	}
}
