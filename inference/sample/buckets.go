package sample

import (
	"math"
	"slices"

	"github.com/hexserve/hexserve/internal/scan"
)

const (
	// nbig buckets span [m − T·sampleCutoff, m]: a token is within
	// w/2 = 10/nbig = 6.1e-4 (in units of T) of its bucket's centre, so the
	// first-order expansion of its weight errs by less than w²/8 = 1.9e-7
	// (relative), below the float32 rounding of (v − m)/T itself.
	nbig = scan.HistBuckets
	// bigMin is the number of candidates from which a step takes the
	// histogram path.
	bigMin = 8192
)

// bucketE[b] is the weight of bucket b's centre relative to the best token.
var bucketE = func() *[nbig]float64 {
	var e [nbig]float64
	for b := range e {
		e[b] = math.Exp((float64(b)+0.5)*sampleCutoff/nbig - sampleCutoff)
	}
	return &e
}()

// buckets is the state of the F32 bucket histogram (see hist).
type buckets struct {
	acc   *scan.HistAcc  // per bucket: count<<40 + sum of fractions (then a sink)
	bw    *[nbig]float64 // per bucket: mass
	bblk  [nbig / 64]float64
	of    []uint16 // per id: its bucket + 1 (0: below thr, or touched)
	scale float32  // buckets per logit unit
	bTop  int      // buckets above bTop are kept whole; the kept rest is in pbuf
}

func newBuckets(vocab int) buckets {
	return buckets{acc: new(scan.HistAcc), bw: new([nbig]float64), of: make([]uint16, vocab)}
}

// bucketOf returns the bucket of a logit v ≥ s.thr, as scan.HistF32 computes
// it.
func (s *Sampler) bucketOf(v float32) int {
	return int(scan.HistPos((v-s.thr)*s.bk.scale) >> 16)
}

// hist prepares a step with many candidates (nearly flat logits), where
// materialising and sorting them would cost milliseconds (F32 logits, and
// F16 or U16 logits histCodes cannot serve). One pass finds the best logit
// m; a second puts every logit within the cutoff into one of nbig equal
// buckets over
// [m − T·sampleCutoff, m], summing per bucket (in fixed point) the count and
// the positions within the bucket, which give the first-order expansion of
// the weights around its centre (no exp per token), and notes each id's
// bucket (bk.of). The touched ids are then taken out and added back with their
// adjusted logits and exact weights. top_p walks the bucket masses from the
// top (by blocks of 64) and resolves only the bucket where the cumulative
// mass crosses p: its tokens are gathered, weighed exactly and sorted. It
// reports false (nothing done) if the best logit is not finite.
func (s *Sampler) hist(l Logits, skip []uint64, mt float32) bool {
	_, mu := argmax(l, skip)
	m := max(mu, mt)
	if math.IsInf(float64(m), 0) || m != m {
		return false
	}
	if s.bk.acc == nil || len(s.bk.of) < l.Len() {
		s.bk = newBuckets(l.Len())
	}
	dS := s.p.Temperature * sampleCutoff
	thr := m - dS
	s.l, s.m, s.thr, s.bk.scale = l, m, thr, nbig*65536/dS
	acc, of := s.bk.acc, s.bk.of[:l.Len()]
	clear(acc[:])
	switch l.Type {
	case F32:
		scan.HistF32(l.F32, thr, s.bk.scale, acc, of)
	case F16:
		histF16(l.Raw16, thr, s.bk.scale, acc, of)
	default:
		histU16(l, thr, s.bk.scale, acc, of)
	}
	for _, id := range s.tlist {
		if t := (l.At(int(id)) - thr) * s.bk.scale; t >= 0 {
			q := scan.HistPos(t)
			acc[q>>16] -= 1<<40 | uint64(q&0xffff)
			of[id] = 0
		}
	}
	n, z := s.bucketWeights(thr, m)
	s.big, s.wasBig, s.inRange = true, n >= s.bigMin, n
	s.bk.bTop, s.zk = -1, z
	s.topPBuckets(z)
	return true
}

