package threadcpu

import (
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// BenchmarkCallReturn measures what coming back from a blocking call costs
// the calling thread, as a graph call's return costs a runner's: the
// thread's CPU time (cpu-µs/call) over a nanosleep system call, which uses
// no CPU of its own, and then the same fixed work (≈ 0.18 ms here) each time, on a
// thread locked as bench's engine thread is. A call past ≈ 10 ms loses its
// P to sysmon; coming back, the thread takes an idle P and wakes sysmon from
// its deep sleep, and sysmon then preempts the goroutine (it has run on that
// P's time slice since before the call), which reschedules it. The
// difference between the short and the long call is that cost
// (docs/performance.md, "Coming back from a long graph call").
func BenchmarkCallReturn(b *testing.B) {
	for _, d := range []time.Duration{time.Millisecond, 150 * time.Millisecond} {
		b.Run(d.String(), func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if _, ok := Time(); !ok {
				b.Skip("no thread CPU clock")
			}
			var cpu time.Duration
			for b.Loop() {
				c0, _ := Time()
				ts := syscall.NsecToTimespec(int64(d))
				syscall.Syscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
				spin(100_000)
				c1, _ := Time()
				cpu += c1 - c0
			}
			b.ReportMetric(float64(cpu)/1e3/float64(b.N), "cpu-µs/call")
		})
	}
}
