package bench

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/hexserve/hexserve/inference"

	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/internal/threadcpu"
)

// burnModel spends CPU inside Step as a graph call would and reports that
// call's thread CPU time, as the hexagon runner does.
type burnModel struct {
	onePool
	c     Counters
	tids  []int
	graph int // loop iterations per Step
}

func (m *burnModel) Info() inference.ModelInfo {
	return inference.ModelInfo{VocabSize: 4, ContextLen: 64}
}
func (m *burnModel) Close() error       { return nil }
func (m *burnModel) Counters() Counters { return m.c }

func (m *burnModel) Step(_ context.Context, runs []inference.Run) ([]inference.Rows, error) {
	m.tids = append(m.tids, syscall.Gettid())
	c0, _ := threadcpu.Time()
	t0 := time.Now()
	burn(m.graph)
	m.c.Graph += time.Since(t0)
	c1, _ := threadcpu.Time()
	m.c.GraphCPU += c1 - c0
	l := sample.Logits{Type: sample.F32, F32: make([]float32, 4)}
	return []inference.Rows{sameRows{l: l, n: len(runs[0].Tokens)}}, nil
}

var sink float64

func burn(n int) {
	x := 1.0
	for range n {
		x = x*1.0000001 + 1e-9
	}
	sink += x
}

// TestRecorderThread checks that the recorder keeps the calling goroutine
// on one thread across Evals (the goroutine yields and sleeps between them)
// and that a step's thread CPU time holds the work between Evals, not the
// graph calls'.
func TestRecorderThread(t *testing.T) {
	if _, ok := threadcpu.Time(); !ok {
		t.Skip("no thread CPU clock on " + runtime.GOOS)
	}
	m := &burnModel{onePool: onePool{64}, graph: 20_000_000}
	rec := &recorder{Model: m, counters: m.Counters, thread: true}
	var hostCPU []time.Duration
	done := make(chan struct{})
	go func() { // as the engine's worker, which ends after its request
		defer close(done)
		for i := range 3 {
			if _, err := rec.Step(context.Background(), []inference.Run{{Seq: 1, Start: i, Tokens: []int32{0}}}); err != nil {
				t.Error(err)
			}
			c0, _ := threadcpu.Time()
			burn(2_000_000)
			c1, _ := threadcpu.Time()
			hostCPU = append(hostCPU, c1-c0)
			runtime.Gosched()
			time.Sleep(time.Millisecond)
		}
	}()
	<-done
	recs := rec.take()
	if rec.locked {
		t.Error("take should forget the lock of the ended worker")
	}
	if len(m.tids) != 3 || m.tids[0] != m.tids[1] || m.tids[1] != m.tids[2] {
		t.Errorf("Evals ran on threads %v, want one", m.tids)
	}
	steps := decodeSteps(recs)
	if len(steps) != 1 || !steps[0].cpuOK {
		t.Fatalf("steps %+v", steps)
	}
	s := steps[0]
	// The step (Eval 1's start to Eval 2's) holds Eval 1's graph call and the burn after it.
	if s.cpu < hostCPU[1] || s.cpu >= hostCPU[1]+s.io.GraphCPU {
		t.Errorf("step CPU %v: want at least the %v burnt between Evals and less than that plus the graph call's %v",
			s.cpu, hostCPU[1], s.io.GraphCPU)
	}
	if s.outsideCPU < hostCPU[1] || s.ioCPU >= hostCPU[1] {
		t.Errorf("split %v inside Eval, %v after: the %v burnt after Eval belongs after", s.ioCPU, s.outsideCPU, hostCPU[1])
	}
}
