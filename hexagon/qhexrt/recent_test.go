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
