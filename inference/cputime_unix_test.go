//go:build unix

package inference

import (
	"syscall"
	"time"
)

// cpuTime is the process's user + system CPU time (0, false where unknown).
// On a loaded machine it leaves out the time the benchmark waits for a CPU.
func cpuTime() (time.Duration, bool) {
	var u syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
		return 0, false
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano()), true
}
