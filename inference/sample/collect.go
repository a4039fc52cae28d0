package sample

import (
	"math"

	"github.com/hexserve/hexserve/internal/half"
	"github.com/hexserve/hexserve/internal/scan"
)

// prepare collects the candidates of one step into s.cands: every token
// whose adjusted logit is within delta of the best (s.m), where delta is 0
// for greedy and T·sampleCutoff otherwise. The touched ids (penalties, bias)
// are computed first, one by one; the vocabulary scans skip them. With
// wantLP, s.raw also holds the untouched ids' raw logits within
// logprobCutoff of the best raw logit.
func (s *Sampler) prepare(l Logits, wantLP bool) {
	s.big = false
	var skip []uint64
	if len(s.tlist) > 0 {
		skip = s.touched
	}
	inf := float32(math.Inf(-1))
	mt, rt := inf, inf // best adjusted and best raw logit of the touched ids
	s.tv = s.tv[:0]
	for k, id := range s.tlist {
		r := l.At(int(id))
		v := s.adjust(r, int32(k))
		s.tv = append(s.tv, cand{id, v})
		mt, rt = max(mt, v), max(rt, r)
	}
	var dS float32
	if s.p.Temperature > 0 {
		dS = s.p.Temperature * sampleCutoff
	}
	c := s.cands[:0]
	s.raw = s.raw[:0]
	var m float32
	if dS == 0 && !wantLP {
		best, mu := argmax(l, skip)
		m = max(mu, mt)
		if best >= 0 && mu >= m {
			c = append(c, cand{int32(best), mu})
		}
	} else {
		// Keep the untouched ids within d of their best (mu); the floor,
		// from the touched ids, cuts what they make irrelevant anyway.
		d, floor := dS, mt-dS
		if wantLP {
			d, floor = max(dS, logprobCutoff), min(floor, rt-logprobCutoff)
		}
		var mu float32
		ok := false
		if s.histOK(l, wantLP) {
			if !s.wasBig {
				s.raw, mu, ok = collectUpTo(l, d, floor, skip, s.raw, s.bigMin)
			}
			if !ok {
				// F16 and U16 logits take the code histogram where it can serve.
				if s.code = l.Type != F32 && s.histCodes(l, skip, mt); s.code || s.hist(l, skip, mt) {
					s.cands = c
					return
				}
				s.raw = s.raw[:0]
			}
		}
		s.wasBig = false
		if !ok {
			s.raw, mu = collect(l, d, floor, skip, s.raw)
		}
		m = max(mu, mt)
		thr := m - dS
		if wantLP {
			thr = min(thr, max(mu, rt)-logprobCutoff)
		}
		n := 0
		for _, x := range s.raw {
			if x.v >= thr {
				s.raw[n] = x
				n++
			}
		}
		s.raw = s.raw[:n]
		for _, x := range s.raw {
			if x.v >= m-dS {
				c = append(c, x)
			}
		}
	}
	for _, x := range s.tv {
		if x.v >= m-dS {
			c = append(c, x)
		}
	}
	s.m, s.cands, s.inRange = m, c, len(c)
}

// histOK reports whether the histogram path can serve this step.
func (s *Sampler) histOK(l Logits, wantLP bool) bool {
	return !wantLP && s.p.Temperature > 0 && s.p.TopK <= 0 && s.p.MinP <= 0 &&
		(l.Type == F32 || l.Type == F16 || l.Type == U16 && l.Scale > 0)
}

// The scans below read logits in their native type. Each inner loop is a
// compare-and-advance (internal/scan: vector kernels, or the pure-Go loops
// with -tags purego); only elements that pass it (rare for peaked
// distributions) pay for a skip-set lookup and an append.

func skipped(skip []uint64, i int) bool {
	return skip != nil && skip[i>>6]&(1<<(uint(i)&63)) != 0
}

// argmax returns the first index of the largest logit among the ids not in
// skip (-1 if there is none: all skipped or NaN) and its value.
func argmax(l Logits, skip []uint64) (int, float32) {
	switch {
	case l.Type == F32:
		return argmaxF32(l.F32, skip)
	case l.Type == F16:
		return argmaxF16(l.Raw16, skip)
	case l.Type == U16 && l.Scale > 0:
		return argmaxU16(l, skip)
	}
	best, m := -1, float32(math.Inf(-1))
	for i := range l.Len() {
		if v := l.At(i); (v > m || best < 0 && v == m) && !skipped(skip, i) {
			best, m = i, v
		}
	}
	return best, m
}

