package tinyllama

import "math"

// Ranges are the largest magnitudes seen while running a token sequence: per layer post-RoPE K
// and V, the residual stream between layers, and the logits. Writers of fixed-point graph I/O
// (uint8/uint16 KV, 16-bit logits) derive their scales from them.
type Ranges struct {
	K, V           []float64
	Hidden, Logits float64
}

// Calibrate runs tokens through a fresh session and returns the ranges seen.
func (m *Model) Calibrate(tokens []int) (Ranges, error) {
	n := m.Config.NumHiddenLayers
	r := Ranges{K: make([]float64, n), V: make([]float64, n)}
	s := m.NewSession()
	s.Observe = func(l int, k, v, x []float64) {
		r.K[l], r.V[l], r.Hidden = max(r.K[l], absMax(k)), max(r.V[l], absMax(v)), max(r.Hidden, absMax(x))
	}
	for _, t := range tokens {
		h, err := s.Append(t)
		if err != nil {
			return Ranges{}, err
		}
		r.Logits = max(r.Logits, absMax(m.Logits(h)))
	}
	return r, nil
}

func absMax(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, math.Abs(x))
	}
	return m
}

// calibrateMax is the largest model (in weight elements) whose fixed-point ranges Sample measures
// with the float64 reference; larger ones get FixedRanges.
const calibrateMax = 50_000_000

// FixedRanges are the ranges of models too large to calibrate: the SPEC's weight scaling keeps K
// and V near ±4 at every size (tiny: 4.3), the residual grows with depth, logits reach ~100.
func FixedRanges(c Config) Ranges {
	r := Ranges{Hidden: 8 * float64(c.NumHiddenLayers), Logits: 128}
	for range c.NumHiddenLayers {
		r.K, r.V = append(r.K, 8), append(r.V, 8)
	}
	return r
}

// SampleRanges calibrates c on a sample prompt (BOS and 63 drawn tokens) through the float64
// reference, or returns FixedRanges for models over 50M weights: the ranges hostsim test models'
// fixed-point I/O is quantised with (mkmodel adds headroom).
func SampleRanges(c Config) (Ranges, error) {
	var n int
	for _, t := range Tensors(c) {
		n += t.Len()
	}
	if n > calibrateMax {
		return FixedRanges(c), nil
	}
	m, err := NewModel(c)
	if err != nil {
		return Ranges{}, err
	}
	toks := []int{c.BOSTokenID}
	for _, d := range Draws(7, 63) {
		toks = append(toks, d%c.VocabSize)
	}
	return m.Calibrate(toks)
}
