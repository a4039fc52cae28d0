package graphio

import (
	"unsafe"

	"github.com/hexserve/hexserve/internal/half"
)

// U16 views bytes as uint16 (native little-endian, 2-byte aligned buffers).
func U16(b []byte) []uint16 {
	if len(b) < 2 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}

// U32 views bytes as uint32 (4-byte aligned buffers).
func U32(b []byte) []uint32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// F32 views bytes as float32 (4-byte aligned buffers).
func F32(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// F32Bytes views a float32 slice as bytes.
func F32Bytes(s []float32) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*len(s))
}

// FloatToHalf converts float32 to half precision, rounding to nearest even
// and saturating to ±65504 (NaN stays NaN): an infinity fed to a graph
// would turn attention into NaNs.
func FloatToHalf(f float32) uint16 {
	if f > 65504 {
		f = 65504
	} else if f < -65504 {
		f = -65504
	}
	return half.FromFloat32(f)
}
