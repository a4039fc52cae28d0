//go:build !unix

package inference

import "time"

func cpuTime() (time.Duration, bool) { return 0, false }
