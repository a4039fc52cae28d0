// Package testwait waits in tests for what a goroutine sends, within a time
// limit.
package testwait

import (
	"testing"
	"time"
)

// Recv returns the next value from ch. If none comes within d it fails t,
// saying what it waited for.
func Recv[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: nothing within %v", what, d)
		panic("unreachable") // Fatalf does not return
	}
}
