// Package modelfiletest checks, for other packages' tests, that a loader reads its file through
// modelfile's rules: a FIFO, a device and a file over the cap are refused, promptly, with an
// error naming the file and what it is.
package modelfiletest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Refuses calls read with a FIFO, /dev/zero and a sparse file of max+1 bytes, and fails t unless
// each returns within 5 s an error naming the path and saying "a named pipe", "a device" or
// "more than the max allowed".
func Refuses(t *testing.T, max int64, read func(path string) error) {
	t.Helper()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, max+1); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{fifo, "a named pipe"}, {"/dev/zero", "a device"}, {big, "more than the " + strconv.FormatInt(max, 10) + " allowed"},
	} {
		done := make(chan error, 1)
		go func() { done <- read(tc.path) }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("reading %s: %v, want an error naming it with %q", tc.path, err, tc.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("reading %s did not return within 5 s", tc.path)
		}
	}
}
