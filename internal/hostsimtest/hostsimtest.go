// Package hostsimtest finds hostsim's libraries for tests: the one "is
// hostsim built?" check of every test that runs graphs through the stand-in.
package hostsimtest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Libraries are the stand-ins `make hostsim` builds.
var Libraries = []string{"libQnnHtp.so", "libQnnSystem.so", "libcdsprpc.so"}

// Dir returns the absolute directory of hostsim's libraries:
// $HEXSERVE_HOSTSIM_DIR (scripts/test-arm64.sh points it at the arm64
// build), or build/hostsim/<GOARCH> in the repository. When a library is
// missing the test is skipped, or fails under CI=true, where .ci/run builds
// them and a skip would hide a broken build.
func Dir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("HEXSERVE_HOSTSIM_DIR")
	if dir == "" {
		dir = filepath.Join(RepoRoot(t), "build", "hostsim", runtime.GOARCH)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, lib := range Libraries {
		if _, err := os.Stat(filepath.Join(dir, lib)); err != nil {
			const msg = "hostsim is not built (%v): run `make hostsim` or set HEXSERVE_HOSTSIM_DIR"
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true: "+msg, err)
			}
			t.Skipf(msg, err)
		}
	}
	return dir
}

// RepoRoot walks up from the test's directory (go test runs a test in its
// package's directory) to the one holding go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("hostsimtest: go.mod not found above the test directory")
		}
		dir = parent
	}
}
