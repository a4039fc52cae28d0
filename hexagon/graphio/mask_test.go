package graphio

import (
	"slices"
	"testing"

	"github.com/hexserve/hexserve/hexagon/qnn"
)

func TestMasks(t *testing.T) {
	f32 := Elem{Type: qnn.Float32}
	m, err := NewMask(f32, MaskAdditive)
	if err != nil {
		t.Fatal(err)
	}
	row := make([]float32, 5)
	m.Row(F32Bytes(row), 2, 5)
	if want := []float32{0, 0, Blocked, Blocked, Blocked}; !slices.Equal(row, want) {
		t.Errorf("decode row = %v, want %v", row, want)
	}
	// Chunked [2, 3+2]: past 3 slots with 1 open, then the causal window.
	c := make([]float32, 2*5)
	m.Causal(F32Bytes(c), 2, 3, 1)
	b := float32(Blocked)
	if want := []float32{0, b, b, 0, b, 0, b, b, 0, 0}; !slices.Equal(c, want) {
		t.Errorf("chunked mask = %v, want %v", c, want)
	}
	u, err := NewMask(Elem{Type: qnn.UFixed16, Scale: 1, Offset: 0}, MaskU16)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 2*3*3)
	u.Causal(raw, 3, 0, 0)
	if got, want := U16(raw), []uint16{65535, 0, 0, 65535, 65535, 0, 65535, 65535, 65535}; !slices.Equal(got, want) {
		t.Errorf("u16 causal = %v, want %v", got, want)
	}
	if _, err := NewMask(f32, MaskU16); err == nil {
		t.Error("u16 mask on a float32 tensor accepted")
	}
	h, _ := NewMask(Elem{Type: qnn.Float16}, MaskAdditive)
	if got := U16(h.blocked[:2])[0]; got != 0xfbff {
		t.Errorf("f16 blocked = %#04x, want -65504", got)
	}
}
