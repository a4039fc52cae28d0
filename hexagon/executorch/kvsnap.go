package executorch

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"

	"github.com/hexserve/hexserve/hexagon/slotpool"
	"github.com/hexserve/hexserve/inference"
)

// KVLayout is one cache slot over all layers, K then V, in the caches'
// native type; the identity names the file, its size and context
// signatures, and the cache shape.
func (r *Runner) KVLayout() inference.KVLayout {
	h := sha256.New()
	fmt.Fprintf(h, "%s %d L%d kv%d hd%d cl%d %s", filepath.Base(r.file.Path), r.file.Size, r.layers, r.nkv, r.hd, r.cl, r.pre.kT.DataType)
	for _, d := range r.file.Method(r.pre.method).Delegates {
		fmt.Fprintf(h, " %d", d.Header.Signature)
	}
	for l := range r.layers {
		t := r.pre.types[r.pre.kIn[l]]
		u := r.pre.types[r.pre.vIn[l]]
		fmt.Fprintf(h, " %g/%d %g/%d", t.Quant.Scale, t.Quant.Offset, u.Quant.Scale, u.Quant.Offset)
	}
	return inference.KVLayout{Identity: "pte:" + hex.EncodeToString(h.Sum(nil)[:16]), RowBytes: r.rowBytes()}
}

func (r *Runner) rowBytes() int { return r.kc.RowBytes() }

// cache is the caches as the slot pool indexes them, once the copies into
// them in flight are done.
func (r *Runner) cache() slotpool.KV {
	r.sync()
	return r.kc.KV
}
