package scan

// The sampler's bucket histogram over float32 logits (HistF32): where a
// step puts nearly the whole vocabulary in play, it replaces materialising
// and sorting the candidates by one pass that buckets each of them.

const (
	// HistBuckets is the number of buckets of HistF32.
	HistBuckets = 1 << 14
	// HistQMax is the largest fixed-point position (16 fraction bits).
	HistQMax = HistBuckets<<16 - 1
	// histBlock is the granularity at which histGather chooses between
	// gathering the elements at or above thr first and bucketing all.
	histBlock = 4096
)

// HistAcc is HistF32's histogram: HistBuckets buckets, then a sink the
// kernel adds its padding to (its contents mean nothing).
type HistAcc [HistBuckets + 1]uint64

// HistPos returns the fixed-point position of t ≥ 0 as HistF32 computes it:
// ⌊t⌋, at most HistQMax.
func HistPos(t float32) int64 { return min(int64(min(t, 1<<30)), HistQMax) }

// HistAdd buckets element i at position t = (x[i] − thr)·scale: HistF32's
// rule for one element, for callers whose elements are not float32.
func HistAdd(acc *HistAcc, of []uint16, i int, t float32) {
	if !(t >= 0) {
		of[i] = 0
		return
	}
	q := HistPos(t)
	acc[q>>16] += 1<<40 | uint64(q&0xffff)
	of[i] = uint16(q>>16 + 1)
}

// histF32Go is HistF32 one element at a time: the reference, and what
// finishes the kernel's last few elements.
func histF32Go(x []float32, thr, scale float32, acc *HistAcc, of []uint16) {
	of = of[:len(x)]
	for i, v := range x {
		HistAdd(acc, of, i, (v-thr)*scale)
	}
}

// histGather is HistF32 without its kernel, a block at a time: it gathers
// the indices of the elements at or above thr (a superset of those with t ≥
// 0) and buckets only those (the block's others get of 0); once a block had
// many (flat logits), it buckets every element of the rest.
func histGather(x []float32, thr, scale float32, acc *HistAcc, of []uint16) {
	of = of[:len(x)]
	var idx [histBlock]int32
	for lo := 0; lo < len(x); lo += histBlock {
		b := x[lo:min(lo+histBlock, len(x))]
		clear(of[lo : lo+len(b)])
		n := GatherGEF32(b, thr, idx[:])
		for _, j := range idx[:n] {
			HistAdd(acc, of, lo+int(j), (b[j]-thr)*scale)
		}
		if n*4 > len(b) {
			histF32Go(x[lo+len(b):], thr, scale, acc, of[lo+len(b):])
			return
		}
	}
}

// histWeightsGo is HistWeights in Go: the reference, and the form without
// the kernel.
func histWeightsGo(acc *HistAcc, e *[HistBuckets]float64, k0, k1 float64, bw *[HistBuckets]float64, blk *[HistBuckets / 64]float64) (n int) {
	for i := range blk {
		var s [16]float64 // s[k] sums the block's weights k, k+16, k+32, k+48
		for j := range 64 {
			b := i*64 + j
			a := acc[b]
			// (int64: both are below 2^40; the explicit float64 conversions
			// keep the compiler from fusing a multiply and an add)
			c, f := float64(int64(a>>40)), float64(int64(a&(1<<40-1)))
			w := e[b] * (float64(c*k0) + float64(k1*f))
			bw[b] = w
			s[j%16] += w
			n += int(a >> 40)
		}
		var a [4]float64
		for l := range a {
			a[l] = (s[l] + s[4+l]) + (s[8+l] + s[12+l])
		}
		blk[i] = (a[0] + a[2]) + (a[1] + a[3])
	}
	return n
}
