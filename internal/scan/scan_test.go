package scan

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The naive scans: one element at a time, the definitions the kernels and
// the Go forms must both meet.

func naiveGEF32(x []float32, t float32) int {
	for i, v := range x {
		if !(v < t) {
			return i
		}
	}
	return len(x)
}

func naiveGEU16(x []uint16, t uint16) int {
	for i, v := range x {
		if v >= t {
			return i
		}
	}
	return len(x)
}

func naiveGEHalf(x []uint16, k uint16) int {
	for i, v := range x {
		if HalfKey(v) >= k {
			return i
		}
	}
	return len(x)
}

func naiveEq16(x []uint16, a, b uint16) int {
	for i, v := range x {
		if v == a || v == b {
			return i
		}
	}
	return len(x)
}

func naiveGather[T any](x []T, match func(T) bool) []int32 {
	var out []int32
	for i, v := range x {
		if match(v) {
			out = append(out, int32(i))
		}
	}
	return out
}

// checkGather compares the gathers of x with the naive ones.
// prefix shortens a long index list for a message.
func prefix(x []int32) []int32 { return x[:min(len(x), 40)] }

func checkGather(t *testing.T, name string, x32 []float32, x16 []uint16, v32 float32, v16 uint16) {
	t.Helper()
	out := make([]int32, max(len(x32), len(x16)))
	if n, want := GatherGEF32(x32, v32, out), naiveGather(x32, func(v float32) bool { return !(v < v32) }); !slices.Equal(out[:n], want) {
		t.Fatalf("%s: GatherGEF32(len %d, %v) = %v, want %v", name, len(x32), v32, prefix(out[:n]), prefix(want))
	}
	if n, want := GatherGEU16(x16, v16, out), naiveGather(x16, func(v uint16) bool { return v >= v16 }); !slices.Equal(out[:n], want) {
		t.Fatalf("%s: GatherGEU16(len %d, %#x) = %v, want %v", name, len(x16), v16, prefix(out[:n]), prefix(want))
	}
	if n, want := GatherGEHalf(x16, v16, out), naiveGather(x16, func(v uint16) bool { return HalfKey(v) >= v16 }); !slices.Equal(out[:n], want) {
		t.Fatalf("%s: GatherGEHalf(len %d, %#x) = %v, want %v", name, len(x16), v16, prefix(out[:n]), prefix(want))
	}
}

// checkCount compares the code counts of x with the naive ones (all of x
// where a count reports all), counting into tables that start at zero
// (counted twice: the second pass adds to the first), and zeroes them again.
func checkCount(t *testing.T, name string, x []uint16, v uint16) {
	t.Helper()
	for _, c := range []struct {
		name  string
		count func([]uint16, uint16, *[1 << 16]uint32) bool
		match func(uint16) bool
	}{
		{"CountGEU16", CountGEU16, func(h uint16) bool { return h >= v }},
		{"CountGEHalf", CountGEHalf, func(h uint16) bool { return HalfKey(h) >= v }},
	} {
		all := c.count(x, v, gotCnt)
		all2 := c.count(x, v, gotCnt)
		if all != all2 {
			t.Fatalf("%s: %s(len %d, %#x) reported all %v, then %v", name, c.name, len(x), v, all, all2)
		}
		for _, h := range x {
			if all || c.match(h) {
				wantCnt[h] += 2
			}
		}
		for _, h := range x {
			if gotCnt[h] != wantCnt[h] {
				t.Fatalf("%s: %s(len %d, %#x) (all %v): code %#x counted %d, want %d", name, c.name, len(x), v, all, h, gotCnt[h], wantCnt[h])
			}
		}
		for _, h := range x {
			gotCnt[h], wantCnt[h] = 0, 0
		}
	}
}

// The count tables of checkCount.
var gotCnt, wantCnt = new([1 << 16]uint32), new([1 << 16]uint32)

