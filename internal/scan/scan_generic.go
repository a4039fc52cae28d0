//go:build purego || !(amd64 || arm64)

package scan

// Native reports whether the scans run assembly kernels.
const Native = false

// IndexGEF32 returns the first i where x[i] < t is false (x[i] ≥ t, or a
// NaN in x[i] or t), or len(x).
func IndexGEF32(x []float32, t float32) int { return indexGEF32Go(x, 0, t) }

// IndexGEU16 returns the first i with x[i] ≥ t, or len(x).
func IndexGEU16(x []uint16, t uint16) int { return indexGEU16Go(x, 0, t) }

// IndexGEHalf returns the first i with HalfKey(x[i]) ≥ k, or len(x).
func IndexGEHalf(x []uint16, k uint16) int { return indexGEHalfGo(x, 0, k) }

// IndexEq16 returns the first i with x[i] == a or x[i] == b, or len(x).
func IndexEq16(x []uint16, a, b uint16) int { return indexEq16Go(x, 0, a, b) }