// collect appends to out, in id order, the ids not in skip whose logit is
// at least max(floor, m-delta), where m is the largest logit among those ids,
// and returns them with m. It is one pass: the threshold follows the running
// maximum. Blocks where many elements pass (typically the first, before a
// high logit was seen) switch to a branch-free loop that first takes the
// block's maximum.
func collect(l Logits, delta, floor float32, skip []uint64, out []cand) ([]cand, float32) {
	out, m, _ := collectUpTo(l, delta, floor, skip, out, math.MaxInt)
	return out, m
}

// collectUpTo is collect that gives up (ok false) as soon as more than limit
// candidates passed the running threshold by the end of a block (the typed
// collectors; the generic fallback always finishes).
func collectUpTo(l Logits, delta, floor float32, skip []uint64, out []cand, limit int) (_ []cand, _ float32, ok bool) {
	from := len(out)
	var m float32
	switch {
	case l.Type == F32:
		out, m = collectF32(l.F32, delta, floor, skip, out, limit)
	case l.Type == F16:
		out, m = collectF16(l.Raw16, delta, floor, skip, out, limit)
	case l.Type == U16 && l.Scale > 0:
		out, m = collectU16(l, delta, floor, skip, out, limit)
	default:
		m = float32(math.Inf(-1))
		for i := range l.Len() {
			if v := l.At(i); v >= max(floor, m-delta) && !skipped(skip, i) {
				out = append(out, cand{int32(i), v})
				m = max(m, v)
			}
		}
	}
	if len(out)-from > limit {
		return out, m, false
	}
	thr := max(floor, m-delta)
	n := from
	for _, c := range out[from:] {
		if c.v >= thr && !skipped(skip, int(c.id)) {
			out[n] = c
			n++
		}
	}
	return out[:n], m, true
}

func argmaxF32(x []float32, skip []uint64) (int, float32) {
	best, m := -1, float32(math.Inf(-1))
	for i := 0; i < len(x); i++ {
		if best >= 0 {
			if i = aboveF32(x, i, m); i == len(x) {
				break
			}
		}
		if v := x[i]; v == v && (v > m || best < 0) && !skipped(skip, i) {
			best, m = i, v
		}
	}
	return best, m
}

// aboveF32 returns the first j ≥ i where x[j] <= m is false, or len(x),
// except that for m = +Inf it returns len(x) (only NaNs are not <= +Inf).
// x > m is x ≥ the next float up.
func aboveF32(x []float32, i int, m float32) int {
	if m > math.MaxFloat32 {
		return len(x)
	}
	return i + scan.IndexGEF32(x[i:], math.Nextafter32(m, float32(math.Inf(1))))
}

// block is the granularity at which the collectors
// choose between a tight scan (few elements pass: branches predict well) and
// a branch-free loop that writes every element and advances the output by
// the comparison (many pass: the scan would mispredict).
const block = 4096

// dense reports whether a block let through more than 1/16 of its elements.
func dense(passed, n int) bool { return passed*16 > n }

// grow makes room for n more candidates after len(out).
func grow(out []cand, n int) []cand {
	if cap(out)-len(out) < n {
		out = append(out[:cap(out)], make([]cand, len(out)+n-cap(out))...)[:len(out)]
	}
	return out
}

// halfKey maps half-precision bits to a key with the same order as the
// values they encode (scan.HalfKey, as an int).
func halfKey(h uint16) int { return int(scan.HalfKey(h)) }

// keyHalf is halfKey's inverse.
func keyHalf(k int) uint16 {
	if k&0x8000 != 0 {
		return uint16(k) ^ 0x8000
	}
	return ^uint16(k)
}

const (
	keyNegInf = 0x03ff // halfKey(0xfc00)
	keyPosInf = 0xfc00 // halfKey(0x7c00)
)

