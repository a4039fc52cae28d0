package sample

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/hexserve/hexserve/internal/half"
)

// TestCollect checks the one-pass collectors against a brute-force filter
// for every logit type, with and without skipped ids and floors.
func TestCollect(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	const V = 20000
	for trial := range 60 {
		x := randLogits(r, V, 1+float64(trial%4))
		if trial%5 == 0 { // a late, high maximum: the first blocks are dense
			x[V-7] = 30
		}
		var skip []uint64
		if trial%2 == 1 {
			skip = make([]uint64, (V+63)/64)
			for range 300 {
				set(skip, int32(r.IntN(V)))
			}
		}
		delta := []float32{0.5, 5, 14, 40}[trial%4]
		floor := float32(math.Inf(-1))
		if trial%3 == 1 {
			floor = float32(r.NormFloat64())
		}
		u16 := Logits{Type: U16, Raw16: make([]uint16, V), Scale: 0.002, Offset: -20000}
		for i, v := range x {
			u16.Raw16[i] = uint16(min(max(float64(v)/0.002+20000, 0), 65535))
		}
		for _, l := range []Logits{f32(x), toF16(x), u16, {Type: U16, Raw16: u16.Raw16, Scale: -0.002, Offset: -40000}} {
			got, m := collect(l, delta, floor, skip, nil)
			wm := float32(math.Inf(-1))
			for i := range V {
				if !skipped(skip, i) {
					wm = max(wm, l.At(i))
				}
			}
			if m != wm {
				t.Fatalf("trial %d %v: max %v, want %v", trial, l.Type, m, wm)
			}
			var want []int32
			for i := range V {
				if v := l.At(i); !skipped(skip, i) && v >= max(floor, wm-delta) {
					want = append(want, int32(i))
				}
			}
			if len(got) != len(want) {
				t.Fatalf("trial %d %v: %d collected, want %d", trial, l.Type, len(got), len(want))
			}
			for i, c := range got {
				if c.id != want[i] || c.v != l.At(int(c.id)) {
					t.Fatalf("trial %d %v: #%d = %+v, want id %d", trial, l.Type, i, c, want[i])
				}
			}
		}
	}
}

// TestU16Ceil checks u16Ceil against a binary search over all codes, for
// values at, next to and between codes, out of range and not finite.
func TestU16Ceil(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, q := range []struct {
		scale  float32
		offset int32
	}{{0.001, -30000}, {0.00068, -32768}, {0.5, -0x8000}, {1e-6, 0}, {100, -65535}, {0.001, 700000}, {3e-5, -1 << 30}} {
		l := Logits{Type: U16, Scale: q.scale, Offset: q.offset}
		vs := []float32{float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.NaN()), 0,
			u16Val(l, 0) - 1, u16Val(l, 0xffff) + 1, -math.MaxFloat32, math.MaxFloat32}
		for range 3000 {
			v := u16Val(l, r.IntN(1<<16))
			vs = append(vs, v, math.Nextafter32(v, float32(math.Inf(1))), math.Nextafter32(v, float32(math.Inf(-1))),
				v+q.scale*r.Float32())
		}
		for _, v := range vs {
			want := sort.Search(1<<16, func(c int) bool { return u16Val(l, c) >= v })
			if got := u16Ceil(l, v); got != want {
				t.Fatalf("scale %v offset %d: u16Ceil(%v) = %d, want %d", q.scale, q.offset, v, got, want)
			}
		}
	}
}

// TestHalfKeyCeil compares halfKeyCeil with a binary search over the keys,
// at every half value, just beside each, and at special values.
func TestHalfKeyCeil(t *testing.T) {
	search := func(x float32) int {
		lo, hi := keyNegInf, keyPosInf+1
		for lo < hi {
			mid := (lo + hi) / 2
			if half.ToFloat32(keyHalf(mid)) >= x {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		return lo
	}
	xs := []float32{0, float32(math.Copysign(0, -1)), 1e-10, -1e-10, 65504, 65505, 65519, 65520, 1e9, -1e9,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for k := keyNegInf; k <= keyPosInf; k++ {
		v := half.ToFloat32(keyHalf(k))
		xs = append(xs, v, math.Nextafter32(v, float32(math.Inf(1))), math.Nextafter32(v, float32(math.Inf(-1))))
	}
	for _, x := range xs {
		if got, want := halfKeyCeil(x), search(x); got != want {
			t.Fatalf("halfKeyCeil(%v) = %#x, want %#x", x, got, want)
		}
	}
}
