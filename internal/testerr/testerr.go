// Package testerr checks in tests what an error says.
package testerr

import (
	"strings"
	"testing"
)

// Mentions fails t unless err is an error whose message contains each of
// want.
func Mentions(t testing.TB, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one mentioning %q", want)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}