// halfKeyCeil returns the smallest key of a non-NaN half whose value is at
// least x (keyPosInf+1 when there is none). The half nearest x is that key
// or a neighbour (-0 and +0 are two keys of one value).
func halfKeyCeil(x float32) int {
	if x != x {
		return keyPosInf + 1
	}
	k := halfKey(half.FromFloat32(x))
	if half.ToFloat32(keyHalf(k)) < x {
		k++ // below x: the next half up is above it (x is finite here)
	}
	for k > keyNegInf && half.ToFloat32(keyHalf(k-1)) >= x {
		k--
	}
	return k
}

func isNaN16(h uint16) bool { return h&0x7fff > 0x7c00 }

// scanF16 advances i past the halves whose key is below kthr.
func scanF16(x []uint16, i, kthr int) int {
	switch {
	case kthr <= 0:
		return i
	case kthr > 0xffff:
		return len(x)
	}
	return i + scan.IndexGEHalf(x[i:], uint16(kthr))
}

func argmaxF16(x []uint16, skip []uint64) (int, float32) {
	best, km := -1, -1
	for i := 0; i < len(x); i++ {
		if best >= 0 {
			// strictly greater than km; -0 (0x7fff) equals +0 (0x8000)
			kthr := km + 1
			if km == 0x7fff {
				kthr = 0x8001
			}
			if i = scanF16(x, i, kthr); i == len(x) {
				break
			}
		}
		h := x[i]
		if k := halfKey(h); !isNaN16(h) && (k > km || best < 0) && !skipped(skip, i) &&
			!(best >= 0 && km == 0x7fff && k == 0x8000) {
			best, km = i, k
		}
	}
	if best < 0 {
		return -1, float32(math.Inf(-1))
	}
	return best, half.ToFloat32(keyHalf(km))
}

// U16 with a positive scale: the value grows with the code.

func u16Val(l Logits, q int) float32 { return (float32(q) + float32(l.Offset)) * l.Scale }

