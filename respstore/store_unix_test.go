//go:build unix

package respstore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestStoreLoadRefuses: issue #32's F7–F9. Loading the directory skips,
// with a log line, a FIFO (which blocked start-up), a symlink out of the
// directory, and documents the validator refuses; it never reads more than
// the byte limit, however much the directory holds.
func TestStoreLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "outside.json")
	os.WriteFile(outside, []byte(`{"id":"resp_link","owner":"o","data":"secret"}`), 0o600)
	os.Symlink(outside, filepath.Join(dir, "resp_link.json"))
	if err := syscall.Mkfifo(filepath.Join(dir, "resp_fifo.json"), 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	os.WriteFile(filepath.Join(dir, "resp_five.json"), []byte(`{"id":"resp_five","owner":"o","data":5}`), 0o600)
	os.WriteFile(filepath.Join(dir, "resp_ok.json"), []byte(`{"id":"resp_ok","owner":"o","data":"good"}`), 0o600)
	var log bytes.Buffer
	validate := func(id string, data []byte) error {
		if !bytes.HasPrefix(data, []byte(`"`)) {
			return errors.New("not a string")
		}
		return nil
	}
	opened := make(chan error, 1)
	var s *Store
	go func() {
		var err error
		s, err = Open(Options{Dir: dir, Validate: validate, Logger: zerolog.New(&log)})
		opened <- err
	}()
	select {
	case err := <-opened:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Open blocked (on the FIFO)")
	}
	if _, ok := s.Get("resp_ok", "o"); !ok {
		t.Error("the valid response was not loaded")
	}
	for _, id := range []string{"resp_link", "resp_fifo", "resp_five"} {
		if _, ok := s.Get(id, "o"); ok {
			t.Errorf("%s was loaded", id)
		}
		if !strings.Contains(log.String(), id+".json") {
			t.Errorf("no log line names %s: %s", id, log.String())
		}
	}
}