// bucketWeights turns the histogram into each bucket's estimated weight
// (bk.bw) and each block of 64 buckets' sum (bk.bblk), adds the touched
// ids' exact weights to both, and returns how many candidates lie above thr
// and their total weight.
func (s *Sampler) bucketWeights(thr, m float32) (n int, z float64) {
	const (
		dw = float64(sampleCutoff) / nbig // bucket width in units of T
		// per bucket Σ (1 + δ) with δ = ((f + ½)/65536 − ½)·dw is
		// c·k0 + f·k1 (c its count, f its sum of fractions)
		k0 = 1 + dw*(0.5/65536-0.5)
		k1 = dw / 65536
	)
	n = scan.HistWeights(s.bk.acc, bucketE, k0, k1, s.bk.bw, &s.bk.bblk)
	inv := 1 / s.p.Temperature
	for _, x := range s.tv {
		if x.v >= thr {
			b, w := s.bucketOf(x.v), float64(expNeg((x.v-m)*inv))
			s.bk.bw[b] += w
			s.bk.bblk[b/64] += w
			n++
		}
	}
	for _, bz := range s.bk.bblk {
		z += bz
	}
	return n, z
}

// topPBuckets keeps, when top_p applies, the best candidates whose mass
// reaches p·z (s.pbuf and s.pw): whole buckets from the top are passed by
// their estimated mass, and only the bucket where the cumulative mass
// crosses p is gathered, weighed exactly and sorted.
func (s *Sampler) topPBuckets(z float64) {
	kept, kw := s.pbuf[:0], s.pw[:0]
	if p := float64(s.p.TopP); p > 0 && p < 1 {
		mass, cum := p*z, 0.0
		for b := nbig - 1; b >= 0 && cum < mass; b-- {
			if s.bk.bTop < 0 && b&63 == 63 && cum+s.bk.bblk[b>>6] < mass {
				cum += s.bk.bblk[b>>6]
				b -= 63
				continue
			}
			if s.bk.bw[b] == 0 {
				continue
			}
			if s.bk.bTop < 0 && cum+s.bk.bw[b] < mass {
				cum += s.bk.bw[b]
				continue
			}
			// The crossing bucket (or, if its exact weights fell short of
			// the estimate, the next ones): keep its best tokens.
			if s.bk.bTop < 0 {
				s.bk.bTop = b
			}
			c, ws := s.bucket(b)
			s.sortByBetter(c, ws)
			for i, x := range c {
				if cum >= mass {
					break
				}
				kept = append(kept, x)
				kw = append(kw, ws[i])
				cum += ws[i]
			}
		}
		if s.bk.bTop < 0 { // rounding: everything is kept
			s.bk.bTop, s.zk = -1, z
		} else {
			s.zk = cum
		}
	}
	s.pbuf, s.pw = kept, kw
}

// bucketIDs gathers the untouched ids of bucket b into s.gids, in id order.
func (s *Sampler) bucketIDs(b int) []int32 {
	s.gids = codeIDs(s.bk.of[:s.l.Len()], uint16(b+1), uint16(b+1), nil, s.gids[:0], int(s.bk.acc[b]>>40))
	return s.gids
}

// bucket returns the candidates of bucket b (untouched, then the touched
// ones) and their exact weights, in s.kept and s.ws.
func (s *Sampler) bucket(b int) ([]cand, []float64) {
	s.bucketIDs(b)
	c, ws := s.kept[:0], s.ws[:0]
	for _, id := range s.gids {
		c = append(c, cand{id, val(s.l, id)})
	}
	for _, x := range s.tv {
		if x.v >= s.thr && s.bucketOf(x.v) == b {
			c = append(c, x)
		}
	}
	inv := 1 / s.p.Temperature
	for _, x := range c {
		ws = append(ws, float64(expNeg((x.v-s.m)*inv)))
	}
	s.kept, s.ws = c, ws
	return c, ws
}

// sortByBetter sorts c (best first) and ws with it.
func (s *Sampler) sortByBetter(c []cand, ws []float64) {
	slices.SortFunc(c, func(a, b cand) int {
		if better(a, b) {
			return -1
		}
		return 1
	})
	inv := 1 / s.p.Temperature
	for i, x := range c {
		ws[i] = float64(expNeg((x.v - s.m) * inv))
	}
}

// sampleBig draws a token after hist: it walks the bucket masses to the
// bucket holding the draw and weighs only that bucket's tokens exactly.
func (s *Sampler) sampleBig() int32 {
	u := s.rng.Float64() * s.zk
	for b := nbig - 1; b > s.bk.bTop; b-- {
		if b&63 == 63 && b-63 > s.bk.bTop && u >= s.bk.bblk[b>>6] {
			u -= s.bk.bblk[b>>6]
			b -= 63
			continue
		}
		w := s.bk.bw[b]
		if w == 0 {
			continue
		}
		if u < w {
			return s.pick(b, u)
		}
		u -= w
	}
	for i, w := range s.pw {
		if u -= w; u < 0 {
			return s.pbuf[i].id
		}
	}
	if n := len(s.pbuf); n > 0 { // rounding
		return s.pbuf[n-1].id
	}
	for b := s.bk.bTop + 1; b < nbig; b++ {
		if s.bk.bw[b] > 0 {
			return s.pick(b, math.Inf(1))
		}
	}
	return 0
}

