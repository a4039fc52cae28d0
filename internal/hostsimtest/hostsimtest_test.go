package hostsimtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// recorder is a testing.TB whose Skipf and Fatalf record the outcome and
// stop the helper.
type recorder struct {
	testing.TB
	outcome string
}

type stop struct{}

func (r *recorder) Helper() {}

func (r *recorder) Skipf(format string, args ...any) {
	r.outcome = "skip: " + fmt.Sprintf(format, args...)
	panic(stop{})
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.outcome = "fail: " + fmt.Sprintf(format, args...)
	panic(stop{})
}

func (r *recorder) Fatal(args ...any) { r.Fatalf("%v", fmt.Sprint(args...)) }

func run(t *testing.T) (dir, outcome string) {
	r := &recorder{TB: t}
	func() {
		defer func() {
			if v := recover(); v != nil && v != (stop{}) {
				panic(v)
			}
		}()
		dir = Dir(r)
	}()
	return dir, r.outcome
}

func TestDir(t *testing.T) {
	full := t.TempDir()
	for _, lib := range Libraries {
		if err := os.WriteFile(filepath.Join(full, lib), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	partial := t.TempDir()
	if err := os.WriteFile(filepath.Join(partial, Libraries[0]), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir, ci, want string
	}{
		{full, "", "ok"}, {full, "true", "ok"},
		{partial, "", "skip"}, {partial, "true", "fail"}, {partial, "false", "skip"},
	} {
		t.Setenv("HEXSERVE_HOSTSIM_DIR", c.dir)
		t.Setenv("CI", c.ci)
		dir, outcome := run(t)
		got := "ok"
		if outcome != "" {
			got = outcome[:4]
		}
		if got != c.want || (got == "ok" && dir != c.dir) {
			t.Errorf("dir %s, CI=%q: got %q (%s) dir %q, want %s", c.dir, c.ci, got, outcome, dir, c.want)
		}
	}
}
