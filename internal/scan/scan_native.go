//go:build !purego && (amd64 || arm64)

package scan

// Native reports whether the scans run assembly kernels (on amd64, only
// with AVX2).
var Native = native

// The kernels (scan_amd64.s, scan_arm64.s) take whole blocks of blockF32
// floats or block16 16-bit elements and return an index j such that no
// element before j matches: the match itself on amd64, the start of the
// block holding it on arm64, or the end of the last whole block. The Go
// loop goes on from j.

// IndexGEF32 returns the first i where x[i] < t is false (x[i] ≥ t, or a
// NaN in x[i] or t), or len(x).
func IndexGEF32(x []float32, t float32) int {
	i := 0
	if native && len(x) >= blockF32 {
		i = indexGEF32(x, t)
	}
	return indexGEF32Go(x, i, t)
}

// IndexGEU16 returns the first i with x[i] ≥ t, or len(x).
func IndexGEU16(x []uint16, t uint16) int {
	i := 0
	if native && len(x) >= block16 {
		i = indexGEU16(x, t)
	}
	return indexGEU16Go(x, i, t)
}

// IndexGEHalf returns the first i with HalfKey(x[i]) ≥ k, or len(x).
func IndexGEHalf(x []uint16, k uint16) int {
	i := 0
	if native && len(x) >= block16 {
		// the kernels compare HalfKey(h) ^ 0x8000 = h ^ (h>>15 & 0x7fff)
		// as int16
		i = indexGEHalf(x, int16(k^0x8000))
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
