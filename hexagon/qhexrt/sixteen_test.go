package qhexrt

import (
	"slices"
	"testing"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
)

// TestGolden16Bit checks the 16-bit paths (f16 KV cache with f16 or
// ufixed16 graph I/O) as SPEC.md says they must be judged: logit error,
// top-1 agreement where the golden margin exceeds the error, and greedy
// agreement up to the first step whose golden margin is below twice the
// error (both logits may move by the error).
func TestGolden16Bit(t *testing.T) {
	g := loadGolden(t)
	tests := []struct {
		v      variant
		maxErr float64 // allowed top-20 logit error
	}{
		{variant{contract: simfile.QHexRT, window: 128, io: simfile.F16, kv: simfile.F16}, 0.05},
		{variant{contract: simfile.Chunked, window: 16, io: simfile.F16, kv: simfile.F16, mask: simfile.MaskU16}, 0.05},
		{variant{contract: simfile.QHexRT, window: 16, io: simfile.UFixed16, kv: simfile.F16}, 0.05},
		// y (f16) converted to an f32 lm-head input, f32 logits.
		{variant{contract: simfile.Chunked, window: 16, io: simfile.F16, kv: simfile.F16, lmIO: simfile.F32}, 0.05},
		// y (f32, exact KV) converted to a ufixed16 lm-head, ufixed16 logits.
		{variant{contract: simfile.QHexRT, window: 16, io: simfile.F32, kv: simfile.F32, lmIO: simfile.UFixed16}, 0.05},
	}
	for _, tt := range tests {
		t.Run(tt.v.String(), func(t *testing.T) {
			r := openTiny(t, tt.v)
			for _, name := range []string{"short", "cross128"} {
				c := g.get(t, name)
				worst, misses := 0.0, 0
				for _, prefill := range []bool{true, false} {
					w, m := checkPositions(t, r, c, prefill)
					worst, misses = max(worst, w), misses+m
				}
				minMargin := c.Checks[0].Margin
				for _, ch := range c.Checks {
					minMargin = min(minMargin, ch.Margin)
				}
				if misses > 0 && minMargin > 2*worst {
					t.Errorf("%s: %d top-1 misses where every golden margin (≥ %.3g) exceeds 2·error", name, misses, minMargin)
				}
				t.Logf("%s: worst top-20 logit error %.4g", name, worst)
				if worst > tt.maxErr {
					t.Errorf("%s: logit error %.4g above %g", name, worst, tt.maxErr)
				}
				// Greedy: compare up to the first step whose margin is within 2·error.
				steps := len(c.Greedy)
				for i, m := range c.GreedyMargins {
					if m < 2*worst {
						steps = i
						break
					}
				}
				got := greedy(t, r, c, steps)
				t.Logf("%s: greedy agrees on the %d steps whose golden margin exceeds 2·error (of %d)", name, steps, len(c.Greedy))
				if !slices.Equal(got, c.Greedy[:steps]) {
					t.Errorf("%s greedy = %v\nwant %v", name, got, c.Greedy[:steps])
				}
			}
		})
	}
}
