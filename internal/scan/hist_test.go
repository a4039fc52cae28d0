package scan

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestHistF32 compares HistF32 (the kernel on amd64) and histGather with the
// one-element-at-a-time reference on logits of every kind: flat and peaked
// (both of histGather's paths), NaNs, infinities, values far above the top
// (clamped to the top bucket), exactly at thr and at bucket edges, and
// lengths that leave a tail to the Go loop. acc starts non-zero, as the
// sampler's does not, to show that the kernels only add.
func TestHistF32(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	gauss := func(n int, sigma float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64() * sigma)
		}
		return x
	}
	special := func(n int) []float32 {
		x := gauss(n, 3)
		odd := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, -0.0, 1e30, -1e30, 2, 2.0000002, 1.9999999, 3.4e38, 16, 22, 30, 16 + 0x1p-20}
		for i := range x {
			if r.IntN(4) == 0 {
				x[i] = odd[r.IntN(len(odd))]
			}
		}
		return x
	}
	const dS = 14 // a cutoff of 20 at temperature 0.7
	scale := float32(HistBuckets * 65536 / dS)
	cases := []struct {
		name string
		x    []float32
		thr  float32
	}{
		{"flat", gauss(128256, 1), 4.5 - dS},
		{"peaked", gauss(128256, 2.5), 9 - dS},
		{"mid", gauss(20000, 4.5), 10 - dS},
		{"special", special(4099), 2},
		{"none above", gauss(1000, 1), 50},
		{"short", gauss(7, 1), -3},
		{"empty", nil, 0},
	}
	for k := range 200 { // short and odd lengths, every threshold (the chunk and tail edges)
		n := r.IntN(700)
		cases = append(cases, struct {
			name string
			x    []float32
			thr  float32
		}{fmt.Sprintf("random %d", k), gauss(n, 0.5+3*r.Float64()), float32(r.NormFloat64() * 4)})
	}
	for _, c := range cases {
		for _, n := range []int{len(c.x), max(len(c.x)-3, 0)} {
			x := c.x[:n]
			want, got, gath := new(HistAcc), new(HistAcc), new(HistAcc)
			for _, a := range []*HistAcc{want, got, gath} {
				a[5], a[HistBuckets-1] = 1<<40|7, 3<<40|9
			}
			wantOf := make([]uint16, n)
			gotOf, gathOf := slices.Repeat([]uint16{0xbeef}, n), slices.Repeat([]uint16{0xbeef}, n)
			histF32Go(x, c.thr, scale, want, wantOf)
			HistF32(x, c.thr, scale, got, gotOf)
			histGather(x, c.thr, scale, gath, gathOf)
			for _, g := range []struct {
				name string
				acc  *HistAcc
				of   []uint16
			}{{"HistF32", got, gotOf}, {"histGather", gath, gathOf}} {
				if i := firstDiff(g.of, wantOf); i >= 0 {
					t.Fatalf("%s/%d: %s: of[%d] = %d, want %d (x %v)", c.name, n, g.name, i, g.of[i], wantOf[i], x[i])
				}
				if i := firstDiff(g.acc[:HistBuckets], want[:HistBuckets]); i >= 0 {
					t.Fatalf("%s/%d: %s: acc[%d] = %#x, want %#x", c.name, n, g.name, i, g.acc[i], want[i])
				}
			}
		}
	}
}

func firstDiff[T comparable](a, b []T) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestHistWeights compares HistWeights (the kernel on amd64) with its Go
// form, bit for bit, on histograms with empty, sparse and full buckets.
func TestHistWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	e := new([HistBuckets]float64)
	for b := range e {
		e[b] = math.Exp((float64(b)+0.5)*20/HistBuckets - 20)
	}
	const dw = 20.0 / HistBuckets
	k0, k1 := 1+dw*(0.5/65536-0.5), dw/65536
	for _, fill := range []float64{0, 0.01, 0.5, 1} {
		acc := new(HistAcc)
		for b := range HistBuckets {
			if r.Float64() < fill {
				c := uint64(r.IntN(1 << 17))
				acc[b] = c<<40 | uint64(r.Int64N(int64(c)*65536+1))
			}
		}
		var want, got [HistBuckets]float64
		var wantBlk, gotBlk [HistBuckets / 64]float64
		wn := histWeightsGo(acc, e, k0, k1, &want, &wantBlk)
		gn := HistWeights(acc, e, k0, k1, &got, &gotBlk)
		if gn != wn {
			t.Fatalf("fill %v: count %d, want %d", fill, gn, wn)
		}
		for b := range want {
			if math.Float64bits(got[b]) != math.Float64bits(want[b]) {
				t.Fatalf("fill %v: bw[%d] = %v, want %v", fill, b, got[b], want[b])
			}
		}
		for i := range wantBlk {
			if math.Float64bits(gotBlk[i]) != math.Float64bits(wantBlk[i]) {
				t.Fatalf("fill %v: blk[%d] = %v, want %v", fill, i, gotBlk[i], wantBlk[i])
			}
		}
	}
}
