package rope

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestInvFreq: without scaling the frequencies are theta^(−2i/d); Llama 3's
// scaling keeps the high frequencies, divides the low ones by the factor and
// blends the band between.
func TestInvFreq(t *testing.T) {
	plain := (*Scaling)(nil).InvFreq(64, 500000, 131072)
	for i, f := range plain {
		if want := math.Pow(500000, -float64(2*i)/64); math.Abs(f-want) > 1e-15*want {
			t.Fatalf("inv_freq[%d] = %g, want %g", i, f, want)
		}
	}
	scaled := Llama32().InvFreq(64, 500000, 131072)
	var kept, divided, blended int
	for i, f := range scaled {
		switch wave := 2 * math.Pi / plain[i]; {
		case wave < 8192/4:
			kept++
			if f != plain[i] {
				t.Errorf("inv_freq[%d] (wavelength %g) = %g, want it kept (%g)", i, wave, f, plain[i])
			}
		case wave > 8192:
			divided++
			if f != plain[i]/32 {
				t.Errorf("inv_freq[%d] (wavelength %g) = %g, want %g / 32", i, wave, f, plain[i])
			}
		default:
			blended++
			if f >= plain[i] || f <= plain[i]/32 {
				t.Errorf("inv_freq[%d] (wavelength %g) = %g, not between %g / 32 and %g", i, wave, f, plain[i], plain[i])
			}
		}
	}
	if kept == 0 || divided == 0 || blended == 0 {
		t.Errorf("bands: %d kept, %d divided, %d blended; the test wants each", kept, divided, blended)
	}
}

// TestLongRoPE: LongRoPE divides frequency i by short_factor[i] up to the original context and by
// long_factor[i] beyond it, and its attention factor is sqrt(1 + ln(factor)/ln(original)) (Phi-3.5:
// factor 32 over 4096 positions) unless the config sets one.
func TestLongRoPE(t *testing.T) {
	s := &Scaling{Type: TypeLongRoPE, Factor: 32, OriginalMaxPositions: 4096,
		ShortFactor: []float64{1, 1.5, 2, 4}, LongFactor: []float64{2, 3, 8, 64}}
	if err := s.Check(8); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ctx  int
		want []float64
	}{{4096, s.ShortFactor}, {4097, s.LongFactor}, {512, s.ShortFactor}} {
		inv := s.InvFreq(8, 10000, tc.ctx)
		for i, f := range inv {
			want := 1 / (tc.want[i] * math.Pow(10000, float64(2*i)/8))
			if f != want {
				t.Errorf("ctx %d: inv_freq[%d] = %g, want %g", tc.ctx, i, f, want)
			}
		}
	}
	if got, want := s.Attention(), math.Sqrt(1+math.Log(32)/math.Log(4096)); got != want || math.Abs(got-1.1902380714) > 1e-9 {
		t.Errorf("attention factor %.10f, want %.10f (≈ 1.1902380714)", got, want)
	}
	for _, tc := range []struct {
		s    *Scaling
		want float64
	}{{nil, 1}, {Llama32(), 1}, {&Scaling{Type: TypeLongRoPE, Factor: 1, OriginalMaxPositions: 4096}, 1},
		{&Scaling{Type: TypeLongRoPE, Factor: 32, OriginalMaxPositions: 4096, AttentionFactor: 1.5}, 1.5}} {
		if got := tc.s.Attention(); got != tc.want {
			t.Errorf("%+v: attention factor %g, want %g", tc.s, got, tc.want)
		}
	}
}

// TestScalingJSON: Phi-3's config.json spells rope_type "type", genie_config.json hyphenates the
// keys; each reads.
func TestScalingJSON(t *testing.T) {
	for _, doc := range []string{`{"type":"longrope","short_factor":[1],"long_factor":[2]}`,
		`{"rope_type":"longrope","short_factor":[1],"long_factor":[2]}`,
		`{"rope-type":"longrope","short-factor":[1],"long-factor":[2]}`} {
		var s Scaling
		if err := json.Unmarshal([]byte(doc), &s); err != nil {
			t.Fatal(err)
		}
		if s.Kind() != TypeLongRoPE || len(s.ShortFactor) != 1 || s.LongFactor[0] != 2 {
			t.Errorf("%s: read %+v", doc, s)
		}
	}
	var l Scaling
	doc := `{"rope-type":"llama3","factor":8.0,"low-freq-factor":1.0,"high-freq-factor":4.0,"original-max-position-embeddings":8192}`
	if err := json.Unmarshal([]byte(doc), &l); err != nil || l.Kind() != TypeLlama3 || l.Factor != 8 || l.LowFreqFactor != 1 ||
		l.HighFreqFactor != 4 || l.OriginalMaxPositions != 8192 {
		t.Errorf("%s: read %+v (%v)", doc, l, err)
	}
}

// TestCheck: what Check refuses, each naming the parameter.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		s    *Scaling
		want string
	}{
		{&Scaling{Type: "yarn"}, `"yarn" is not supported`},
		{&Scaling{Type: TypeLlama3, Factor: 32, LowFreqFactor: 4, HighFreqFactor: 1, OriginalMaxPositions: 8192}, "low_freq_factor < high_freq_factor"},
		{&Scaling{Type: TypeLongRoPE, OriginalMaxPositions: 4096, ShortFactor: []float64{1}, LongFactor: []float64{1, 1}}, "short_factor has 1 values, want head_dim/2 = 2"},
		{&Scaling{Type: TypeLongRoPE, OriginalMaxPositions: 4096, ShortFactor: []float64{1, 0}, LongFactor: []float64{1, 1}}, "short_factor[1] = 0"},
		{&Scaling{Type: TypeLongRoPE, ShortFactor: []float64{1, 1}, LongFactor: []float64{1, 1}}, "original_max_position_embeddings > 0"},
	} {
		err := tc.s.Check(4)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want it to contain %q", tc.s, err, tc.want)
		}
	}
	for _, s := range []*Scaling{nil, {Type: "default"}, Llama32()} {
		if err := s.Check(64); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
}
