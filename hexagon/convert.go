package hexagon

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/hexserve/hexserve/internal/half"
)

// QNN data type codes (Qnn_DataType_t); the low byte is the bit width.
const (
	dtUint16   uint32 = 0x0116
	dtFloat16  uint32 = 0x0216
	dtFloat32  uint32 = 0x0232
	dtSFixed8  uint32 = 0x0308
	dtSFixed16 uint32 = 0x0316
	dtUFixed8  uint32 = 0x0408
	dtUFixed16 uint32 = 0x0416
)

// elemType is a tensor's element encoding: a QNN data type plus the
// scale/offset of fixed-point types (real = (q + offset) * scale).
type elemType struct {
	code   uint32
	scale  float32
	offset int32
}

// newElemType checks that code is a type the runner converts.
func newElemType(code uint32, scale float32, offset int32) (elemType, error) {
	e := elemType{code: code, scale: scale, offset: offset}
	switch code {
	case dtFloat32, dtFloat16:
		e.scale, e.offset = 0, 0
	case dtUint16:
		// Raw 16-bit values: only meaningful for the u16 mask encoding.
		e.scale, e.offset = 0, 0
	case dtSFixed8, dtSFixed16, dtUFixed8, dtUFixed16:
		if !(scale > 0) || math.IsInf(float64(scale), 0) {
			return e, fmt.Errorf("fixed-point type %s with scale %g", dtName(code), scale)
		}
	default:
		return e, fmt.Errorf("unsupported data type %s", dtName(code))
	}
	return e, nil
}

// size is the element size in bytes.
func (e elemType) size() int { return bitsOf(e.code) / 8 }

func bitsOf(code uint32) int {
	lo := code & 0xff
	// The low byte reads as decimal bits: 0x08 → 8, 0x16 → 16, 0x32 → 32.
	return int(lo>>4)*10 + int(lo&0xf)
}

// quantized reports whether the type is fixed point.
func (e elemType) quantized() bool {
	switch e.code {
	case dtSFixed8, dtSFixed16, dtUFixed8, dtUFixed16:
		return true
	}
	return false
}

// String names the type, with scale and offset for fixed point.
func (e elemType) String() string {
	if e.quantized() {
		return fmt.Sprintf("%s(scale=%g,offset=%d)", dtName(e.code), e.scale, e.offset)
	}
	return dtName(e.code)
}

// dtName names a QNN data type code.
func dtName(code uint32) string {
	switch code {
	case 0x0008:
		return "int8"
	case 0x0016:
		return "int16"
	case 0x0032:
		return "int32"
	case 0x0064:
		return "int64"
	case 0x0108:
		return "uint8"
	case dtUint16:
		return "uint16"
	case 0x0132:
		return "uint32"
	case 0x0164:
		return "uint64"
	case dtFloat16:
		return "float16"
	case 0x0226:
		return "bfloat16"
	case dtFloat32:
		return "float32"
	case 0x0264:
		return "float64"
	case 0x0304:
		return "sfixed4"
	case dtSFixed8:
		return "sfixed8"
	case dtSFixed16:
		return "sfixed16"
	case 0x0332:
		return "sfixed32"
	case 0x0404:
		return "ufixed4"
	case dtUFixed8:
		return "ufixed8"
	case dtUFixed16:
		return "ufixed16"
	case 0x0432:
		return "ufixed32"
	case 0x0508:
		return "bool8"
	case 0x0608:
		return "string"
	}
	return fmt.Sprintf("dtype(0x%04x)", code)
}

// qrange is the integer range of a fixed-point type.
func (e elemType) qrange() (lo, hi float32) {
	switch e.code {
	case dtSFixed8:
		return -128, 127
	case dtSFixed16:
		return -32768, 32767
	case dtUFixed8:
		return 0, 255
	default:
		return 0, 65535
	}
}

// quantize maps a real value to the saturated integer q = round(v/scale) - offset.
func (e elemType) quantize(v float32) int32 {
	lo, hi := e.qrange()
	if v != v { // NaN
		return 0
	}
	q := float32(math.RoundToEven(float64(v/e.scale))) - float32(e.offset)
	if q < lo {
		q = lo
	} else if q > hi {
		q = hi
	}
	return int32(q)
}

// put encodes src into dst (len(dst) = len(src)*size), saturating.
func (e elemType) put(dst []byte, src []float32) {
	switch e.code {
	case dtFloat32:
		copy(dst, f32Bytes(src))
	case dtFloat16:
		d := u16View(dst)
		for i, v := range src {
			d[i] = floatToHalf(v)
		}
	case dtUint16, dtUFixed16, dtSFixed16:
		d := u16View(dst)
		if e.code == dtUint16 {
			for i, v := range src {
				d[i] = uint16(min(max(float32(math.RoundToEven(float64(v))), 0), 65535))
			}
			return
		}
		for i, v := range src {
			d[i] = uint16(e.quantize(v))
		}
	case dtUFixed8, dtSFixed8:
		for i, v := range src {
			dst[i] = byte(e.quantize(v))
		}
	}
}

// get decodes src into dst (len(src) = len(dst)*size).
func (e elemType) get(dst []float32, src []byte) {
	switch e.code {
	case dtFloat32:
		copy(f32Bytes(dst), src)
	case dtFloat16:
		s := u16View(src)
		for i := range dst {
			dst[i] = halfToFloat(s[i])
		}
	case dtUint16:
		s := u16View(src)
		for i := range dst {
			dst[i] = float32(s[i])
		}
	case dtUFixed16:
		s := u16View(src)
		for i := range dst {
			dst[i] = (float32(s[i]) + float32(e.offset)) * e.scale
		}
	case dtSFixed16:
		s := u16View(src)
		for i := range dst {
			dst[i] = (float32(int16(s[i])) + float32(e.offset)) * e.scale
		}
	case dtUFixed8:
		for i := range dst {
			dst[i] = (float32(src[i]) + float32(e.offset)) * e.scale
		}
	case dtSFixed8:
		for i := range dst {
			dst[i] = (float32(int8(src[i])) + float32(e.offset)) * e.scale
		}
	}
}

// same reports whether two encodings are byte-compatible (a copy suffices).
func (e elemType) same(o elemType) bool {
	if e.code != o.code {
		return false
	}
	return !e.quantized() || (e.scale == o.scale && e.offset == o.offset)
}

// f32Bytes views a float32 slice as bytes.
func f32Bytes(s []float32) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*len(s))
}

// u16View views bytes as uint16 (native little-endian, 2-byte aligned buffers).
func u16View(b []byte) []uint16 {
	if len(b) < 2 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}

// f32View views bytes as float32 (4-byte aligned buffers).
func f32View(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// halfToFloat converts IEEE 754 half-precision bits to float32.
func halfToFloat(h uint16) float32 { return half.ToFloat32(h) }

// floatToHalf converts float32 to half precision, rounding to nearest even
// and saturating to ±65504 (NaN stays NaN): an infinity fed to a graph
// would turn attention into NaNs.
func floatToHalf(f float32) uint16 {
	if f > 65504 {
		f = 65504
	} else if f < -65504 {
		f = -65504
	}
	return half.FromFloat32(f)
}