// checkAll compares every scan of x (and of its unaligned tails) with the
// naive one, for the thresholds ts.
func checkAll(t *testing.T, name string, x32 []float32, x16 []uint16, ts32 []float32, ts16 []uint16) {
	t.Helper()
	for off := range min(3, len(x16)+1) {
		y16 := x16[off:]
		for _, v := range ts16 {
			if got, want := IndexGEU16(y16, v), naiveGEU16(y16, v); got != want {
				t.Fatalf("%s: IndexGEU16(x[%d:] (len %d), %#x) = %d, want %d", name, off, len(y16), v, got, want)
			}
			if got, want := IndexGEHalf(y16, v), naiveGEHalf(y16, v); got != want {
				t.Fatalf("%s: IndexGEHalf(x[%d:] (len %d), %#x) = %d, want %d", name, off, len(y16), v, got, want)
			}
			w := ts16[int(v)%len(ts16)]
			if got, want := IndexEq16(y16, v, w), naiveEq16(y16, v, w); got != want {
				t.Fatalf("%s: IndexEq16(x[%d:] (len %d), %#x, %#x) = %d, want %d", name, off, len(y16), v, w, got, want)
			}
			checkGather(t, name, nil, y16, 0, v)
			if got, want := indexGEGo(y16, 0, v), naiveGEU16(y16, v); got != want {
				t.Fatalf("%s: indexGEGo = %d, want %d", name, got, want)
			}
			if got, want := indexGEHalfGo(y16, 0, v), naiveGEHalf(y16, v); got != want {
				t.Fatalf("%s: indexGEHalfGo = %d, want %d", name, got, want)
			}
		}
	}
	for off := range min(3, len(x32)+1) {
		y32 := x32[off:]
		for _, v := range ts32 {
			if got, want := IndexGEF32(y32, v), naiveGEF32(y32, v); got != want {
				t.Fatalf("%s: IndexGEF32(x[%d:] (len %d), %v) = %d, want %d", name, off, len(y32), v, got, want)
			}
			checkGather(t, name, y32, nil, v, 0)
			if got, want := indexGEGo(y32, 0, v), naiveGEF32(y32, v); got != want {
				t.Fatalf("%s: indexGEGo = %d, want %d", name, got, want)
			}
		}
	}
}

// thresholds picks thresholds from x (each hit exactly and just missed) and
// the extremes.
func thresholds(r *rand.Rand, x32 []float32, x16 []uint16) ([]float32, []uint16) {
	inf := float32(math.Inf(1))
	ts32 := []float32{-inf, inf, float32(math.NaN()), 0, float32(math.Copysign(0, -1)), math.MaxFloat32, -math.SmallestNonzeroFloat32}
	ts16 := []uint16{0, 1, 0x7fff, 0x8000, 0x8001, 0xfc00, 0xfc01, 0xffff}
	for range 6 {
		if len(x32) > 0 {
			v := x32[r.IntN(len(x32))]
			ts32 = append(ts32, v, math.Nextafter32(v, inf), math.Nextafter32(v, -inf))
		}
		if len(x16) > 0 {
			v := x16[r.IntN(len(x16))]
			ts16 = append(ts16, v, v+1, v-1, HalfKey(v), HalfKey(v)+1)
		}
	}
	return ts32, ts16
}

