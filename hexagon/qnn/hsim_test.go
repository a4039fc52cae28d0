package qnn

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// lmHeadModel is a one-graph hostsim context binary ("HSIM" v1, see
// hexagon/hostsim/FORMAT.md): an lm-head graph "lmhead" computing
// logits[1,V] = x[1,H] · Wᵀ with float32 I/O and float32 weights, so tests
// can check results exactly.
type lmHeadModel struct {
	H, V int
	W    []float32 // V×H, row-major
	// XType/YType are the I/O data types (Float32 unless set).
	XType, YType DataType
	XQuant       [2]float32 // scale, offset for fixed-point x
}

func newLMHeadModel(h, v int, seed uint64) *lmHeadModel {
	rng := rand.New(rand.NewPCG(seed, 1))
	m := &lmHeadModel{H: h, V: v, W: make([]float32, h*v), XType: Float32, YType: Float32}
	for i := range m.W {
		m.W[i] = float32(rng.NormFloat64())
	}
	return m
}

// logits is the reference result for x.
func (m *lmHeadModel) logits(x []float32) []float32 {
	out := make([]float32, m.V)
	for r := range m.V {
		var s float64
		for c := range m.H {
			s += float64(m.W[r*m.H+c]) * float64(x[c])
		}
		out[r] = float32(s)
	}
	return out
}

// write writes the binary into dir and returns its path.
func (m *lmHeadModel) write(t testing.TB, dir string) string {
	t.Helper()
	le := binary.LittleEndian
	var b []byte
	u32 := func(v uint32) { b = le.AppendUint32(b, v) }
	u64 := func(v uint64) { b = le.AppendUint64(b, v) }
	str := func(s string) {
		u32(uint32(len(s)))
		b = append(b, s...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	tensor := func(name string, dt DataType, scale float32, offset int32, dims ...uint32) {
		str(name)
		u32(uint32(dt))
		u32(math.Float32bits(scale))
		u32(uint32(offset))
		u32(uint32(len(dims)))
		for _, d := range dims {
			u32(d)
		}
	}
	b = append(b, "HSIMCTX\x00"...)
	u32(1)                             // version
	u32(128)                           // header size
	u32(uint32(m.H))                   // hidden
	u32(1)                             // layers
	u32(1)                             // heads
	u32(1)                             // kv heads
	u32(uint32(m.H))                   // head dim
	u32(uint32(m.H))                   // ffn
	u32(uint32(m.V))                   // vocab
	u32(16)                            // ctx
	u32(math.Float32bits(1e-5))        // rms eps
	u32(0)                             // flags
	u32(1)                             // graphs
	u32(1)                             // weights
	u64(128)                           // graph section
	idxAt := len(b)                    //
	u64(0)                             // weight index offset (patched)
	dataAt := len(b)                   //
	u64(0)                             // first weight byte (patched)
	sizeAt := len(b)                   //
	u64(0)                             // file size (patched)
	b = append(b, make([]byte, 32)...) // reserved
	if len(b) != 128 {
		t.Fatalf("header is %d bytes", len(b))
	}
	str("lmhead")
	u32(2)      // kind lmhead
	u32(0)      // contract
	u32(1)      // window
	u32(0)      // mask encoding
	u32(0x0232) // kv type
	u32(1)
	u32(1)
	tensor("x", m.XType, m.XQuant[0], int32(m.XQuant[1]), 1, uint32(m.H))
	tensor("logits", m.YType, 0, 0, 1, uint32(m.V))
	le.PutUint64(b[idxAt:], uint64(len(b)))
	str("lm_head.weight")
	u32(3) // float32
	u32(uint32(m.V))
	u32(uint32(m.H))
	wOffAt := len(b)
	u64(0) // data offset (patched)
	u64(uint64(4 * len(m.W)))
	u64(0) // scales
	for len(b)%64 != 0 {
		b = append(b, 0)
	}
	le.PutUint64(b[dataAt:], uint64(len(b)))
	le.PutUint64(b[wOffAt:], uint64(len(b)))
	for _, w := range m.W {
		u32(math.Float32bits(w))
	}
	le.PutUint64(b[sizeAt:], uint64(len(b)))
	p := filepath.Join(dir, "lmhead.bin")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
