//go:build unix

package kvstore

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestDiskRefusesSpecialFiles: issue #32's F7. A FIFO named like an entry
// blocked start-up; it and a symlink out of the directory are now refused
// with a log line (and left alone: they are not the store's).
func TestDiskRefusesSpecialFiles(t *testing.T) {
	dir, file, seq := savedOne(t, layout)
	// The saved file moves out of the directory; a symlink to it and a FIFO take its place.
	outside := filepath.Join(t.TempDir(), "saved.kv")
	os.Rename(file, outside)
	os.Symlink(outside, file)
	if err := syscall.Mkfifo(filepath.Join(dir, "x.kv"), 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	var log bytes.Buffer
	opened := make(chan *Store, 1)
	go func() {
		s, err := Open(Config{Layout: layout, Memory: 1 << 20, Dir: dir, Disk: 1 << 20, Logger: zerolog.New(&log)})
		if err != nil {
			t.Error(err)
		}
		opened <- s
	}()
	var s *Store
	select {
	case s = <-opened:
	case <-time.After(5 * time.Second):
		t.Fatal("Open blocked (on the FIFO)")
	}
	if s == nil {
		return
	}
	if n := restore(t, s, "", seqOf(seq, 1), 0); n != 0 {
		t.Fatalf("restored %d rows through a symlink", n)
	}
	for _, name := range []string{"x.kv", filepath.Base(file)} {
		if !strings.Contains(log.String(), name) {
			t.Errorf("no log line names %s: %s", name, log.String())
		}
		if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s removed: %v", name, err)
		}
	}
}