// pick returns the token of bucket b where the draw u (within the bucket's
// mass) falls, walking its tokens (untouched from the highest id down, then
// touched) and weighing each exactly until u is used up; the last one if the
// exact weights sum below u.
func (s *Sampler) pick(b int, u float64) int32 {
	inv := 1 / s.p.Temperature
	last := int32(-1)
	ids := s.bucketIDs(b)
	for k := len(ids) - 1; k >= 0; k-- {
		i := ids[k]
		last = i
		if u -= float64(expNeg((val(s.l, i) - s.m) * inv)); u < 0 {
			return i
		}
	}
	for _, c := range s.tv {
		if c.v >= s.thr && s.bucketOf(c.v) == b {
			last = c.id
			if u -= float64(expNeg((c.v - s.m) * inv)); u < 0 {
				return last
			}
		}
	}
	return max(last, 0)
}

// keptBig materialises the kept tokens of a histogram step and their exact
// weights (for tests; sampleBig never needs them all).
func (s *Sampler) keptBig() ([]cand, []float64) {
	inv := 1 / s.p.Temperature
	var c []cand
	var ws []float64
	for i := range s.l.Len() {
		if v := val(s.l, int32(i)); v >= s.thr && s.bucketOf(v) > s.bk.bTop && !skipped(s.touched, i) {
			c = append(c, cand{int32(i), val(s.l, int32(i))})
		}
	}
	for _, x := range s.tv {
		if x.v >= s.thr && s.bucketOf(x.v) > s.bk.bTop {
			c = append(c, x)
		}
	}
	for _, x := range c {
		ws = append(ws, float64(expNeg((x.v-s.m)*inv)))
	}
	return append(c, s.pbuf...), append(ws, s.pw...)
}

// The histogram path (see sampler.hist) puts every logit v ≥ thr in bucket
// b = q>>16 of the fixed-point position q = scan.HistPos((v−thr)·scale)
// (16 fraction bits; the top bucket takes everything above it), adds
// 1<<40 | (q & 0xffff) to acc[b] (the count and the sum of fractions: the
// first-order expansion of the weights around the bucket's centre) and sets
// of[i] to b+1; every other id's of[i] is 0. Integer sums make taking an id
// out again exact. A bucket's ids are found again by scanning of
// (bucketIDs), which only the bucket where top_p or the draw falls needs.

// F32 logits are bucketed by scan.HistF32 (a vector kernel on amd64). The
// F16 and U16 hist functions gather, a block at a time, the ids whose logit
// is at least thr (a superset of those with t ≥ 0, which scan.HistAdd checks
// exactly) and bucket only those (the block's other ids get of 0); once a
// block had many (flat logits), they bucket every element of the rest.

func histF16(x []uint16, thr, scale float32, acc *scan.HistAcc, of []uint16) {
	k := halfKeyCeil(thr) // value ≥ thr: key ≥ k (NaNs aside, which half2f makes -Inf)
	if k > 0xffff {
		return
	}
	var idx [block]int32
	dense := false
	for lo := 0; lo < len(x); lo += block {
		b := x[lo:min(lo+block, len(x))]
		if dense {
			for j := range b {
				scan.HistAdd(acc, of, lo+j, (half2f[b[j]]-thr)*scale)
			}
			continue
		}
		clear(of[lo : lo+len(b)])
		n := scan.GatherGEHalf(b, uint16(k), idx[:])
		for _, j := range idx[:n] {
			scan.HistAdd(acc, of, lo+int(j), (half2f[b[j]]-thr)*scale)
		}
		dense = n*4 > len(b)
	}
}

func histU16(l Logits, thr, scale float32, acc *scan.HistAcc, of []uint16) {
	x := l.Raw16
	c := u16Ceil(l, thr) // value ≥ thr: code ≥ c
	if c > 0xffff {
		return
	}
	var idx [block]int32
	dense := false
	for lo := 0; lo < len(x); lo += block {
		b := x[lo:min(lo+block, len(x))]
		if dense {
			for j := range b {
				scan.HistAdd(acc, of, lo+j, (u16Val(l, int(b[j]))-thr)*scale)
			}
			continue
		}
		clear(of[lo : lo+len(b)])
		n := scan.GatherGEU16(b, uint16(c), idx[:])
		for _, j := range idx[:n] {
			scan.HistAdd(acc, of, lo+int(j), (u16Val(l, int(b[j]))-thr)*scale)
		}
		dense = n*4 > len(b)
	}
}
