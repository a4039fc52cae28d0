package testerr

import (
	"errors"
	"testing"
)

// recorder is a testing.TB that notes failures instead of failing.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true }

// TestMentions: an error mentioning every string passes; a missing one or
// no error at all fails.
func TestMentions(t *testing.T) {
	err := errors.New("qnn: load backend library libx.so: not found")
	for _, tc := range []struct {
		name string
		err  error
		want []string
		fail bool
	}{
		{"all", err, []string{"libx.so", "not found"}, false},
		{"one missing", err, []string{"libx.so", "denied"}, true},
		{"no error", nil, []string{"libx.so"}, true},
	} {
		r := &recorder{TB: t}
		Mentions(r, tc.err, tc.want...)
		if r.failed != tc.fail {
			t.Errorf("%s: failed %v, want %v", tc.name, r.failed, tc.fail)
		}
	}
}
