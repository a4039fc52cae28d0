package rope

import (
	"math"
	"testing"
)

// TestInvFreq: without scaling the frequencies are theta^(−2i/d); Llama 3's
// scaling keeps the high frequencies, divides the low ones by the factor and
// blends the band between.
func TestInvFreq(t *testing.T) {
	plain := InvFreq(64, 500000, nil)
	for i, f := range plain {
		if want := math.Pow(500000, -float64(2*i)/64); math.Abs(f-want) > 1e-15*want {
			t.Fatalf("inv_freq[%d] = %g, want %g", i, f, want)
		}
	}
	s := &Llama3{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 8192}
	scaled := InvFreq(64, 500000, s)
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
