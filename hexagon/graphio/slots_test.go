package graphio

import (
	"slices"
	"testing"

	"github.com/hexserve/hexserve/hexagon/qnn"
)

// ref is the element-by-element definition of Slots.Copy.
func ref(l Slots, dst []byte, dstride, start int, src []byte, sstride, from, n int) {
	for o := range l.Outer {
		for s := range n {
			for i := range l.Inner * l.ES {
				dst[((o*dstride+start+s)*l.Inner)*l.ES+i] = src[((o*sstride+from+s)*l.Inner)*l.ES+i]
			}
		}
	}
}

func TestSlotsCopy(t *testing.T) {
	tests := []struct {
		name             string
		l                Slots
		dstride, start   int
		sstride, from, n int
	}{
		{"qhexrt rows", Slots{1, 6, 2}, 10, 3, 4, 0, 4},
		{"transposed K, one slot, 1 byte", Slots{12, 1, 1}, 9, 5, 1, 0, 1},
		{"transposed K, one slot, 2 bytes", Slots{12, 1, 2}, 9, 5, 4, 2, 1},
		{"transposed K, one slot, 4 bytes", Slots{12, 1, 4}, 9, 8, 1, 0, 1},
		{"transposed K, one slot, 3 bytes", Slots{12, 1, 3}, 9, 0, 1, 0, 1},
		{"transposed K, a chunk", Slots{12, 1, 1}, 9, 2, 4, 0, 3},
		{"V heads", Slots{3, 4, 1}, 9, 6, 4, 0, 3},
		{"whole rows", Slots{3, 4, 2}, 4, 0, 4, 0, 4},
		{"gather one slot", Slots{5, 1, 1}, 1, 0, 7, 6, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := make([]byte, tt.l.Bytes(tt.sstride))
			for i := range src {
				src[i] = byte(i*7 + 1)
			}
			got, want := make([]byte, tt.l.Bytes(tt.dstride)), make([]byte, tt.l.Bytes(tt.dstride))
			tt.l.Copy(got, tt.dstride, tt.start, src, tt.sstride, tt.from, tt.n)
			ref(tt.l, want, tt.dstride, tt.start, src, tt.sstride, tt.from, tt.n)
			if !slices.Equal(got, want) {
				t.Errorf("got  %v\nwant %v", got, want)
			}
		})
	}
}

func TestSlotsRestride(t *testing.T) {
	for _, tc := range []struct{ from, to, keep int }{{8, 6, 5}, {6, 8, 5}, {8, 8, 3}, {7, 5, 5}} {
		l := Slots{Outer: 4, Inner: 2, ES: 2}
		b := make([]byte, l.Bytes(max(tc.from, tc.to)))
		for i := range b {
			b[i] = byte(i)
		}
		orig := slices.Clone(b)
		l.Restride(b, tc.from, tc.to, tc.keep)
		u := l.Inner * l.ES
		for o := range l.Outer {
			for s := range tc.keep {
				got := b[(o*tc.to+s)*u : (o*tc.to+s+1)*u]
				want := orig[(o*tc.from+s)*u : (o*tc.from+s+1)*u]
				if !slices.Equal(got, want) {
					t.Fatalf("%+v: row %d slot %d = %v, want %v", tc, o, s, got, want)
				}
			}
		}
	}
}

func TestPutInts(t *testing.T) {
	b := make([]byte, 12)
	if err := (Elem{Type: qnn.Int32}).PutInts(b, []int32{1, -2, 70000}); err != nil {
		t.Fatal(err)
	}
	if got := U32(b); got[0] != 1 || int32(got[1]) != -2 || got[2] != 70000 {
		t.Errorf("ids %v", got)
	}
	if err := (Elem{Type: qnn.Uint8}).PutInts(b, []int32{1}); err == nil {
		t.Error("ids into a uint8 tensor accepted")
	}
	// Raw integer types convert as values, saturating.
	for _, tc := range []struct {
		t    qnn.DataType
		in   float32
		want float32
	}{{qnn.Uint8, 300, 255}, {qnn.Uint8, -3, 0}, {qnn.Int8, -200, -128}, {qnn.Int32, -5.5, -6}, {qnn.Uint32, 7.4, 7}} {
		e, err := NewElem(tc.t, qnn.Quant{})
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, e.Size())
		e.Put(buf, []float32{tc.in})
		out := make([]float32, 1)
		e.Get(out, buf)
		if out[0] != tc.want {
			t.Errorf("%s: %g → %g, want %g", Name(tc.t), tc.in, out[0], tc.want)
		}
	}
}
