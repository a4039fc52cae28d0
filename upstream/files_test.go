package upstream

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hexserve/hexserve/internal/testwait"
)

// TestFilesRefuseFIFO: the key file and the CA bundle go through the safe reader: a FIFO is
// refused, never waited on.
func TestFilesRefuseFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := KeyFrom("", fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("KeyFrom(a FIFO) = %v", err)
		}
		if _, err := LoadCAs(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("LoadCAs(a FIFO) = %v", err)
		}
	}()
	testwait.Recv(t, done, 5*time.Second, "reading the files (blocked on the FIFO?)")
}
