// Package modelfile is hexserve's one reader of files it does not trust:
// a model's folder (every model format and the tokenizer), the server's
// config and TLS files, and the files the server keeps in its own folders
// (stored responses, saved KV rows: OpenIn). Regular files only (a FIFO or
// a device, even one swapped in between a look and the open, is refused
// and never waited on), each kind read no further than its cap
// (MaxConfig, MaxTokenizer), binaries mapped, never read into the heap,
// and the paths a model's own config names kept inside its folder
// (Folder). Errors name the file and say what it really is.
package modelfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// The caps of what is read into memory, checked before a byte is read.
const (
	// MaxConfig caps a JSON config: a manifest, genie_config.json, the
	// HTP extensions, config.json, generation_config.json,
	// tokenizer_config.json. Each is a few KB.
	MaxConfig = 4 << 20
	// MaxTokenizer caps a tokenizer.json (Llama-3's is 9 MB, Qwen3's 11 MB).
	MaxTokenizer = 64 << 20
	// MaxPEM caps a TLS certificate chain, key or CA bundle (a system CA
	// bundle is about 200 KB).
	MaxPEM = 4 << 20
)

// ErrNotRegular is the error for a FIFO, a device, a socket or a folder.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is the error for a file over its cap.
var ErrTooLarge = errors.New("too large")

// Stat checks that path is a regular file (a symbolic link is followed) of
// at most max bytes (max <= 0: any size) and returns its size, without
// opening it.
func Stat(path string, max int64) (int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), check(path, st, max)
}

// Open opens path for reading when it is a regular file of at most max
// bytes (max <= 0: any size). It opens without blocking and checks the
// opened file, so a FIFO swapped in after a Stat is refused, not waited on.
func Open(path string, max int64) (*os.File, int64, error) {
	if _, err := Stat(path, max); err != nil {
		return nil, 0, err
	}
	f, st, err := open(path, max, 0)
	if err != nil {
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// open opens path with flags added to O_RDONLY|O_NONBLOCK and checks the
// opened file (check).
func open(path string, max int64, flags int) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|flags, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err == nil {
		err = check(path, st, max)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// ReadFile returns the content of path, a regular file of at most max
// bytes (see Open; checked while reading too: a file that grows is
// refused).
func ReadFile(path string, max int64) ([]byte, error) {
	f, _, err := Open(path, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, path, max)
}

// readAll reads f, path, to its end, refusing more than max bytes.
func readAll(f *os.File, path string, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: %w: more than the %d bytes allowed", path, ErrTooLarge, max)
	}
	return b, nil
}

// Map maps path, a regular file of at most max bytes (max <= 0: any size),
// read-only; an empty file maps to nil. The bytes stay valid until Unmap
// and never enter the Go heap: only the pages read are loaded.
func Map(path string, max int64) ([]byte, error) {
	f, size, err := Open(path, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size == 0 {
		return nil, nil
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("%s: %w to map (%d bytes)", path, ErrTooLarge, size)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return data, nil
}

// Unmap releases bytes Map returned; nil is a no-op.
func Unmap(b []byte) error {
	if b == nil {
		return nil
	}
	return syscall.Munmap(b)
}

// check refuses anything but a regular file of at most max bytes.
func check(path string, st os.FileInfo, max int64) error {
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, describeMode(st.Mode()))
	}
	if max > 0 && st.Size() > max {
		return fmt.Errorf("%s: %w: %d bytes, more than the %d allowed", path, ErrTooLarge, st.Size(), max)
	}
	return nil
}

func describeMode(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m&os.ModeCharDevice != 0, m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	}
	return m.Type().String()
}
