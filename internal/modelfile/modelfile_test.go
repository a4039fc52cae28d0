package modelfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hexserve/hexserve/internal/testerr"
	"github.com/hexserve/hexserve/internal/testwait"
)

// TestRefused: a FIFO, a device, a folder and a file over its cap are
// refused at once, by ReadFile and Map alike, naming the file and what it
// is; a regular file reads and maps to its bytes.
func TestRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, 100), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := filepath.Join(dir, "ok.json")
	os.WriteFile(ok, []byte(`{"x":1}`), 0o600)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, tc := range []struct {
			path string
			want error
			says string
		}{{fifo, ErrNotRegular, "a named pipe"}, {"/dev/zero", ErrNotRegular, "a device"}, {dir, ErrNotRegular, "a folder"},
			{big, ErrTooLarge, "100 bytes, more than the 64 allowed"}} {
			if _, err := ReadFile(tc.path, 64); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("ReadFile(%s) = %v, want %v saying %q", tc.path, err, tc.want, tc.says)
			}
			if _, err := Map(tc.path, 64); !errors.Is(err, tc.want) {
				t.Errorf("Map(%s) = %v, want %v", tc.path, err, tc.want)
			}
		}
		if b, err := ReadFile(ok, 64); err != nil || string(b) != `{"x":1}` {
			t.Errorf("ReadFile(ok) = %q, %v", b, err)
		}
		b, err := Map(ok, 0)
		if err != nil || string(b) != `{"x":1}` {
			t.Errorf("Map(ok) = %q, %v", b, err)
		}
		Unmap(b)
	}()
	testwait.Recv(t, done, 5*time.Second, "reading (blocked on the FIFO or /dev/zero?)")
}

// TestOpenChecksTheOpenedFile: a FIFO swapped in after the look is refused
// by the check of the opened file, without blocking.
func TestOpenChecksTheOpenedFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "swapped")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0) // what Open does after Stat
		if err == nil {
			st, _ := f.Stat()
			err = check(fifo, st, 0)
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Fatalf("opened FIFO: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("opening a FIFO blocked")
	}
}

// TestResolve: the path rule.
func TestResolve(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		p       string
		allow   bool
		want    string
		outside bool
		err     string
	}{
		{"a.bin", false, filepath.Join(dir, "a.bin"), false, ""},
		{"sub/a.bin", false, filepath.Join(dir, "sub/a.bin"), false, ""},
		{filepath.Join(dir, "a.bin"), false, filepath.Join(dir, "a.bin"), false, ""},
		{"../a.bin", false, "", true, "outside the model's folder"},
		{"/etc/passwd", false, "", true, "model.allow_outside_paths"},
		{"/etc/passwd", true, "/etc/passwd", true, ""},
		{"", false, "", false, "empty path"},
	} {
		got, outside, err := Folder{Dir: dir, AllowOutside: tc.allow}.Resolve("ctx-bins[0]", tc.p)
		if tc.err != "" {
			testerr.Mentions(t, err, "ctx-bins[0]", tc.err)
			continue
		}
		if err != nil || got != tc.want || outside != tc.outside {
			t.Errorf("Resolve(%q, allow %v) = %q, %v, %v; want %q, %v", tc.p, tc.allow, got, outside, err, tc.want, tc.outside)
		}
	}
}

// TestDecodeJSON: one value only, and errors in JSON's words.
func TestDecodeJSON(t *testing.T) {
	type inner struct {
		ModelType string `json:"model_type"`
		N         int    `json:"n"`
	}
	var v struct {
		Dialog inner `json:"dialog"`
	}
	for _, tc := range []struct{ in, want string }{
		{`{"dialog":[1]}`, "dialog: got an array, want an object"},
		{`{"dialog":{"n":"x"}}`, "dialog.n: got a string, want an integer"},
		{`{"dialog":{"n":1e400}}`, "dialog.n: got the number 1e400, want an integer"},
		{`[]`, "the top level: got an array, want an object"},
		{`{"dialog":{}} {}`, "bytes after the JSON value"},
		{`{"dialog":{}}xyz`, "bytes after the JSON value"},
		{`{"dialog":`, "ends in the middle"},
		{``, "empty"},
		{`{"dialog":{"n":1,}}`, "not valid JSON at offset"},
	} {
		err := DecodeJSON([]byte(tc.in), &v)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "Go ") || strings.Contains(err.Error(), "struct") {
			t.Errorf("DecodeJSON(%s) = %v, want %q", tc.in, err, tc.want)
		}
	}
	if err := DecodeJSON([]byte(" {\"dialog\":{\"n\":2}}\n\n"), &v); err != nil || v.Dialog.N != 2 {
		t.Errorf("valid: %v, %+v", err, v)
	}
}
