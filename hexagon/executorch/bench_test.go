package executorch

import (
	"testing"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/qnn"
)

// Host-side work of one decode token at Llama-3.2-3B's shape (28 layers, 8 KV heads of 128, CL
// 2048, uint8 KV, uint16 mask), in Go memory: the KV copy, the incremental mask, and the
// re-striding of a switch between prefill_forward (AR 128) and kv_forward.

func shape3B(b *testing.B, valid int) (*Runner, *method) {
	const layers, nkv, hd, cl, ar = 28, 8, 128, 2048, 1
	r := &Runner{layers: layers, nkv: nkv, hd: hd, cl: cl, es: 1, maxS: cl - 1, stride: cl - 1, valid: valid,
		kS: graphio.Slots{Outer: nkv * hd, Inner: 1, ES: 1}, vS: graphio.Slots{Outer: nkv, Inner: hd, ES: 1}}
	for range layers {
		r.k = append(r.k, make([]byte, nkv*hd*(cl-1)))
		r.v = append(r.v, make([]byte, nkv*hd*(cl-1)))
	}
	l := &layout{ar: ar, cl: cl, maskT: qnn.TensorInfo{Name: "m", DataType: qnn.UFixed16, Dims: []uint32{1, 1, ar, cl},
		Quant: qnn.Quant{Scale: 255.0 / 65535, Offset: -65535}}}
	m := &method{layout: l, open: -1}
	var err error
	if m.masks, err = graphio.NewMask(graphio.Elem{Type: qnn.UFixed16, Scale: 255.0 / 65535, Offset: -65535}, graphio.MaskAdditive); err != nil {
		b.Fatal(err)
	}
	for range layers {
		m.kOut = append(m.kOut, make([]byte, nkv*hd*ar))
		m.vOut = append(m.vOut, make([]byte, nkv*hd*ar))
	}
	return r, m
}

// BenchmarkDecodeHost is one decode token's KV copy and mask update.
func BenchmarkDecodeHost(b *testing.B) {
	r, m := shape3B(b, 1000)
	mask := make([]byte, 2*r.cl)
	m.writeMask(mask, 1000)
	pos := 1000
	b.ResetTimer()
	for range b.N {
		m.writeMask(mask, pos)
		r.copyKV(m, pos, 1)
		pos++
		if pos >= r.cl-1 {
			pos = 1000
			m.open = -1
		}
	}
}

// BenchmarkRestride is one switch each way between kv_forward (2047 slots per row) and
// prefill_forward (AR 128: 1920 slots) with 1000 valid slots.
func BenchmarkRestride(b *testing.B) {
	r, _ := shape3B(b, 1000)
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			r.restride(r.cl - 128)
		} else {
			r.restride(r.cl - 1)
		}
	}
}
