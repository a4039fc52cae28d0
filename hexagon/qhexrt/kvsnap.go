package qhexrt

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/internal/modelfile"
)

// identityHead is how much of each context binary the layout identity hashes.
const identityHead = 64 << 10

// KVLayout describes one saved cache row: every layer's K row then V row
// ([kv_dim] each, in the cache's dtype). The identity names the model, the
// contract, the graph shapes, the dtype and each context binary's name, size
// and a hash of its first 64 KiB, so rows are only restored into the same
// graphs.
func (r *Runner) KVLayout() inference.KVLayout {
	s := r.spec
	var b strings.Builder
	fmt.Fprintf(&b, "qhexrt-runner/1 model=%q contract=%s layers=%d kv_dim=%d ctx=%d window=%d kv=%s",
		s.name, s.contract, s.layers, s.kvDim, s.ctx, r.window, r.kvET)
	var files []string
	for _, g := range s.graphs {
		if !slices.Contains(files, g.file) {
			files = append(files, g.file)
		}
	}
	for _, f := range files {
		size, sum := fileHead(f)
		fmt.Fprintf(&b, " %s:%d:%s", filepath.Base(f), size, sum)
	}
	return inference.KVLayout{Identity: b.String(), RowBytes: r.kvRowAll()}
}

// kvRowAll is the bytes of one row over all layers, K and V.
func (r *Runner) kvRowAll() int { return 2 * len(r.kvK) * r.kvSlots.Bytes(1) }

// fileHead returns a file's size and the hash of its first identityHead bytes.
func fileHead(path string) (int64, string) {
	f, size, err := modelfile.Open(path, 0)
	if err != nil {
		return -1, "unreadable"
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, f, identityHead); err != nil && err != io.EOF {
		return -1, "unreadable"
	}
	return size, hex.EncodeToString(h.Sum(nil)[:8])
}
