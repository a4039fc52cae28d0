//go:build !linux

package threadcpu

import "time"

// Time is unavailable off Linux.
func Time() (time.Duration, bool) { return 0, false }

// Read is unavailable off Linux.
func Read() (Usage, bool) { return Usage{}, false }
