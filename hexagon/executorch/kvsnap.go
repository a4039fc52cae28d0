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

// SaveKV gathers slots [from, to) into dst: per slot, per layer, K
// (n_kv·hd elements, from the transposed [n_kv, hd, S] cache) then V.
func (r *Runner) SaveKV(from, to int, dst []byte) error {
	if r.life.Closed() {
		return ErrClosed
	}
	r.sync()
	if from < 0 || to > r.valid || from > to || len(dst) != (to-from)*r.rowBytes() {
		return fmt.Errorf("executorch: SaveKV(%d, %d) with %d valid slots and %d bytes (want %d)", from, to, r.valid, len(dst), (to-from)*r.rowBytes())
	}
	r.kvRows(from, to, dst, false)
	return nil
}

// RestoreKV scatters src into slots from…; the next Eval may pass valid up
// to the last restored slot.
func (r *Runner) RestoreKV(from int, src []byte) error {
	if r.life.Closed() {
		return ErrClosed
	}
	r.sync()
	rb := r.rowBytes()
	n := len(src) / rb
	if from+n > r.stride {
		r.restride(r.maxS) // the decode layout holds every slot
	}
	if from < 0 || from > r.valid || len(src)%rb != 0 || from+n > r.stride {
		return fmt.Errorf("executorch: RestoreKV at %d of %d bytes with %d valid slots (rows of %d bytes, %d slots)", from, len(src), r.valid, rb, r.stride)
	}
	r.kvRows(from, from+n, src, true)
	r.valid = from + n
	r.pre.open, r.dec.open = -1, -1
	return nil
}

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
