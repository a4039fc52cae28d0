package qhexrt

import (
	"math"
	"testing"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
)

// TestPaddingRowsPoisoned: hostsim skips a call's padding rows (mask rows
// that open nothing) and fills their outputs with NaN, so a runner that read
// one (its hidden state for the lm-head, or its K/V into the cache) would
// hand out NaN logits here. Every prefill call of this drive has padding
// rows; every row's logits must stay finite, while the last prefill call's
// padding rows do hold the poison.
func TestPaddingRowsPoisoned(t *testing.T) {
	if testing.Short() {
		t.Skip("numeric model runs: the full (non-race) pass runs it")
	}
	r := openTiny(t, f32(simfile.Chunked, 16, simfile.MaskAdditive))
	ss := []*bseq{{prompt: testPrompt(11, 5)}, {prompt: testPrompt(12, 9), arrive: 1}, {prompt: testPrompt(13, 3), arrive: 3}}
	drive(t, r, 6, ss...)
	for i, s := range ss {
		for j, l := range s.logits {
			for v, x := range l {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					t.Fatalf("sequence %d row %d: logit %d is %v (a padding row was read)", i, j, v, x)
				}
			}
		}
	}
	g := r.graphs[rolePrefill]
	if r.Stats().Graphs[g.key].Calls == 0 {
		t.Fatal("no prefill call carried the rows")
	}
	last := g.y.B[len(g.y.B)-4:] // the window's last row is padding in every call here
	if f := math.Float32frombits(uint32(last[0]) | uint32(last[1])<<8 | uint32(last[2])<<16 | uint32(last[3])<<24); !math.IsNaN(float64(f)) {
		t.Fatalf("the last prefill call's padding row holds %v, not hostsim's poison", f)
	}
}
