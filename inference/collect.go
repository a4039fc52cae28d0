package inference

import "math"

// collect appends to out every id not in skip (a bitset, nil for none) whose
// logit is at least m-delta, where m is the largest logit among those ids,
// and returns them (in id order) with m. One pass over the logits in their
// native type: the threshold follows the running maximum, so for peaked
// distributions almost nothing but a compare happens per element.
func collect(l Logits, delta float32, skip []uint64, out []cand) ([]cand, float32) {
	m := float32(math.Inf(-1))
	switch {
	case l.Type == F32:
		out, m = collectF32(l.F32, delta, skip, out)
	case l.Type == F16:
		out, m = collectF16(l.Raw16, delta, skip, out)
	case l.Type == U16 && l.Scale > 0:
		out, m = collectU16(l, delta, skip, out)
	default:
		thr := m
		for i := range l.Len() {
			v := l.At(i)
			if v >= thr && (skip == nil || !bit(skip, int32(i))) {
				out = append(out, cand{int32(i), v})
				if v > m {
					m, thr = v, v-delta
				}
			}
		}
	}
	// Drop what an earlier, lower maximum let in.
	thr := m - delta
	n := 0
	for _, x := range out {
		if x.v >= thr {
			out[n] = x
			n++
		}
	}
	return out[:n], m
}

func collectF32(x []float32, delta float32, skip []uint64, out []cand) ([]cand, float32) {
	m := float32(math.Inf(-1))
	thr := m
	for i, v := range x {
		if v >= thr {
			if skip != nil && skip[i>>6]&(1<<(uint(i)&63)) != 0 {
				continue
			}
			out = append(out, cand{int32(i), v})
			if v > m {
				m, thr = v, v-delta
			}
		}
	}
	return out, m
}

// halfKey maps half-precision bits to a key with the same order as the
// values they encode (NaNs aside).
func halfKey(h uint16) int { return int(h ^ (uint16(int16(h)>>15) | 0x8000)) }

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
// least x (keyPosInf+1 when there is none).
func halfKeyCeil(x float32) int {
	lo, hi := keyNegInf, keyPosInf+1
	for lo < hi {
		mid := (lo + hi) / 2
		if HalfToFloat(keyHalf(mid)) >= x {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

func collectF16(x []uint16, delta float32, skip []uint64, out []cand) ([]cand, float32) {
	m := float32(math.Inf(-1))
	km, kthr := -1, keyNegInf
	for i, h := range x {
		k := int(h ^ (uint16(int16(h)>>15) | 0x8000))
		if k >= kthr {
			if h&0x7fff > 0x7c00 || skip != nil && skip[i>>6]&(1<<(uint(i)&63)) != 0 {
				continue // NaN or skipped
			}
			v := HalfToFloat(h)
			out = append(out, cand{int32(i), v})
			if k > km {
				km, m = k, v
				kthr = halfKeyCeil(v - delta)
			}
		}
	}
	return out, m
}

// collectU16 handles fixed point with a positive scale, where the value
// grows with the raw code.
func collectU16(l Logits, delta float32, skip []uint64, out []cand) ([]cand, float32) {
	m := float32(math.Inf(-1))
	qm, qthr := -1, 0
	val := func(q int) float32 { return (float32(q) + float32(l.Offset)) * l.Scale }
	for i, q16 := range l.Raw16 {
		q := int(q16)
		if q >= qthr {
			if skip != nil && skip[i>>6]&(1<<(uint(i)&63)) != 0 {
				continue
			}
			v := val(q)
			out = append(out, cand{int32(i), v})
			if q > qm {
				qm, m = q, v
				// smallest code whose value is at least v-delta
				lo, hi := 0, q
				for lo < hi {
					mid := (lo + hi) / 2
					if val(mid) >= v-delta {
						hi = mid
					} else {
						lo = mid + 1
					}
				}
				qthr = lo
			}
		}
	}
	return out, m
}
