package threadcpu

import (
	"runtime"
	"testing"
)

// TestReadCountsOwnWork checks that the thread's CPU time grows with work
// done on it, and that the counters never go backwards.
func TestReadCountsOwnWork(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	u0, ok := Read()
	if !ok {
		if runtime.GOOS == "linux" {
			t.Fatal("thread accounting unavailable on Linux")
		}
		t.Skip("thread accounting is Linux-only")
	}
	spin(20_000_000) // ≈ 35 ms of arithmetic
	u1, _ := Read()
	d := u1.Sub(u0)
	if d.CPU <= 0 {
		t.Errorf("CPU time did not grow over a busy loop: %v", d.CPU)
	}
	if d.MinorFaults < 0 || d.VolSwitches < 0 || d.InvolSwitches < 0 || d.RunDelay < 0 {
		t.Errorf("counters went backwards: %+v", d)
	}
	t2, _ := Time()
	if t2 < u1.CPU {
		t.Errorf("Time %v before the last reading %v", t2, u1.CPU)
	}
}

// TestMinorFaultsCountFirstTouch checks that touching fresh pages is
// counted against this thread.
func TestMinorFaultsCountFirstTouch(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	u0, ok := Read()
	if !ok {
		t.Skip("thread accounting is Linux-only")
	}
	b := make([]byte, 64<<20) // the Go runtime maps fresh memory; its pages are touched below
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	u1, _ := Read()
	if d := u1.Sub(u0).MinorFaults; d < 1000 {
		t.Errorf("%d minor faults touching 16,384 fresh pages, want ≥ 1000", d)
	}
}

var sink float64

// spin does n steps of dependent arithmetic (≈ 1.8 ns each here).
func spin(n int) {
	x := sink
	for range n {
		x = x*1.0000001 + 1e-9
	}
	sink = x
}
