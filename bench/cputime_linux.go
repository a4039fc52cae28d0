package bench

import (
	"syscall"
	"unsafe"
)

// threadCPU returns the calling thread's CPU time in ns (the caller locks
// the goroutine to its thread), and whether the clock is available.
func threadCPU() (int64, bool) {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0, false
	}
	return ts.Nano(), true
}
