package qnn

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
)

// Test models are written with hostsim's own writer (hexagon/hostsim/simfile)
// into t.TempDir().

// f16 returns the float16 bits of v, which must be exactly representable
// (the test values are small multiples of powers of two).
func f16(v float32) uint16 {
	if v == 0 {
		return 0
	}
	b := math.Float32bits(v)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xFF) - 127 + 15
	return sign | uint16(exp)<<10 | uint16(b>>13&0x3FF)
}

// randomF16 fills n exactly representable values k/scale, |k| ≤ 8.
func randomF16(rng *rand.Rand, n int, scale float32) ([]uint16, []float32) {
	bits, vals := make([]uint16, n), make([]float32, n)
	for i := range n {
		vals[i] = float32(rng.IntN(17)-8) / scale
		bits[i] = f16(vals[i])
	}
	return bits, vals
}

// lmHeadModel is a one-graph binary: "lmhead" computes
// logits[1,V] = x[1,H] · Wᵀ with float32 weights, so results are exact.
type lmHeadModel struct {
	H, V  int
	W     []float32 // V×H row-major
	XType simfile.DType
	Scale float32 // fixed-point x only
	Off   int32
}

func newLMHeadModel(h, v int) *lmHeadModel {
	return &lmHeadModel{H: h, V: v, XType: simfile.F32}
}

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

func (m *lmHeadModel) write(t testing.TB, dir string) string {
	t.Helper()
	h := simfile.Hyper{Hidden: m.H, Layers: 1, Heads: 1, KVHeads: 1, HeadDim: m.H, FFN: m.H, Vocab: m.V, Ctx: 16, RMSEps: 1e-5}
	g := simfile.Graph{Name: "lmhead", Kind: simfile.LMHead, Window: 1, KV: simfile.F32,
		Inputs:  []simfile.Tensor{{Name: "x", DType: m.XType, Dims: []int{1, m.H}, Scale: m.Scale, Offset: m.Off}},
		Outputs: []simfile.Tensor{{Name: "logits", Role: simfile.RoleLogits, DType: simfile.F32, Dims: []int{1, m.V}}}}
	ws := simfile.WeightSpecs(h, false, true)
	rng := rand.New(rand.NewPCG(uint64(m.H), uint64(m.V)))
	ws[0].F16, m.W = randomF16(rng, m.H*m.V, 8)
	return writeModel(t, dir, "lmhead.bin", h, []simfile.Graph{g}, ws, simfile.WeightF32)
}

func writeModel(t testing.TB, dir, name string, h simfile.Hyper, gs []simfile.Graph, ws []simfile.Weight, f simfile.WeightFormat) string {
	t.Helper()
	p := filepath.Join(dir, name)
	out, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := simfile.Write(out, h, gs, ws, f); err != nil {
		t.Fatalf("simfile.Write: %v", err)
	}
	return p
}

// tinyLlama writes a random two-layer model with the default prefill
// (qhexrt, window 4), decode and lm-head graphs, f16 I/O and KV.
func tinyLlama(t testing.TB, dir string) (string, simfile.Hyper) {
	t.Helper()
	h := simfile.Hyper{Hidden: 16, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 8, FFN: 32, Vocab: 64, Ctx: 16, RMSEps: 1e-5}
	pre, dec, lm := simfile.DefaultGraphs(h, simfile.QHexRT, 4, simfile.F16, simfile.F16, simfile.MaskAdditive)
	ws := simfile.WeightSpecs(h, true, true)
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range ws {
		ws[i].F16, _ = randomF16(rng, ws[i].Rows*ws[i].Cols, 64)
		if ws[i].Rows == 1 { // norm weights: 1
			for j := range ws[i].F16 {
				ws[i].F16[j] = f16(1)
			}
		}
	}
	return writeModel(t, dir, "tiny.bin", h, []simfile.Graph{pre, dec, lm}, ws, simfile.WeightF16), h
}
