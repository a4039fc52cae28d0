package qhexrt

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/internal/threadcpu"
)

// TestGraphCPU: with TimeThreadCPU, on a thread-locked caller, the CPU
// time recorded inside graph executes is positive (hostsim computes on the
// calling thread too) and within the thread's CPU time over the whole Eval;
// without, none is recorded (the clock is not read).
func TestGraphCPU(t *testing.T) {
	if _, ok := threadcpu.Time(); !ok {
		t.Skip("no thread CPU clock on " + runtime.GOOS)
	}
	cfg := hostsimConfig(t)
	dir := tinyBundle(t, f32(simfile.QHexRT, 16, simfile.MaskAdditive))
	seq := loadGolden(t).get(t, "cross128").PromptIDs[:20]
	for _, on := range []bool{true, false} {
		r, err := Open(Config{Bundle: dir, QNN: cfg, Logger: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		if on {
			r.TimeThreadCPU()
		}
		runtime.LockOSThread()
		c0, _ := threadcpu.Time()
		if _, _, err := evalOn(r).Eval(context.Background(), seq, 0); err != nil {
			t.Fatal(err)
		}
		c1, _ := threadcpu.Time()
		runtime.UnlockOSThread()
		var graph time.Duration
		calls := int64(0)
		for _, g := range r.Stats().Graphs {
			if on && g.Calls > 0 && g.CPU <= 0 {
				t.Errorf("%d calls with no CPU time recorded: %+v", g.Calls, g)
			}
			graph += g.CPU
			calls += g.Calls
		}
		r.Close()
		switch {
		case calls == 0:
			t.Errorf("thread CPU %v: no graph calls recorded", on)
		case !on && graph != 0:
			t.Errorf("graph CPU %v without TimeThreadCPU; want 0", graph)
		case on && (graph <= 0 || graph > c1-c0):
			t.Errorf("graph CPU %v, thread CPU over the Eval %v: want 0 < graph ≤ Eval", graph, c1-c0)
		}
	}
}
