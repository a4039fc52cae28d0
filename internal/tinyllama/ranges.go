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
