package graphio

import (
	"fmt"
	"math"
	"strings"

	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/internal/half"
)

// Elem is a tensor's element encoding: a QNN data type plus the scale and
// offset of fixed-point types (real = (q + Offset) · Scale).
type Elem struct {
	Type   qnn.DataType
	Scale  float32
	Offset int32
}

// NewElem checks that t is a type the runners convert: float32/16, the
// 8- and 16-bit fixed-point types with a usable scale, and the raw integer
// types int8/uint8/uint16/int32/uint32 (ids, positions, raw mask codes).
func NewElem(t qnn.DataType, q qnn.Quant) (Elem, error) {
	e := Elem{Type: t}
	switch t {
	case qnn.Float32, qnn.Float16, qnn.Int8, qnn.Uint8, qnn.Uint16, qnn.Int32, qnn.Uint32:
	case qnn.SFixed8, qnn.SFixed16, qnn.UFixed8, qnn.UFixed16:
		if !(q.Scale > 0) || math.IsInf(float64(q.Scale), 0) {
			return e, fmt.Errorf("fixed-point type %s with scale %g", Name(t), q.Scale)
		}
		e.Scale, e.Offset = q.Scale, q.Offset
	default:
		return e, fmt.Errorf("unsupported data type %s", Name(t))
	}
	return e, nil
}

// ElemOf is NewElem for a tensor.
func ElemOf(t qnn.TensorInfo) (Elem, error) { return NewElem(t.DataType, t.Quant) }

// Size is the element size in bytes.
func (e Elem) Size() int { return e.Type.Size() }

// Quantized reports whether the type is fixed point.
func (e Elem) Quantized() bool {
	switch e.Type {
	case qnn.SFixed8, qnn.SFixed16, qnn.UFixed8, qnn.UFixed16:
		return true
	}
	return false
}

// String names the type, with scale and offset for fixed point.
func (e Elem) String() string {
	if e.Quantized() {
		return fmt.Sprintf("%s(scale=%g,offset=%d)", Name(e.Type), e.Scale, e.Offset)
	}
	return Name(e.Type)
}

// Same reports whether two encodings are byte-compatible (a copy suffices).
func (e Elem) Same(o Elem) bool {
	return e.Type == o.Type && (!e.Quantized() || e.Scale == o.Scale && e.Offset == o.Offset)
}

// Name names a QNN data type the way error messages spell it ("float32",
// "ufixed16"): its QNN name in lower case, without "_POINT" and
// underscores.
func Name(t qnn.DataType) string {
	if t.Bits() == 0 { // undefined or unknown
		return fmt.Sprintf("dtype(0x%04x)", uint32(t))
	}
	return strings.ToLower(nameCut.Replace(t.String()))
}

var nameCut = strings.NewReplacer("_POINT", "", "_", "")

// Range is the code range of a fixed-point or raw integer type.
func (e Elem) Range() (lo, hi float64) {
	switch e.Type {
	case qnn.SFixed8, qnn.Int8:
		return -128, 127
	case qnn.SFixed16:
		return -32768, 32767
	case qnn.UFixed8, qnn.Uint8:
		return 0, 255
	case qnn.Int32:
		return math.MinInt32, math.MaxInt32
	case qnn.Uint32:
		return 0, math.MaxUint32
	default:
		return 0, 65535
	}
}

// Quantize maps a real value to its saturated code: round(v/Scale) − Offset
// for fixed point, round(v) for raw integers (NaN → 0).
func (e Elem) Quantize(v float32) int64 {
	if v != v {
		return 0
	}
	lo, hi := e.Range()
	q := math.RoundToEven(float64(v))
	if e.Quantized() {
		q = float64(float32(math.RoundToEven(float64(v/e.Scale))) - float32(e.Offset))
	}
	return int64(min(max(q, lo), hi))
}

// Put encodes src into dst (len(dst) = len(src)·Size), saturating.
func (e Elem) Put(dst []byte, src []float32) {
	switch e.Type {
	case qnn.Float32:
		copy(dst, F32Bytes(src))
	case qnn.Float16:
		d := U16(dst)
		for i, v := range src {
			d[i] = FloatToHalf(v)
		}
	case qnn.Uint16, qnn.UFixed16, qnn.SFixed16:
		d := U16(dst)
		for i, v := range src {
			d[i] = uint16(e.Quantize(v))
		}
	case qnn.Int32, qnn.Uint32:
		d := U32(dst)
		for i, v := range src {
			d[i] = uint32(e.Quantize(v))
		}
	case qnn.UFixed8, qnn.SFixed8, qnn.Uint8, qnn.Int8:
		for i, v := range src {
			dst[i] = byte(e.Quantize(v))
		}
	}
}

// Get decodes src into dst (len(src) = len(dst)·Size).
func (e Elem) Get(dst []float32, src []byte) {
	off := float32(e.Offset)
	switch e.Type {
	case qnn.Float32:
		copy(F32Bytes(dst), src)
	case qnn.Float16:
		s := U16(src)
		for i := range dst {
			dst[i] = half.ToFloat32(s[i])
		}
	case qnn.Uint16:
		s := U16(src)
		for i := range dst {
			dst[i] = float32(s[i])
		}
	case qnn.UFixed16:
		s := U16(src)
		for i := range dst {
			dst[i] = (float32(s[i]) + off) * e.Scale
		}
	case qnn.SFixed16:
		s := U16(src)
		for i := range dst {
			dst[i] = (float32(int16(s[i])) + off) * e.Scale
		}
	case qnn.Int32:
		s := U32(src)
		for i := range dst {
			dst[i] = float32(int32(s[i]))
		}
	case qnn.Uint32:
		s := U32(src)
		for i := range dst {
			dst[i] = float32(s[i])
		}
	case qnn.Uint8:
		for i := range dst {
			dst[i] = float32(src[i])
		}
	case qnn.Int8:
		for i := range dst {
			dst[i] = float32(int8(src[i]))
		}
	case qnn.UFixed8:
		for i := range dst {
			dst[i] = (float32(src[i]) + off) * e.Scale
		}
	case qnn.SFixed8:
		for i := range dst {
			dst[i] = (float32(int8(src[i])) + off) * e.Scale
		}
	}
}

// PutInts writes token ids or positions into a 32-bit integer tensor
// (int32 or uint32; len(dst) ≥ 4·len(src)).
func (e Elem) PutInts(dst []byte, src []int32) error {
	if e.Type != qnn.Int32 && e.Type != qnn.Uint32 {
		return fmt.Errorf("ids into a %s tensor; want int32 or uint32", Name(e.Type))
	}
	d := U32(dst)
	for i, v := range src {
		d[i] = uint32(v)
	}
	return nil
}
