package modelfile

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/hexserve/hexserve/internal/testwait"
)

// TestReadFileIn: a server's own folder yields only regular files of plain names, never a
// symbolic link (followed out of the folder) or a FIFO (waited on), nor one over the cap.
func TestReadFileIn(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("FIFOs and symlinks need a unix")
	}
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret.json")
	os.WriteFile(outside, []byte(`{"x":1}`), 0o600)
	os.WriteFile(filepath.Join(dir, "ok.json"), []byte(`{"x":1}`), 0o600)
	os.WriteFile(filepath.Join(dir, "big.json"), make([]byte, 100), 0o600)
	os.Symlink(outside, filepath.Join(dir, "link.json"))
	os.Mkdir(filepath.Join(dir, "sub.json"), 0o700)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, tc := range []struct {
			name    string
			regular bool // refused as not regular (else: too large)
		}{{"link.json", true}, {"sub.json", true}, {"fifo.json", true}, {"big.json", false}} {
			_, _, err := ReadFileIn(dir, tc.name, 64)
			if err == nil || errors.Is(err, ErrNotRegular) != tc.regular || errors.Is(err, ErrTooLarge) == tc.regular {
				t.Errorf("ReadFileIn(%s) = %v", tc.name, err)
			}
		}
		if b, _, err := ReadFileIn(dir, "ok.json", 64); err != nil || string(b) != `{"x":1}` {
			t.Errorf("ReadFileIn(ok.json) = %q, %v", b, err)
		}
		if _, _, err := ReadFileIn(dir, "../x.json", 64); err == nil {
			t.Error("a name with a path was read")
		}
	}()
	testwait.Recv(t, done, 5*time.Second, "reading the directory (blocked on the FIFO?)")
}
