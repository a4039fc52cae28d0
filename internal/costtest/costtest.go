// Package costtest measures what a piece of work costs the process, for the
// tests that bound a request's cost: CPU time (user + system, all threads:
// on a loaded machine it leaves out the time spent waiting for a core) and
// the bytes allocated (runtime.MemStats.TotalAlloc, which bounds the heap's
// growth from above whatever the GC does meanwhile); it also builds issue
// #32's hostile inputs (hostile.go).
package costtest

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// Cost is what Measure saw.
type Cost struct {
	CPU   time.Duration // 0 where the platform does not tell
	Alloc uint64        // bytes allocated
	Wall  time.Duration
}

func (c Cost) String() string {
	return fmt.Sprintf("%v CPU, %.1f MB allocated, %v wall", c.CPU.Round(time.Millisecond), float64(c.Alloc)/1e6, c.Wall.Round(time.Millisecond))
}

// Measure runs f and returns its cost; other goroutines' work during f
// counts too, so callers run nothing else meanwhile.
func Measure(f func()) Cost {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	c0 := cpuTime()
	t0 := time.Now()
	f()
	wall := time.Since(t0)
	c1 := cpuTime()
	runtime.ReadMemStats(&m1)
	return Cost{CPU: c1 - c0, Alloc: m1.TotalAlloc - m0.TotalAlloc, Wall: wall}
}

// Within fails t when c passes cpu or alloc, and logs c. Under the race
// detector the CPU bound is ten times larger.
func Within(t testing.TB, what string, c Cost, cpu time.Duration, alloc uint64) {
	t.Helper()
	t.Logf("%s: %v", what, c)
	cpu *= raceSlowdown
	if c.CPU > cpu {
		t.Errorf("%s took %v of CPU, want ≤ %v", what, c.CPU, cpu)
	}
	if c.Alloc > alloc {
		t.Errorf("%s allocated %.1f MB, want ≤ %.1f MB", what, float64(c.Alloc)/1e6, float64(alloc)/1e6)
	}
}

// SkipNumericUnderRace skips t when the race detector is on: a test whose
// time goes into numeric work on one goroutine (writing test models,
// float64 references) gains nothing from it at 5–10× the cost. make test's
// full pass runs it without -race, so call it only from packages whose
// tests call testing.Short() (the Makefile's SHORT_PKGS).
func SkipNumericUnderRace(t testing.TB, what string) {
	t.Helper()
	if Race {
		t.Skipf("%s: numeric work on one goroutine; the pass without -race runs it", what)
	}
}
