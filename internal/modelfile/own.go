package modelfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// The files the server keeps in its own folders (stored responses, saved KV rows) are read by
// the same rules, stricter: a plain name directly in the folder, and a symbolic link is refused,
// not followed (it could point outside).

// StatIn returns the information of dir/name, a regular file, without following a symbolic link.
func StatIn(dir, name string) (fs.FileInfo, error) {
	if name != filepath.Base(name) {
		return nil, fmt.Errorf("%s: not a plain file name", name)
	}
	path := filepath.Join(dir, name)
	st, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	return st, check(path, st, 0)
}

// OpenIn opens dir/name for reading when it is a regular file of at most max bytes (StatIn; max
// <= 0: any size), without following a symbolic link or blocking (a FIFO swapped in after the
// look is refused, not waited on).
func OpenIn(dir, name string, max int64) (*os.File, fs.FileInfo, error) {
	if _, err := StatIn(dir, name); err != nil {
		return nil, nil, err
	}
	return open(filepath.Join(dir, name), max, syscall.O_NOFOLLOW)
}

// ReadFileIn returns the content of dir/name (OpenIn), at most max bytes (checked while reading
// too: a file that grows is refused).
func ReadFileIn(dir, name string, max int64) ([]byte, fs.FileInfo, error) {
	f, st, err := OpenIn(dir, name, max)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	b, err := readAll(f, filepath.Join(dir, name), max)
	if err != nil {
		return nil, nil, err
	}
	return b, st, nil
}
