package bundle

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Sane limits, checked before anything is allocated from a manifest's
// numbers: a manifest with n_layers 1e9 or max_ctx 2^31 is refused with an
// error instead of being allocated until the kernel kills the process.
// They are far above any model a phone runs (Llama-3.2: 16 or 28 layers,
// 128K context, 128K vocabulary).
const (
	MaxLayers         = 1024
	MaxContext        = 1 << 17 // 131072 positions, Llama-3.2's longest
	MaxHidden         = 1 << 15
	MaxHeadDim        = 1024
	MaxVocab          = 1 << 20
	MaxManifestBytes  = 4 << 20  // a manifest is a few KB
	MaxTokenizerBytes = 64 << 20 // Llama-3's tokenizer.json is 9 MB
)

// checkLimits refuses params outside the sane limits.
func checkLimits(p Params) error {
	for _, f := range []struct {
		key    string
		v, max int
	}{{"params.hidden", p.Hidden, MaxHidden}, {"params.vocab", p.Vocab, MaxVocab}, {"params.n_layers", p.NLayers, MaxLayers},
		{"params.max_ctx", p.MaxCtx, MaxContext}, {"params.kv_dim", p.KVDim, MaxHidden}, {"params.head_dim", p.HeadDim, MaxHeadDim}} {
		if f.v <= 0 {
			return fmt.Errorf("%s must be positive, got %d", f.key, f.v)
		}
		if f.v > f.max {
			return fmt.Errorf("%s is %d, more than hexserve supports (%d)", f.key, f.v, f.max)
		}
	}
	return nil
}

// RegularFile checks that path is a regular file of at most max bytes (max
// <= 0: any size) and returns its size. Devices, FIFOs and folders are
// refused: reading /dev/zero or a FIFO never ends. Errors say what really
// happened (permission denied, a symlink loop).
func RegularFile(path string, max int64) (int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	if !st.Mode().IsRegular() {
		return 0, fmt.Errorf("%s is not a regular file (%s)", path, describeMode(st.Mode()))
	}
	if max > 0 && st.Size() > max {
		return 0, fmt.Errorf("%s has %d bytes, more than the %d allowed", path, st.Size(), max)
	}
	return st.Size(), nil
}

// ReadRegular reads a regular file of at most max bytes (see RegularFile).
// The open file is checked again, so a file swapped after the check cannot
// make it read without end.
func ReadRegular(path string, max int64) ([]byte, error) {
	if _, err := RegularFile(path, max); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > max {
		return nil, fmt.Errorf("%s changed while being read", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s has more than the %d bytes allowed", path, max)
	}
	return data, nil
}

// LocalFile resolves rel, an artifact path from a manifest, against dir and
// checks it is a regular file of at most max bytes (<= 0: any). rel must
// stay inside dir: absolute paths and ".." are refused, so a manifest cannot
// make the server open /etc/passwd. (Symbolic links inside dir are
// followed: they are the folder owner's choice, not the manifest's.)
func LocalFile(dir, key, rel string, max int64) (string, int64, error) {
	if !filepath.IsLocal(rel) {
		return "", 0, fmt.Errorf("%s: %q is not inside the bundle folder %s (artifact paths are relative to it, without \"..\")", key, rel, dir)
	}
	p := filepath.Join(dir, rel)
	size, err := RegularFile(p, max)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %w", key, err)
	}
	return p, size, nil
}

func describeMode(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return m.Type().String()
}