// TestScans checks the scans and gathers against the naive loops over random, peaked
// (one high element late), flat and special-value inputs of every length up
// to a few blocks, at three alignments.
func TestScans(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	specials32 := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, math.MaxFloat32, -math.MaxFloat32}
	specials16 := []uint16{0, 0x8000, 0x7c00, 0xfc00, 0x7c01, 0x7fff, 0xfc01, 0xffff, 1, 0x8001, 0x7bff, 0xfbff}
	kinds := []string{"random", "peaked", "flat", "specials"}
	maxLen := 300
	if testing.Short() {
		maxLen = 140
	}
	for n := 0; n <= maxLen; n++ {
		for _, kind := range kinds {
			x32, x16 := make([]float32, n), make([]uint16, n)
			for i := range n {
				switch kind {
				case "random":
					x32[i], x16[i] = float32(r.NormFloat64()*4), uint16(r.Uint32())
				case "peaked":
					x32[i], x16[i] = float32(r.NormFloat64()), uint16(0x3c00+r.IntN(64)) // halves near 1
				case "flat":
					x32[i], x16[i] = 1.5, 0x3e00
				case "specials":
					x32[i], x16[i] = specials32[r.IntN(len(specials32))], specials16[r.IntN(len(specials16))]
				}
			}
			if kind == "peaked" && n > 0 {
				j := n - 1 - r.IntN(min(n, 40))
				x32[j], x16[j] = 30, 0x4f00
			}
			ts32, ts16 := thresholds(r, x32, x16)
			checkAll(t, kind, x32, x16, ts32, ts16)
			for _, v := range ts16[len(ts16)-4:] {
				checkCount(t, kind, x16, v)
			}
		}
	}
}

// TestScansVocab: a Llama-3-sized vocabulary with the match at every
// position of a block, near the end and nowhere.
func TestScansVocab(t *testing.T) {
	const V = 128256
	x32, x16 := make([]float32, V), make([]uint16, V)
	for i := range V {
		x32[i], x16[i] = -1, 0x3c00 // 1.0
	}
	ats := []int{0, 1, 7, 8, 31, 32, 63, 64, 65, 4095, V - 65, V - 33, V - 1, V}
	if testing.Short() {
		ats = []int{0, 65, V - 33, V}
	}
	for _, at := range ats {
		if at < V {
			x32[at], x16[at] = 2, 0x4000 // 2.0
		}
		checkAll(t, "vocab", x32, x16, []float32{0, 2, -1}, []uint16{0x4000, 0xc000 ^ 0xffff, HalfKey(0x4000)})
		checkGather(t, "vocab", x32, x16, 2, HalfKey(0x4000))
		checkCount(t, "vocab", x16, HalfKey(0x4000))
		checkCount(t, "vocab", x16, 0x3c00)
		if at < V {
			x32[at], x16[at] = -1, 0x3c00
		}
	}
}

// FuzzScans compares the scans and gathers (assembly where built) with the naive loops
// on arbitrary bytes, read as float32 and as 16-bit elements.
func FuzzScans(f *testing.F) {
	f.Add([]byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40}, uint32(0x3f800000), uint16(0x3c00), uint16(0x4000), uint8(1))
	f.Add(make([]byte, 300), uint32(0x7fc00000), uint16(0), uint16(0xffff), uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, t32 uint32, a, c uint16, off uint8) {
		x32 := make([]float32, len(b)/4)
		for i := range x32 {
			x32[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		x16 := make([]uint16, len(b)/2)
		for i := range x16 {
			x16[i] = binary.LittleEndian.Uint16(b[2*i:])
		}
		o := int(off) % 3
		x32, x16 = x32[min(o, len(x32)):], x16[min(o, len(x16)):]
		v := math.Float32frombits(t32)
		if got, want := IndexGEF32(x32, v), naiveGEF32(x32, v); got != want {
			t.Fatalf("IndexGEF32(%v, %v) = %d, want %d", x32, v, got, want)
		}
		if got, want := IndexGEU16(x16, a), naiveGEU16(x16, a); got != want {
			t.Fatalf("IndexGEU16(%v, %d) = %d, want %d", x16, a, got, want)
		}
		if got, want := IndexGEHalf(x16, a), naiveGEHalf(x16, a); got != want {
			t.Fatalf("IndexGEHalf(%v, %#x) = %d, want %d", x16, a, got, want)
		}
		if got, want := IndexEq16(x16, a, c), naiveEq16(x16, a, c); got != want {
			t.Fatalf("IndexEq16(%v, %d, %d) = %d, want %d", x16, a, c, got, want)
		}
		checkGather(t, "fuzz", x32, x16, v, a)
		checkCount(t, "fuzz", x16, a)
	})
}
