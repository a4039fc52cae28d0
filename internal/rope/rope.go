// Package rope computes RoPE's inverse frequencies and attention factor
// under the RoPE scalings of Hugging Face's rope_scaling (plain, Llama 3's,
// LongRoPE): one computation for the runners' cos/sin tables, hostsim's
// headers and the reference model.
package rope

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
)

// Scaling types.
const (
	TypeLlama3   = "llama3"
	TypeLongRoPE = "longrope"
)

// Scaling is a RoPE frequency scaling, as Hugging Face's rope_scaling. Type
// "" (or "default") is plain RoPE.
//
//   - "llama3" (Llama 3): frequencies whose wavelength is above
//     OriginalMaxPositions/LowFreqFactor are divided by Factor, those below
//     OriginalMaxPositions/HighFreqFactor are kept, the ones between blended.
//   - "longrope" (Phi-3): frequency i is divided by ShortFactor[i], or by
//     LongFactor[i] when the context exceeds OriginalMaxPositions, and cos and
//     sin are multiplied by the attention factor (AttentionFactor, or
//     sqrt(1 + ln(Factor)/ln(OriginalMaxPositions)) when that is 0 and
//     Factor > 1).
type Scaling struct {
	Type                 string    `json:"rope_type" yaml:"rope_type"`
	Factor               float64   `json:"factor,omitempty" yaml:"factor"`
	LowFreqFactor        float64   `json:"low_freq_factor,omitempty" yaml:"low_freq_factor"`
	HighFreqFactor       float64   `json:"high_freq_factor,omitempty" yaml:"high_freq_factor"`
	OriginalMaxPositions int       `json:"original_max_position_embeddings,omitempty" yaml:"original_max_position_embeddings"`
	LongFactor           []float64 `json:"long_factor,omitempty" yaml:"long_factor"`
	ShortFactor          []float64 `json:"short_factor,omitempty" yaml:"short_factor"`
	AttentionFactor      float64   `json:"attention_factor,omitempty" yaml:"attention_factor"`
}

// Llama32 is Llama 3.2's scaling.
func Llama32() *Scaling {
	return &Scaling{Type: TypeLlama3, Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 8192}
}

// UnmarshalJSON also takes the older key "type" for rope_type, as Phi-3's config.json spells it,
// and genie_config.json's hyphenated keys (rope-type, low-freq-factor, long-factor, …).
func (s *Scaling) UnmarshalJSON(b []byte) error {
	type plain Scaling
	var v struct {
		plain
		OldType string    `json:"type"`
		Type    string    `json:"rope-type"`
		Low     float64   `json:"low-freq-factor"`
		High    float64   `json:"high-freq-factor"`
		Orig    int       `json:"original-max-position-embeddings"`
		Long    []float64 `json:"long-factor"`
		Short   []float64 `json:"short-factor"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = Scaling(v.plain)
	s.Type = cmp.Or(s.Type, v.OldType, v.Type)
	s.LowFreqFactor, s.HighFreqFactor = cmp.Or(s.LowFreqFactor, v.Low), cmp.Or(s.HighFreqFactor, v.High)
	s.OriginalMaxPositions = cmp.Or(s.OriginalMaxPositions, v.Orig)
	if s.LongFactor == nil {
		s.LongFactor = v.Long
	}
	if s.ShortFactor == nil {
		s.ShortFactor = v.Short
	}
	return nil
}

// Kind is s's type, "" for plain RoPE (s nil, or Type "" or "default").
func (s *Scaling) Kind() string {
	if s == nil || s.Type == "default" {
		return ""
	}
	return s.Type
}

// Check reports a scaling this package cannot compute for headDim: an
// unknown type, or a parameter out of range.
func (s *Scaling) Check(headDim int) error {
	switch s.Kind() {
	case "":
		return nil
	case TypeLlama3:
		if !(s.Factor >= 1) || !(s.LowFreqFactor > 0) || !(s.HighFreqFactor > s.LowFreqFactor) || s.OriginalMaxPositions <= 0 {
			return fmt.Errorf("llama3 rope scaling: want factor ≥ 1, 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings > 0, got %g, %g, %g, %d",
				s.Factor, s.LowFreqFactor, s.HighFreqFactor, s.OriginalMaxPositions)
		}
	case TypeLongRoPE:
		for _, f := range []struct {
			name string
			v    []float64
		}{{"short_factor", s.ShortFactor}, {"long_factor", s.LongFactor}} {
			if len(f.v) != headDim/2 {
				return fmt.Errorf("longrope rope scaling: %s has %d values, want head_dim/2 = %d", f.name, len(f.v), headDim/2)
			}
			for i, x := range f.v {
				if !(x > 0) {
					return fmt.Errorf("longrope rope scaling: %s[%d] = %g, want > 0", f.name, i, x)
				}
			}
		}
		if s.OriginalMaxPositions <= 0 || s.Factor < 0 || s.AttentionFactor < 0 {
			return fmt.Errorf("longrope rope scaling: want original_max_position_embeddings > 0, factor and attention_factor ≥ 0, got %d, %g, %g",
				s.OriginalMaxPositions, s.Factor, s.AttentionFactor)
		}
	default:
		return fmt.Errorf("rope scaling %q is not supported (want llama3 or longrope)", s.Type)
	}
	return nil
}

// Ext returns LongRoPE's per-frequency divisors for a context of ctx
// positions: the long factors when ctx exceeds OriginalMaxPositions, else
// the short ones (Hugging Face's _compute_longrope_parameters with seq_len
// ctx); nil for another scaling.
func (s *Scaling) Ext(ctx int) []float64 {
	if s.Kind() != TypeLongRoPE {
		return nil
	}
	if ctx > s.OriginalMaxPositions {
		return s.LongFactor
	}
	return s.ShortFactor
}

// Attention is the factor cos and sin are multiplied by: LongRoPE's
// attention factor, 1 for the other scalings.
func (s *Scaling) Attention() float64 {
	if s.Kind() != TypeLongRoPE {
		return 1
	}
	if s.AttentionFactor > 0 {
		return s.AttentionFactor
	}
	if s.Factor <= 1 {
		return 1
	}
	return math.Sqrt(1 + math.Log(s.Factor)/math.Log(float64(s.OriginalMaxPositions)))
}

// InvFreq returns the headDim/2 inverse frequencies for theta and a context
// of ctx positions, scaled by s (nil: plain), as Hugging Face's
// _compute_llama3_parameters and _compute_longrope_parameters. Check s first.
func (s *Scaling) InvFreq(headDim int, theta float64, ctx int) []float64 {
	inv := make([]float64, headDim/2)
	ext := s.Ext(ctx)
	for i := range inv {
		inv[i] = 1 / math.Pow(theta, float64(2*i)/float64(headDim))
		if ext != nil {
			inv[i] = 1 / (ext[i] * math.Pow(theta, float64(2*i)/float64(headDim)))
		}
	}
	if s.Kind() == TypeLlama3 {
		s.llama3(inv)
	}
	return inv
}

// llama3 scales inv in place by Llama 3's rule.
func (s *Scaling) llama3(inv []float64) {
	orig := float64(s.OriginalMaxPositions)
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
}
