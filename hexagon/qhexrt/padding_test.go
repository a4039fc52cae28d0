package qhexrt

import (
	"math"
	"testing"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/plan"
)

// TestPaddingRowsPoisoned: hostsim skips a call's padding rows (mask rows
// that open nothing) and fills their outputs with NaN, so a runner that read
// one (its hidden state for the lm-head, or its K/V into the cache) would
// hand out NaN logits here. Every prefill call of this drive has padding
// rows; every row's logits must stay finite, while the last prefill call's
// padding rows do hold the poison.
func TestPaddingRowsPoisoned(t *testing.T) {
	skipNumeric(t)
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

// TestRemeasureStaleCost: on a chunked bundle, a decode graph whose one
// measured call was slow (600 ms of emulated latency) is given a single-row
// Step again after plan.IdleSteps Steps without one, and once its new time is
// measured the single-row Steps go back to it.
func TestRemeasureStaleCost(t *testing.T) {
	skipNumeric(t)
	r := openTiny(t, f32(simfile.Chunked, 16, simfile.MaskAdditive))
	t.Setenv("HOSTSIM_LATENCY_US_DECODE", "600000")
	drive(t, r, 2, &bseq{prompt: testPrompt(21, 3)}) // the decode graph measured once, at 600 ms
	t.Setenv("HOSTSIM_LATENCY_US_DECODE", "5000")    // now decode is the cheaper graph for one row
	t.Setenv("HOSTSIM_LATENCY_US_PREFILL", "30000")
	key := r.spec.key(roleDecode)
	before := r.Stats().Graphs[key].Calls
	const steps = 2*plan.IdleSteps + 4
	drive(t, r, steps, &bseq{prompt: testPrompt(22, 3)})
	if got := r.Stats().Graphs[key].Calls - before; got < 8 { // without re-measuring: none; with: most of the last 36 (noise aside)
		t.Fatalf("the decode graph ran %d times in %d one-row Steps after its stale 600 ms, want it re-measured and chosen again", got, steps)
	}
}
