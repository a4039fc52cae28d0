//go:build unix

package safefile

import (
	"os"
	"syscall"
)

func openNoFollow(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	// Regular files ignore O_NONBLOCK; reads stay plain.
	return f, nil
}
