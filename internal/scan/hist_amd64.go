//go:build !purego

package scan

// histChunk is how many elements the kernel takes before it makes their
// adds (its buffer holds their positions, then up to 8 of padding).
const histChunk = 256

// histF32 buckets the elements of x in whole blocks of 16 (hist_amd64.s)
// and returns how many it took.
//
//go:noescape
func histF32(x []float32, thr, scale float32, acc *HistAcc, of []uint16, buf *[histChunk + 8]int32, lut *[256][8]int32) (n int)

// HistF32 adds each element of x to a bucket histogram: with t = (x[i] −
// thr)·scale in float32 arithmetic, an element with t ≥ 0 (not NaN) at
// position q = HistPos(t) adds 1<<40 | q&0xffff to acc[q>>16] (its count,
// and its place within the bucket in 16 fraction bits) and sets of[i] to
// q>>16 + 1; every other element sets of[i] to 0. of must be at least as
// long as x.
func HistF32(x []float32, thr, scale float32, acc *HistAcc, of []uint16) {
	if !native {
		histGather(x, thr, scale, acc, of)
		return
	}
	of = of[:len(x)]
	var buf [histChunk + 8]int32
	n := histF32(x, thr, scale, acc, of, &buf, lut)
	histF32Go(x[n:], thr, scale, acc, of[n:])
}

//go:noescape
func histWeights(acc *HistAcc, e *[HistBuckets]float64, k0, k1 float64, bw *[HistBuckets]float64, blk *[HistBuckets / 64]float64) (n int)

// HistWeights turns HistF32's histogram into each bucket's weight, bw[b] =
// e[b]·(c·k0 + k1·f) for bucket b's count c and sum of fractions f (each
// product rounded, then the sum), and each block of 64 buckets' sum of
// weights into blk (sixteen partial sums, combined in a fixed order), and
// returns the total count.
func HistWeights(acc *HistAcc, e *[HistBuckets]float64, k0, k1 float64, bw *[HistBuckets]float64, blk *[HistBuckets / 64]float64) (n int) {
	if !native {
		return histWeightsGo(acc, e, k0, k1, bw, blk)
	}
	return histWeights(acc, e, k0, k1, bw, blk)
}
