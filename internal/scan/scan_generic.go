//go:build purego || !(amd64 || arm64)

package scan

// Native reports whether the scans run assembly kernels.
const Native = false

// IndexGEF32 returns the first i where x[i] < t is false (x[i] ≥ t, or a
// NaN in x[i] or t), or len(x).
func IndexGEF32(x []float32, t float32) int { return indexGEGo(x, 0, t) }

// IndexGEU16 returns the first i with x[i] ≥ t, or len(x).
func IndexGEU16(x []uint16, t uint16) int { return indexGEGo(x, 0, t) }

// IndexGEHalf returns the first i with HalfKey(x[i]) ≥ k, or len(x).
func IndexGEHalf(x []uint16, k uint16) int { return indexGEHalfGo(x, 0, k) }

// IndexEq16 returns the first i with x[i] == a or x[i] == b, or len(x).
func IndexEq16(x []uint16, a, b uint16) int { return indexEq16Go(x, 0, a, b) }

// GatherGEF32 writes to out, in order, the indices i where x[i] < t is
// false, and returns their number. out must have room for len(x).
func GatherGEF32(x []float32, t float32, out []int32) int { return gatherGEGo(x, 0, t, out, 0) }

// GatherGEU16 writes to out, in order, the indices i with x[i] ≥ t, and
// returns their number. out must have room for len(x).
func GatherGEU16(x []uint16, t uint16, out []int32) int { return gatherGEGo(x, 0, t, out, 0) }

// GatherGEHalf writes to out, in order, the indices i with HalfKey(x[i]) ≥
// k, and returns their number. out must have room for len(x).
func GatherGEHalf(x []uint16, k uint16, out []int32) int { return gatherGEHalfGo(x, 0, k, out, 0) }

// CountGEU16 adds one to cnt[x[i]] for every x[i] ≥ t (the code histogram
// of the elements at or above a threshold), or, when it reports all, for
// every x[i]: it may count everything where that is cheaper than testing.
// The Go form always does.
func CountGEU16(x []uint16, t uint16, cnt *[1 << 16]uint32) (all bool) {
	countGo(x, cnt)
	return true
}

// CountGEHalf is CountGEU16 for the elements with HalfKey(x[i]) ≥ k.
func CountGEHalf(x []uint16, k uint16, cnt *[1 << 16]uint32) (all bool) {
	countGo(x, cnt)
	return true
}