// u16Ceil returns the smallest code whose value is at least v (1<<16 if
// there is none). u16Val is monotonic in the code, so the inverse gives the
// answer up to rounding: checked against its neighbour, else a binary search.
func u16Ceil(l Logits, v float32) int {
	if g := math.Ceil(float64(v)/float64(l.Scale)) - float64(l.Offset); g >= 0 && g < 1<<16 {
		if c := int(g); u16Val(l, c) >= v && (c == 0 || u16Val(l, c-1) < v) {
			return c
		}
	}
	lo, hi := 0, 1<<16
	for lo < hi {
		mid := (lo + hi) / 2
		if u16Val(l, mid) >= v {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

func argmaxU16(l Logits, skip []uint64) (int, float32) {
	x := l.Raw16
	best, qm := -1, -1
	for i := 0; i < len(x); i++ {
		if best >= 0 {
			if qm == 0xffff {
				break
			}
			if i += scan.IndexGEU16(x[i:], uint16(qm)+1); i == len(x) {
				break
			}
		}
		if q := int(x[i]); (q > qm || best < 0) && !skipped(skip, i) {
			best, qm = i, q
		}
	}
	if best < 0 {
		return -1, float32(math.Inf(-1))
	}
	return best, u16Val(l, qm)
}

// The typed collectors leave skipped ids and ids below the final threshold
// for collect to drop; they only need to keep every id that passes it and
// to skip the skipped ids when raising the maximum.

func collectF32(x []float32, delta, floor float32, skip []uint64, out []cand, limit int) ([]cand, float32) {
	from := len(out)
	m := float32(math.Inf(-1))
	thr := floor
	isDense := true // nothing is known yet: take the first block's maximum first
	for lo := 0; lo < len(x); lo += block {
		b := x[lo:min(lo+block, len(x))]
		before := len(out)
		if isDense {
			for i, v := range b {
				if v > m && !skipped(skip, lo+i) {
					m = v
				}
			}
			thr = max(floor, m-delta)
			out = grow(out, len(b))
			o, n := out[:cap(out)], len(out)
			for i, v := range b {
				o[n] = cand{int32(lo + i), v}
				if v >= thr {
					n++
				}
			}
			out = out[:n]
		} else {
			for i := 0; i < len(b); i++ {
				if i += scan.IndexGEF32(b[i:], thr); i == len(b) {
					break
				}
				if v := b[i]; v == v && !skipped(skip, lo+i) {
					out = append(out, cand{int32(lo + i), v})
					if v > m {
						m, thr = v, max(floor, v-delta)
					}
				}
			}
		}
		isDense = dense(len(out)-before, len(b))
		if len(out)-from > limit {
			break
		}
	}
	return out, m
}

func collectF16(x []uint16, delta, floor float32, skip []uint64, out []cand, limit int) ([]cand, float32) {
	from := len(out)
	km := -1 // key of the maximum
	kthr := halfKeyCeil(floor)
	raise := func(k int) {
		km = k
		kthr = halfKeyCeil(max(floor, half.ToFloat32(keyHalf(k))-delta))
	}
	isDense := true
	for lo := 0; lo < len(x); lo += block {
		b := x[lo:min(lo+block, len(x))]
		before := len(out)
		if isDense {
			bk := km
			for i, h := range b {
				if k := halfKey(h); k > bk && !isNaN16(h) && !skipped(skip, lo+i) {
					bk = k
				}
			}
			if bk > km {
				raise(bk)
			}
			out = grow(out, len(b))
			o, n := out[:cap(out)], len(out)
			for i, h := range b {
				o[n].id = int32(lo + i)
				if halfKey(h) >= kthr && !isNaN16(h) {
					n++
				}
			}
			for k := before; k < n; k++ {
				o[k].v = half.ToFloat32(b[int(o[k].id)-lo])
			}
			out = out[:n]
		} else {
			for i := 0; i < len(b); i++ {
				if i = scanF16(b, i, kthr); i == len(b) {
					break
				}
				if h := b[i]; !isNaN16(h) && !skipped(skip, lo+i) {
					out = append(out, cand{int32(lo + i), half.ToFloat32(h)})
					if k := halfKey(h); k > km {
						raise(k)
					}
				}
			}
		}
		isDense = dense(len(out)-before, len(b))
		if len(out)-from > limit {
			break
		}
	}
	if km < 0 {
		return out, float32(math.Inf(-1))
	}
	return out, half.ToFloat32(keyHalf(km))
}

func collectU16(l Logits, delta, floor float32, skip []uint64, out []cand, limit int) ([]cand, float32) {
	x := l.Raw16
	from := len(out)
	qm, qthr := -1, u16Ceil(l, floor)
	raise := func(q int) {
		// float32(): no fused multiply-subtract (arm64); the value is
		// rounded first, as At rounds it
		qm, qthr = q, u16Ceil(l, max(floor, float32(u16Val(l, q))-delta))
	}
	isDense := true
	for lo := 0; lo < len(x) && qthr <= 0xffff; lo += block {
		b := x[lo:min(lo+block, len(x))]
		before := len(out)
		if isDense {
			bq := qm
			for i, q := range b {
				if int(q) > bq && !skipped(skip, lo+i) {
					bq = int(q)
				}
			}
			if bq > qm {
				raise(bq)
			}
			if qthr > 0xffff {
				break
			}
			out = grow(out, len(b))
			o, n, t := out[:cap(out)], len(out), uint16(qthr)
			for i, q := range b {
				o[n].id = int32(lo + i)
				if q >= t {
					n++
				}
			}
			for k := before; k < n; k++ {
				o[k].v = u16Val(l, int(b[int(o[k].id)-lo]))
			}
			out = out[:n]
		} else {
			for i := 0; i < len(b) && qthr <= 0xffff; i++ {
				if i += scan.IndexGEU16(b[i:], uint16(qthr)); i == len(b) {
					break
				}
				if !skipped(skip, lo+i) {
					q := int(b[i])
					out = append(out, cand{int32(lo + i), u16Val(l, q)})
					if q > qm {
						raise(q)
					}
				}
			}
		}
		isDense = dense(len(out)-before, len(b))
		if len(out)-from > limit {
			break
		}
	}
	if qm < 0 {
		return out, float32(math.Inf(-1))
	}
	return out, u16Val(l, qm)
}

// half2f maps every half to its float32 value, NaNs to -Inf (so that they
// fall below any threshold): one load per F16 logit.
var half2f = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for h := range t {
		if isNaN16(uint16(h)) {
			t[h] = float32(math.Inf(-1))
		} else {
			t[h] = half.ToFloat32(uint16(h))
		}
	}
	return &t
}()
