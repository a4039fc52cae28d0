// Package rope computes RoPE's inverse frequencies, with Llama 3's
// frequency scaling: one computation for the runners' cos/sin tables and
// the reference model.
package rope

import "math"

// Llama3 is Llama 3's frequency scaling (Hugging Face's rope_scaling with
// rope_type "llama3"): frequencies whose wavelength is above
// OriginalMaxPositions/LowFreqFactor are divided by Factor, those below
// OriginalMaxPositions/HighFreqFactor are kept, and the ones between are
// blended.
type Llama3 struct {
	Factor, LowFreqFactor, HighFreqFactor, OriginalMaxPositions float64
}

// InvFreq returns the headDim/2 inverse frequencies for theta, scaled by s
// unless s is nil (as Hugging Face's _compute_llama3_parameters).
func InvFreq(headDim int, theta float64, s *Llama3) []float64 {
	inv := make([]float64, headDim/2)
	for i := range inv {
		inv[i] = 1 / math.Pow(theta, float64(2*i)/float64(headDim))
	}
	if s == nil {
		return inv
	}
	orig := s.OriginalMaxPositions
	lowWave, highWave := orig/s.LowFreqFactor, orig/s.HighFreqFactor
	for i, f := range inv {
		wave := 2 * math.Pi / f
		switch {
		case wave < highWave:
		case wave > lowWave:
			inv[i] = f / s.Factor
		default:
			smooth := (orig/wave - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
			inv[i] = (1-smooth)*f/s.Factor + smooth*f
		}
	}
	return inv
}
