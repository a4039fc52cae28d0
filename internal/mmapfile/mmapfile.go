// Package mmapfile maps whole files read-only, so that large model files
// (context binaries, .pte programs, embedding tables) never enter the Go
// heap.
package mmapfile

import (
	"fmt"
	"os"
	"syscall"
)

// Map maps the file at path read-only; an empty file maps to nil. The
// bytes stay valid until Unmap.
func Map(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() == 0 {
		return nil, nil
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
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
