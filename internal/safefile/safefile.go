// Package safefile reads the files a server keeps in its own directories
// (stored responses, saved KV rows) without trusting what it finds there:
// only regular files directly in the directory (no symlink, FIFO, device
// or socket, which could block start-up or point outside), opened without
// blocking, and read no further than a byte limit.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrNotRegular is the error for a symlink, FIFO, device, socket or
// directory.
var ErrNotRegular = errors.New("not a regular file")

// Stat returns the information of dir/name without following a symlink,
// refusing anything but a regular file.
func Stat(dir, name string) (fs.FileInfo, error) {
	if name != filepath.Base(name) {
		return nil, fmt.Errorf("%s: not a plain file name", name)
	}
	info, err := os.Lstat(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%v)", name, ErrNotRegular, info.Mode().Type())
	}
	return info, nil
}

// Open opens dir/name for reading when it is a regular file of at most
// max bytes: without following a symlink and without blocking (a FIFO
// swapped in after Stat fails instead of waiting for a writer).
func Open(dir, name string, max int64) (*os.File, fs.FileInfo, error) {
	if _, err := Stat(dir, name); err != nil {
		return nil, nil, err
	}
	f, err := openNoFollow(filepath.Join(dir, name))
	if err != nil {
		return nil, nil, err
	}
	info, err := f.Stat()
	switch {
	case err != nil:
	case !info.Mode().IsRegular():
		err = fmt.Errorf("%s: %w (%v)", name, ErrNotRegular, info.Mode().Type())
	case info.Size() > max:
		err = fmt.Errorf("%s: %d bytes, more than the %d allowed", name, info.Size(), max)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, info, nil
}

// ReadFile returns the content of dir/name, a regular file of at most max
// bytes (checked while reading too: a file that grows is refused).
func ReadFile(dir, name string, max int64) ([]byte, fs.FileInfo, error) {
	f, info, err := Open(dir, name, max)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, nil, err
	}
	if int64(len(b)) > max {
		return nil, nil, fmt.Errorf("%s: more than the %d bytes allowed", name, max)
	}
	return b, info, nil
}
