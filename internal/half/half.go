// Package half converts between float32 and IEEE 754 binary16 ("half
// precision", float16) bit patterns.
package half

import "math"

// ToFloat32 returns the float32 value of the binary16 bits h. Every half
// value is exact in float32; NaN payloads are kept.
func ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: mant × 2^-24, exact in float32
		f := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// FromFloat32 returns the binary16 bits nearest to f, ties to even.
// Values beyond the half range become ±Inf; every NaN becomes the quiet
// NaN 0x7e00 with f's sign.
func FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Subnormal half or zero: m × 2^-24 with m rounded. Below half
		// the smallest subnormal (and every float32 subnormal) is ±0.
		if e < -10 {
			return sign
		}
		m := mant | 0x800000
		shift := uint32(14 - e)
		r := m >> shift
		rem := m & (1<<shift - 1)
		if mid := uint32(1) << (shift - 1); rem > mid || (rem == mid && r&1 == 1) {
			r++ // a carry into bit 10 is the smallest normal, as it should be
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | mant>>13
	if rem := mant & 0x1fff; rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++ // may carry into the exponent (up to Inf), which is the correct rounding
	}
	return sign | uint16(r)
}
