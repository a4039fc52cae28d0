// Package threadcpu reads the calling OS thread's own accounting: its CPU
// time, and what the scheduler and the kernel did to it (context switches,
// page faults, time waiting for a core). Callers lock the goroutine to its
// thread (runtime.LockOSThread) for as long as readings are compared.
// Only Linux provides them; elsewhere every reading reports false.
package threadcpu

import "time"

// Usage is a thread's cumulative accounting.
type Usage struct {
	CPU           time.Duration // CPU time (user + system), CLOCK_THREAD_CPUTIME_ID
	MinorFaults   int64         // page faults served without I/O (first touch, copy-on-write)
	VolSwitches   int64         // context switches the thread asked for (blocking)
	InvolSwitches int64         // preemptions
	RunDelay      time.Duration // time runnable but waiting for a core (/proc/thread-self/schedstat)
}

// Sub is u − o.
func (u Usage) Sub(o Usage) Usage {
	return Usage{u.CPU - o.CPU, u.MinorFaults - o.MinorFaults, u.VolSwitches - o.VolSwitches,
		u.InvolSwitches - o.InvolSwitches, u.RunDelay - o.RunDelay}
}
