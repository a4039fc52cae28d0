package executorch

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"

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

func (r *Runner) rowBytes() int { return 2 * r.layers * r.nkv * r.hd * r.es }

func (r *Runner) kvRows(from, to int, buf []byte, restore bool) {
	r.kvSlots(func(i int) int { return i }, from, to, buf, restore)
}

// kvSlots copies rows [from, to), row i in cache slot slot(i), between the
// caches and buf (per row, per layer: K then V).
func (r *Runner) kvSlots(slotOf func(int) int, from, to int, buf []byte, restore bool) {
	kb, vb := r.kS.Bytes(1), r.vS.Bytes(1)
	o := 0
	for i := from; i < to; i++ {
		slot := slotOf(i)
		for l := range r.layers {
			if restore {
				r.kS.Copy(r.k[l], r.stride, slot, buf[o:o+kb], 1, 0, 1)
				r.vS.Copy(r.v[l], r.stride, slot, buf[o+kb:o+kb+vb], 1, 0, 1)
			} else {
				r.kS.Copy(buf[o:o+kb], 1, 0, r.k[l], r.stride, slot, 1)
				r.vS.Copy(buf[o+kb:o+kb+vb], 1, 0, r.v[l], r.stride, slot, 1)
			}
			o += kb + vb
		}
	}
}
