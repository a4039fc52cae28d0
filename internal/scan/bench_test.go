package scan

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkScans scans a Llama-3-sized vocabulary with no match (the whole
// vector is read): compare with -tags purego for the Go forms.
func BenchmarkScans(b *testing.B) {
	const V = 128256
	x32, x16 := make([]float32, V), make([]uint16, V)
	b.Logf("native kernels: %v", Native)
	b.Run("GEF32", func(b *testing.B) {
		b.SetBytes(4 * V)
		for b.Loop() {
			IndexGEF32(x32, 1)
		}
	})
	b.Run("GEU16", func(b *testing.B) {
		b.SetBytes(2 * V)
		for b.Loop() {
			IndexGEU16(x16, 1)
		}
	})
	b.Run("GEHalf", func(b *testing.B) {
		b.SetBytes(2 * V)
		for b.Loop() {
			IndexGEHalf(x16, 0x8001)
		}
	})
	ninf := make([]uint16, V)
	for i := range ninf {
		ninf[i] = 0xfc00 // -Inf
	}
	b.Run("GEHalf/negative", func(b *testing.B) { // a threshold below zero: -1
		b.SetBytes(2 * V)
		for b.Loop() {
			IndexGEHalf(ninf, HalfKey(0xbc00))
		}
	})
	out := make([]int32, V)
	for i := range V / 10 { // a tenth of the elements pass
		x16[i*10] = 0x5000
	}
	b.Run("GatherGEHalf/tenth", func(b *testing.B) {
		b.SetBytes(2 * V)
		for b.Loop() {
			GatherGEHalf(x16, HalfKey(0x5000), out)
		}
	})
	b.Run("Eq16", func(b *testing.B) {
		b.SetBytes(2 * V)
		for b.Loop() {
			IndexEq16(x16, 1, 2)
		}
	})
}

// BenchmarkHistF32 buckets a Llama-3-sized vocabulary of flat logits (every
// element within range: the sampler's worst case), of logits with most
// within range, and with a tenth (the branches of a kernel that tested each
// lane would mispredict most).
func BenchmarkHistF32(b *testing.B) {
	const V = 128256
	r := rand.New(rand.NewPCG(3, 3))
	acc, of := new(HistAcc), make([]uint16, V)
	const dS = 14
	for _, c := range []struct {
		name  string
		sigma float64
	}{{"flat", 1}, {"most", 2.5}, {"tenth", 4.5}} {
		x := make([]float32, V)
		top := float32(0)
		for i := range x {
			x[i] = float32(r.NormFloat64() * c.sigma)
			top = max(top, x[i])
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(4 * V)
			for b.Loop() {
				clear(acc[:])
				HistF32(x, top-dS, HistBuckets*65536/dS, acc, of)
			}
		})
	}
}
