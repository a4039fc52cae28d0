package sample

import (
	"math"
	"slices"
)

// filter applies top_k, the temperature softmax, top_p and min_p to s.cands
// and returns the kept tokens with their unnormalised weights (the best
// token weighs 1). No step sorts more than the tokens it keeps: top_k is a
// bounded heap, top_p buckets the weights by binary exponent and sorts only
// the bucket where the cumulative mass crosses p.
func (s *Sampler) filter() ([]cand, []float64) {
	if s.big && s.code {
		return s.keptCodes()
	}
	if s.big {
		return s.keptBig()
	}
	c := s.cands
	if k := s.p.TopK; k > 0 && k < len(c) {
		c = topK(c, k, s.kept[:0])
	}
	inv := 1 / s.p.Temperature
	ws := s.ws[:0]
	var z float64
	for _, x := range c {
		w := float64(expNeg((x.v - s.m) * inv))
		ws = append(ws, w)
		z += w
	}
	s.ws = ws // keep the buffer; topP writes its own (s.pw)
	if p := float64(s.p.TopP); p > 0 && p < 1 {
		c, ws = s.topP(c, ws, p*z)
	}
	if mp := float64(s.p.MinP); mp > 0 {
		// The best token has weight 1, so p ≥ min_p·p_max is w ≥ min_p.
		n := 0
		for i, w := range ws {
			if w >= mp {
				c[n], ws[n] = c[i], w
				n++
			}
		}
		c, ws = c[:n], ws[:n]
	}
	return c, ws
}

// topK returns the k best of c (in heap order) in out.
func topK(c []cand, k int, out []cand) []cand {
	h := append(out, c[:k]...)
	// a min-heap on "better": the root is the worst kept candidate
	worse := func(a, b cand) bool { return better(b, a) }
	sift := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			b := l
			if r := l + 1; r < len(h) && worse(h[r], h[l]) {
				b = r
			}
			if !worse(h[b], h[i]) {
				return
			}
			h[i], h[b] = h[b], h[i]
			i = b
		}
	}
	for i := k/2 - 1; i >= 0; i-- {
		sift(i)
	}
	for _, x := range c[k:] {
		if better(x, h[0]) {
			h[0] = x
			sift(0)
		}
	}
	return h
}

// topP keeps the smallest set of best tokens whose weights reach mass.
// Weights are in (0, 1]; they are bucketed by binary exponent and the top
// four mantissa bits (bucket 0 holds the heaviest), so one pass over the
// bucket masses finds the bucket where the cumulative mass crosses, and only
// that bucket is sorted.
func (s *Sampler) topP(c []cand, ws []float64, mass float64) ([]cand, []float64) {
	const nb = 64 * 16
	var bm [nb]float64
	bucket := func(w float64) int {
		b := math.Float64bits(w)
		e := 1023 - int(b>>52&0x7ff) // 0 for w in [1, 2)
		if e >= 64 {
			return nb - 1
		}
		return e<<4 | int(15-b>>48&15)
	}
	for _, w := range ws {
		bm[bucket(w)] += w
	}
	cum, cross := 0.0, nb-1
	for b, m := range bm {
		if cum+m >= mass {
			cross = b
			break
		}
		cum += m
	}
	// Keep buckets above the crossing one; sort the crossing bucket.
	kept, kw, edge := s.pbuf[:0], s.pw[:0], s.edge[:0]
	for i, w := range ws {
		switch b := bucket(w); {
		case b < cross:
			kept = append(kept, c[i])
			kw = append(kw, w)
		case b == cross:
			edge = append(edge, i)
		}
	}
	slices.SortFunc(edge, func(a, b int) int {
		if better(c[a], c[b]) {
			return -1
		}
		return 1
	})
	for _, i := range edge {
		if cum >= mass {
			break
		}
		kept = append(kept, c[i])
		kw = append(kw, ws[i])
		cum += ws[i]
	}
	s.pbuf, s.pw, s.edge = kept, kw, edge
	return kept, kw
}
