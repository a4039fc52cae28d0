package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hexserve/hexserve/internal/testwait"
)

// TestLoadRefusesSpecialFiles: the config file goes through the safe reader: a FIFO is refused,
// never waited on, and a file over modelfile.MaxConfig is refused before it is read.
func TestLoadRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("server:\n  listen: 127.0.0.1:1\n"+strings.Repeat("#\n", 4<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for path, want := range map[string]string{fifo: "not a regular file (a named pipe)", big: "more than the 4194304 allowed"} {
			if _, err := Load(path); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Load(%s) = %v, want %q", filepath.Base(path), err, want)
			}
		}
	}()
	testwait.Recv(t, done, 5*time.Second, "loading the config (blocked on the FIFO?)")
}
