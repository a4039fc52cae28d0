package graphio

import (
	"math"
	"testing"

	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/internal/half"
)

func TestFloatToHalf(t *testing.T) {
	tests := []struct {
		in   float32
		want uint16
	}{
		{0, 0},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{65504, 0x7bff},
		{65520, 0x7bff},                    // would round to inf: saturates
		{float32(math.Inf(1)), 0x7bff},     // saturates
		{float32(math.Inf(-1)), 0xfbff},    // saturates
		{1 + 1.0/2048, 0x3c00},             // tie → even (down)
		{1 + 3.0/2048, 0x3c02},             // tie → even (up)
		{1 + 1.0/2048 + 1.0/65536, 0x3c01}, // above the tie
		{5.960464477539063e-08, 0x0001},    // smallest subnormal
		{2.9802322387695312e-08, 0x0000},   // half of it: tie → even (0)
		{8.940696716308594e-08, 0x0002},    // 1.5 × smallest: tie → even (2)
		{6.097555160522461e-05, 0x03ff},    // largest subnormal
		{6.103515625e-05, 0x0400},          // smallest normal
		{0.1, 0x2e66},
	}
	for _, tt := range tests {
		if got := FloatToHalf(tt.in); got != tt.want {
			t.Errorf("FloatToHalf(%g) = %#04x, want %#04x", tt.in, got, tt.want)
		}
	}
	if h := FloatToHalf(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("NaN → %#04x", h)
	}
	// Every finite half round-trips exactly.
	for h := range uint32(0x10000) {
		if h&0x7c00 == 0x7c00 {
			continue
		}
		if got := FloatToHalf(half.ToFloat32(uint16(h))); got != uint16(h) {
			t.Fatalf("round trip %#04x → %g → %#04x", h, half.ToFloat32(uint16(h)), got)
		}
	}
}

func TestElemTypeRoundTrip(t *testing.T) {
	vals := []float32{-3, -1.5, -0.01, 0, 0.26, 1, 2.5, 100}
	tests := []struct {
		name string
		et   Elem
		want []float32 // decoded values
	}{
		{"f32", Elem{Type: qnn.Float32}, vals},
		{"f16", Elem{Type: qnn.Float16}, []float32{-3, -1.5, -0.010002136, 0, 0.26000977, 1, 2.5, 100}},
		// ufixed16, scale 1/1024, offset -32768: range [-32, 32).
		{"ufixed16", Elem{Type: qnn.UFixed16, Scale: 1.0 / 1024, Offset: -32768},
			[]float32{-3, -1.5, -0.009765625, 0, 0.259765625, 1, 2.5, 32767.0 / 1024}},
		{"sfixed16", Elem{Type: qnn.SFixed16, Scale: 1.0 / 256},
			[]float32{-3, -1.5, -0.01171875, 0, 0.26171875, 1, 2.5, 100}},
		// ufixed8, scale 0.5, offset -4: range [-2, 125.5].
		{"ufixed8", Elem{Type: qnn.UFixed8, Scale: 0.5, Offset: -4},
			[]float32{-2, -1.5, 0, 0, 0.5, 1, 2.5, 100}},
		{"sfixed8", Elem{Type: qnn.SFixed8, Scale: 0.25},
			[]float32{-3, -1.5, 0, 0, 0.25, 1, 2.5, 31.75}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewElem(tt.et.Type, qnn.Quant{Scale: tt.et.Scale, Offset: tt.et.Offset}); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, len(vals)*tt.et.Size())
			tt.et.Put(buf, vals)
			got := make([]float32, len(vals))
			tt.et.Get(got, buf)
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("%g → %g, want %g", vals[i], got[i], tt.want[i])
				}
			}
		})
	}
	if _, err := NewElem(qnn.BFloat16, qnn.Quant{}); err == nil {
		t.Error("bfloat16 accepted")
	}
	if _, err := NewElem(qnn.UFixed16, qnn.Quant{}); err == nil {
		t.Error("ufixed16 with scale 0 accepted")
	}
}
