package executorch

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/internal/half"
)

// maskCodes are one attend and one blocked element of a mask tensor, in its
// own type: fixed point attends with the code of 0.0 (−offset: 65535 for
// ExecuTorch's uint16 mask, 255 for uint8) and blocks with code 0; float
// masks add 0 or −65535 (ExecuTorch's fill_mask; −65504 in float16).
type maskCodes struct {
	es            int
	open, blocked [8]byte
}

func newMaskCodes(t qnn.TensorInfo) (maskCodes, error) {
	m := maskCodes{es: t.DataType.Size()}
	switch t.DataType {
	case qnn.UFixed8, qnn.UFixed16:
		maxCode := int64(1)<<t.DataType.Bits() - 1
		open := int64(-t.Quant.Offset)
		if t.Quant.Scale <= 0 || open <= 0 || open > maxCode {
			return m, fmt.Errorf("mask %s (%s, scale %g, offset %d) cannot express attend (0.0) above blocked (code 0)",
				t.Name, t.DataType, t.Quant.Scale, t.Quant.Offset)
		}
		putUint(m.open[:m.es], uint64(open))
	case qnn.Uint8, qnn.Uint16:
		putUint(m.open[:m.es], uint64(1)<<t.DataType.Bits()-1)
	case qnn.Float32:
		*(*uint32)(unsafe.Pointer(&m.blocked[0])) = math.Float32bits(-65535)
	case qnn.Float16:
		*(*uint16)(unsafe.Pointer(&m.blocked[0])) = half.FromFloat32(-65504)
	default:
		return m, fmt.Errorf("mask %s is %s; want ufixed8/16, uint8/16, float16 or float32", t.Name, t.DataType)
	}
	return m, nil
}

func putUint(b []byte, v uint64) {
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
}

// fill writes elements [from, to) of b with attend or blocked codes.
func (m *maskCodes) fill(b []byte, from, to int, attend bool) {
	if to <= from {
		return
	}
	c := m.blocked[:m.es]
	if attend {
		c = m.open[:m.es]
	}
	d := b[from*m.es : to*m.es]
	n := copy(d, c)
	for n < len(d) {
		n += copy(d[n:], d[:n])
	}
}

// writeMask writes the SmartMask of a call at positions start…: every row
// attends the cache slots [0, start) and, causally, the new block's
// columns CL−AR … CL−AR+i. Padding rows follow the same pattern; their
// outputs are never used. The decode mask is updated incrementally.
func (m *method) writeMask(b []byte, start int) {
	cl, S := m.cl, m.cl-m.ar
	if m.ar == 1 && m.open >= 0 && m.open <= start {
		m.masks.fill(b, m.open, start, true)
		m.open = start
		return
	}
	for i := range m.ar {
		row := i * cl
		m.masks.fill(b, row, row+start, true)
		m.masks.fill(b, row+start, row+S, false)
		m.masks.fill(b, row+S, row+S+i+1, true)
		m.masks.fill(b, row+S+i+1, row+cl, false)
	}
	m.open = -1
	if m.ar == 1 {
		m.open = start
	}
}

// copyKV copies the first n new entries of every layer from m's outputs
// into cache slots start… (EXECUTORCH.md §4.4). K is [n_kv·hd rows][S]: a
// strided scatter of n elements per row; V is [n_kv][S][hd]: one block of
// n·hd per head. The bytes are raw codes (the outputs are quantised like
// the caches).
func (r *Runner) copyKV(m *method, start, n int) {
	es, S, ar, hd := r.es, r.stride, m.ar, r.hd
	rows := r.nkv * hd
	for l := range r.layers {
		ko, vo := m.kOut[l], m.vOut[l]
		k, v := r.k[l], r.v[l]
		if n == 1 { // a decode step: one element per row, without a copy call each
			scatter1(k, ko, rows, S, ar, start, es)
		} else {
			for row := range rows {
				copy(k[(row*S+start)*es:(row*S+start+n)*es], ko[row*ar*es:(row*ar+n)*es])
			}
		}
		for h := range r.nkv {
			copy(v[(h*S+start)*hd*es:(h*S+start+n)*hd*es], vo[h*ar*hd*es:(h*ar+n)*hd*es])
		}
	}
}

// scatter1 copies element row·ar of src to element row·S + start of dst
// for every row, for elements of es bytes.
func scatter1(dst, src []byte, rows, S, ar, start, es int) {
	switch es {
	case 1:
		for row := range rows {
			dst[row*S+start] = src[row*ar]
		}
	case 2:
		d, s := u16View(dst), u16View(src)
		for row := range rows {
			d[row*S+start] = s[row*ar]
		}
	case 4:
		d, s := u32View(dst), u32View(src)
		for row := range rows {
			d[row*S+start] = s[row*ar]
		}
	default:
		for row := range rows {
			copy(dst[(row*S+start)*es:(row*S+start+1)*es], src[row*ar*es:(row*ar+1)*es])
		}
	}
}

// restride changes the caches' row length from r.stride to s slots,
// keeping the valid slots (EXECUTORCH.md §4.5): rows move first-to-last when
// shrinking and last-to-first when growing, so no row overwrites one not yet
// moved. Only the valid slots are moved; the rest is stale and masked.
func (r *Runner) restride(s int) {
	keep := min(r.valid, s, r.stride)
	es, hd, from := r.es, r.hd, r.stride
	move := func(b []byte, rows, unit int) {
		if s < from {
			for i := 1; i < rows; i++ {
				copy(b[i*s*unit:(i*s+keep)*unit], b[i*from*unit:(i*from+keep)*unit])
			}
			return
		}
		for i := rows - 1; i > 0; i-- {
			copy(b[i*s*unit:(i*s+keep)*unit], b[i*from*unit:(i*from+keep)*unit])
		}
	}
	if keep > 0 {
		for l := range r.layers {
			move(r.k[l], r.nkv*hd, es)
			move(r.v[l], r.nkv, hd*es)
		}
	}
	r.stride = s
}

// u32View and friends view native little-endian buffers.
func u32View(b []byte) []uint32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func u16View(b []byte) []uint16 {
	if len(b) < 2 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}

func f32View(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}
