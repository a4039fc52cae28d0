package threadcpu

import (
	"bytes"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

const (
	clockThreadCPUTimeID = 3 // CLOCK_THREAD_CPUTIME_ID
	rusageThread         = 1 // RUSAGE_THREAD
)

// Time is the calling thread's CPU time, and whether the clock is available.
// It costs one system call (no vDSO for this clock).
func Time() (time.Duration, bool) {
	var ts syscall.Timespec
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

// Read returns the calling thread's accounting, and whether it is
// available. RunDelay is zero when the kernel has no schedstat.
func Read() (Usage, bool) {
	var u Usage
	var ok bool
	if u.CPU, ok = Time(); !ok {
		return u, false
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return u, false
	}
	u.MinorFaults, u.VolSwitches, u.InvolSwitches = ru.Minflt, ru.Nvcsw, ru.Nivcsw
	u.RunDelay = runDelay()
	return u, true
}

// runDelay is the second field of /proc/thread-self/schedstat: ns spent
// on a run queue.
func runDelay() time.Duration {
	fd, err := syscall.Open("/proc/thread-self/schedstat", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer syscall.Close(fd)
	var buf [96]byte
	n, err := syscall.Read(fd, buf[:])
	if err != nil || n <= 0 {
		return 0
	}
	f := bytes.Fields(buf[:n])
	if len(f) < 2 {
		return 0
	}
	v, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0
	}
	return time.Duration(v)
}
