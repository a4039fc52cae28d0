//go:build !purego && (amd64 || arm64)

package scan

// Native reports whether the scans run assembly kernels (on amd64, only
// with AVX2 and POPCNT).
var Native = native

// The kernels (scan_amd64.s, scan_arm64.s) take whole blocks of blockF32
// floats or block16 16-bit elements and return an index j such that no
// element before j matches: the match itself on amd64, the start of the
// block holding it on arm64, or the end of the last whole block. The Go
// loop goes on from j.

// The kernels, in scan_amd64.s and scan_arm64.s. lut is the gathers'
// compress table on amd64 (nil on arm64, whose gathers take none).

//go:noescape
func indexGEF32(x []float32, t float32) int

//go:noescape
func indexGEU16(x []uint16, t uint16) int

//go:noescape
func indexGES16(x []uint16, t int16) int

//go:noescape
func indexLEU16(x []uint16, t uint16) int

//go:noescape
func indexEq16(x []uint16, a, b uint16) int

//go:noescape
func gatherGEF32(x []float32, t float32, out []int32, lut *[256][8]int32) (i, n int)

//go:noescape
func gatherGEU16(x []uint16, t uint16, out []int32, lut *[256][8]int32) (i, n int)

//go:noescape
func gatherGES16(x []uint16, t int16, out []int32, lut *[256][8]int32) (i, n int)

//go:noescape
func gatherLEU16(x []uint16, t uint16, out []int32, lut *[256][8]int32) (i, n int)

// IndexGEF32 returns the first i where x[i] < t is false (x[i] ≥ t, or a
// NaN in x[i] or t), or len(x).
func IndexGEF32(x []float32, t float32) int {
	i := 0
	if native && len(x) >= blockF32 {
		i = indexGEF32(x, t)
	}
	return indexGEGo(x, i, t)
}

// IndexGEU16 returns the first i with x[i] ≥ t, or len(x).
func IndexGEU16(x []uint16, t uint16) int {
	i := 0
	if native && len(x) >= block16 {
		i = indexGEU16(x, t)
	}
	return indexGEGo(x, i, t)
}

// IndexGEHalf returns the first i with HalfKey(x[i]) ≥ k, or len(x).
func IndexGEHalf(x []uint16, k uint16) int {
	i := 0
	switch {
	case !native || len(x) < block16:
	case k >= 0x8000:
		i = indexGES16(x, halfGE(k))
	default:
		i = indexLEU16(x, halfLE(k))
	}
	return indexGEHalfGo(x, i, k)
}

// IndexEq16 returns the first i with x[i] == a or x[i] == b, or len(x).
func IndexEq16(x []uint16, a, b uint16) int {
	i := 0
	if native && len(x) >= block16 {
		i = indexEq16(x, a, b)
	}
	return indexEq16Go(x, i, a, b)
}

// The gather kernels return the elements they took (whole blocks) and the
// indices they wrote.

// GatherGEF32 writes to out, in order, the indices i where x[i] < t is
// false, and returns their number. out must have room for len(x).
func GatherGEF32(x []float32, t float32, out []int32) int {
	out = out[:len(x)]
	i, n := 0, 0
	if native && len(x) >= blockF32 {
		i, n = gatherGEF32(x, t, out, lut)
	}
	return gatherGEGo(x, i, t, out, n)
}

// GatherGEU16 writes to out, in order, the indices i with x[i] ≥ t, and
// returns their number. out must have room for len(x).
func GatherGEU16(x []uint16, t uint16, out []int32) int {
	out = out[:len(x)]
	i, n := 0, 0
	if native && len(x) >= block16 {
		i, n = gatherGEU16(x, t, out, lut)
	}
	return gatherGEGo(x, i, t, out, n)
}

// GatherGEHalf writes to out, in order, the indices i with HalfKey(x[i]) ≥
// k, and returns their number. out must have room for len(x).
func GatherGEHalf(x []uint16, k uint16, out []int32) int {
	out = out[:len(x)]
	i, n := 0, 0
	switch {
	case !native || len(x) < block16:
	case k >= 0x8000:
		i, n = gatherGES16(x, halfGE(k), out, lut)
	default:
		i, n = gatherLEU16(x, halfLE(k), out, lut)
	}
	return gatherGEHalfGo(x, i, k, out, n)
}

// countBlock is the granularity at which the counts choose between
// gathering the matches first (few match: only they are counted) and
// counting every element (many match: no test per element). Once a block
// had many matches, the rest is counted whole.
const countBlock = 4096

// CountGEU16 adds one to cnt[x[i]] for every x[i] ≥ t (the code histogram
// of the elements at or above a threshold), or, when it reports all, for
// every x[i]: it may count everything where that is cheaper than testing.
func CountGEU16(x []uint16, t uint16, cnt *[1 << 16]uint32) (all bool) {
	return count(x, t, false, cnt)
}

// CountGEHalf is CountGEU16 for the elements with HalfKey(x[i]) ≥ k.
func CountGEHalf(x []uint16, k uint16, cnt *[1 << 16]uint32) (all bool) {
	return count(x, k, true, cnt)
}

// count is CountGEU16 (half false) and CountGEHalf (half true).
func count(x []uint16, t uint16, half bool, cnt *[1 << 16]uint32) (all bool) {
	if !native {
		countGo(x, cnt)
		return true
	}
	var idx [countBlock]int32
	for lo := 0; lo < len(x); lo += countBlock {
		b := x[lo:min(lo+countBlock, len(x))]
		if all {
			countGo(b, cnt)
			continue
		}
		var n int
		if half {
			n = GatherGEHalf(b, t, idx[:])
		} else {
			n = GatherGEU16(b, t, idx[:])
		}
		for _, i := range idx[:n] {
			cnt[b[i]]++
		}
		if n*4 > len(b) && lo+len(b) < len(x) {
			// many matched: count the rest whole (which then includes
			// what lies below t)
			all = true
		}
	}
	return all
}
