// Package scan holds the linear scans the sampler makes over a vocabulary of
// logits (128,256 of them for Llama 3), in float32, IEEE half and uint16
// codes: the first element at or above a threshold (which serves argmax and
// the candidate collectors, whose threshold follows the running maximum),
// the first element equal to one of two codes, the indices of the elements
// at or above a threshold (gathers), the code histogram of those elements
// (counts), and the sampler's fixed-point bucket histogram of float32
// logits (HistF32, with HistWeights to weigh its buckets).
//
// Like the standard library's internal/bytealg, each scan has a pure-Go form
// (scan_generic.go, also the reference the tests compare against) and, on
// amd64 with AVX2 and on arm64 (NEON), an assembly kernel that skips whole
// vectors of non-matching elements (or compresses the matching indices) and
// leaves the last few elements to the Go loop. The histogram has an amd64
// kernel only (hist_amd64.s); elsewhere its Go form (hist.go) runs.
// Building with the tag purego selects the Go forms everywhere. Both forms
// return the same index for every input.
package scan

// HalfKey maps IEEE half-precision bits to a key with the same order as the
// values (NaNs aside; -0 sorts just below +0): a negative half's bits are
// inverted, a non-negative half's sign bit is set.
func HalfKey(h uint16) uint16 { return h ^ (uint16(int16(h)>>15) | 0x8000) }

// The pure-Go scans, from index i. They are the reference for the kernels and
// finish what a kernel leaves.

// indexGEGo is the float32 and uint16 scan: the first index from i where
// x[i] < t is false.
func indexGEGo[T float32 | uint16](x []T, i int, t T) int {
	for i+4 <= len(x) && x[i] < t && x[i+1] < t && x[i+2] < t && x[i+3] < t {
		i += 4
	}
	for i < len(x) && x[i] < t {
		i++
	}
	return i
}

// A half's key is at least k exactly when its bits compare so with one
// ordinary comparison: for k ≥ 0x8000 (a threshold ≥ +0) as int16 against
// halfGE(k), where every negative half is negative; below that (a negative
// threshold, or one below -Inf) as uint16 at most halfLE(k), the bits of the
// negative half with key k: a negative half's key is its bits inverted, and
// every non-negative half's bits are below any negative one's. The kernels
// compare so, as a uint16 scan does, without computing a key per element.

// halfGE is the int16 bound of a key k ≥ 0x8000: HalfKey(h) ≥ k ⇔ int16(h) ≥ halfGE(k).
func halfGE(k uint16) int16 { return int16(k - 0x8000) }

// halfLE is the uint16 bound of a key k < 0x8000: HalfKey(h) ≥ k ⇔ h ≤ halfLE(k).
func halfLE(k uint16) uint16 { return ^k }

func indexGEHalfGo(x []uint16, i int, k uint16) int {
	if k >= 0x8000 {
		t := halfGE(k)
		for i+4 <= len(x) && int16(x[i]) < t && int16(x[i+1]) < t && int16(x[i+2]) < t && int16(x[i+3]) < t {
			i += 4
		}
		for i < len(x) && int16(x[i]) < t {
			i++
		}
		return i
	}
	t := halfLE(k)
	for i+4 <= len(x) && x[i] > t && x[i+1] > t && x[i+2] > t && x[i+3] > t {
		i += 4
	}
	for i < len(x) && x[i] > t {
		i++
	}
	return i
}

func indexEq16Go(x []uint16, i int, a, b uint16) int {
	for i+4 <= len(x) && x[i] != a && x[i] != b && x[i+1] != a && x[i+1] != b &&
		x[i+2] != a && x[i+2] != b && x[i+3] != a && x[i+3] != b {
		i += 4
	}
	for i < len(x) && x[i] != a && x[i] != b {
		i++
	}
	return i
}

// The pure-Go gathers, from index i with n indices written: every index is
// written, and kept by advancing n when it matches (no branch to mispredict
// when many match).

// gatherGEGo is the float32 and uint16 gather: it keeps the indices where
// x[i] < t is false.
func gatherGEGo[T float32 | uint16](x []T, i int, t T, out []int32, n int) int {
	out = out[:len(x)]
	for ; i < len(x); i++ {
		out[n] = int32(i)
		if !(x[i] < t) {
			n++
		}
	}
	return n
}

func gatherGEHalfGo(x []uint16, i int, k uint16, out []int32, n int) int {
	out = out[:len(x)]
	for ; i < len(x); i++ {
		out[n] = int32(i)
		if HalfKey(x[i]) >= k {
			n++
		}
	}
	return n
}

// countGo adds one to cnt[h] for every h of x: as many increments as
// elements, but no test per element (this is what a count with a threshold
// costs when most elements pass it).
func countGo(x []uint16, cnt *[1 << 16]uint32) {
	for _, h := range x {
		cnt[h]++
	}
}
