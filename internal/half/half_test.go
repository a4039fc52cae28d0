package half

import (
	"math"
	"testing"
)

func TestToFloat32(t *testing.T) {
	for _, tt := range []struct {
		h    uint16
		want float32
	}{
		{0x0000, 0},
		{0x3c00, 1},
		{0xc000, -2},
		{0x3555, 0.333251953125},
		{0x7bff, 65504},
		{0xfbff, -65504},
		{0x0400, 1.0 / (1 << 14)}, // smallest normal
		{0x0001, 1.0 / (1 << 24)}, // smallest subnormal
		{0x03ff, 1023.0 / (1 << 24)},
		{0x8001, -1.0 / (1 << 24)},
		{0x7c00, float32(math.Inf(1))},
		{0xfc00, float32(math.Inf(-1))},
	} {
		if got := ToFloat32(tt.h); got != tt.want {
			t.Errorf("ToFloat32(%#04x) = %g, want %g", tt.h, got, tt.want)
		}
	}
	if got := math.Float32bits(ToFloat32(0x8000)); got != 0x80000000 {
		t.Errorf("ToFloat32(0x8000) = %#08x, want -0", got)
	}
	for _, h := range []uint16{0x7e00, 0x7c01, 0xfe00, 0x7fff} {
		f := ToFloat32(h)
		if f == f || math.Float32bits(f)>>31 != uint32(h>>15) || math.Float32bits(f)>>13&0x3ff != uint32(h&0x3ff) {
			t.Errorf("ToFloat32(%#04x) = %#08x, want a NaN with the same sign and payload", h, math.Float32bits(f))
		}
	}
}

func TestFromFloat32(t *testing.T) {
	inf := float32(math.Inf(1))
	for _, tt := range []struct {
		name string
		f    float32
		want uint16
	}{
		{"zero", 0, 0x0000},
		{"minus zero", float32(math.Copysign(0, -1)), 0x8000},
		{"one", 1, 0x3c00},
		{"minus two", -2, 0xc000},
		{"third", 1.0 / 3, 0x3555},
		{"max", 65504, 0x7bff},
		{"below the overflow tie", 65519.99, 0x7bff},
		{"overflow tie to even", 65520, 0x7c00},
		{"overflow", 1e6, 0x7c00},
		{"negative overflow", -1e6, 0xfc00},
		{"inf", inf, 0x7c00},
		{"minus inf", -inf, 0xfc00},
		{"NaN", float32(math.NaN()), 0x7e00},
		{"smallest normal", 1.0 / (1 << 14), 0x0400},
		{"smallest subnormal", 1.0 / (1 << 24), 0x0001},
		{"half the smallest subnormal: tie to even 0", 1.0 / (1 << 25), 0x0000},
		{"above half the smallest subnormal", 1.0/(1<<25) + 1.0/(1<<35), 0x0001},
		{"1.5 smallest subnormals: tie to even 2", 1.5 / (1 << 24), 0x0002},
		{"subnormal rounds up to the smallest normal", 1023.5 / (1 << 24), 0x0400},
		{"float32 subnormal", math.Float32frombits(1), 0x0000},
		{"tie rounds down to even", 1 + 1.0/2048, 0x3c00},
		{"tie rounds up to even", 1 + 3.0/2048, 0x3c02},
		{"above a tie", 1 + 1.0/2048 + 1.0/(1<<20), 0x3c01},
		{"mantissa carry into the exponent", 2 - 1.0/4096, 0x4000},
	} {
		if got := FromFloat32(tt.f); got != tt.want {
			t.Errorf("%s: FromFloat32(%g) = %#04x, want %#04x", tt.name, tt.f, got, tt.want)
		}
	}
}

// Every half value survives the round trip, NaNs as some NaN of the same sign.
func TestRoundTrip(t *testing.T) {
	for h := range 1 << 16 {
		h := uint16(h)
		got := FromFloat32(ToFloat32(h))
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			if got != h&0x8000|0x7e00 {
				t.Fatalf("NaN %#04x → %#04x", h, got)
			}
			continue
		}
		if got != h {
			t.Fatalf("%#04x → %g → %#04x", h, ToFloat32(h), got)
		}
	}
}

// FromFloat32 picks the nearer of the two halves around f (ties to the even
// one), checked in float64 over a sweep of the finite half range.
func TestFromFloat32Nearest(t *testing.T) {
	for b := uint32(0); b <= math.Float32bits(65504); b += 4093 {
		f := math.Float32frombits(b)
		h := FromFloat32(f)
		got := float64(ToFloat32(h))
		for _, n := range []uint16{h - 1, h + 1} {
			if n&0x7fff > 0x7c00 || (h == 0 && n == 0xffff) {
				continue
			}
			other := float64(ToFloat32(n))
			d, od := math.Abs(got-float64(f)), math.Abs(other-float64(f))
			if od < d || (od == d && n&1 == 0) {
				t.Fatalf("FromFloat32(%g) = %#04x (%g); %#04x (%g) is nearer or the even tie", f, h, got, n, other)
			}
		}
	}
}
