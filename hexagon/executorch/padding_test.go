package executorch

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/plan"
)

// TestPaddingRowsPoisoned: hostsim skips a call's padding rows (mask rows
// that open nothing) and fills their outputs with NaN, so a runner that read
// one (its logits, or its new K/V into a cache slot) would hand out NaN
// logits or hold NaN in a committed cache row. Every prefill_forward call of
// this drive has padding rows: every logits row handed out and every
// committed cache entry must be finite, while the last call's padding rows do
// hold the poison.
func TestPaddingRowsPoisoned(t *testing.T) {
	rt, path := numericPTE(t, 64, 2)
	r := openRunner(t, rt, path)
	ss := newBseqs(t, r, batchPrompts[:2], 4)
	drive(t, r, ss, 5) // at most 5 of the 8 rows carry tokens
	finite := func(what string, f float32) {
		t.Helper()
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			t.Fatalf("%s is %v: a padding row was read", what, f)
		}
	}
	for i, s := range ss {
		for _, l := range s.logits {
			for _, v := range l {
				finite("a logit", v)
			}
		}
		n := len(s.toks) - 1 // the last token was sampled, not evaluated
		buf := make([]byte, n*r.rowBytes())
		if err := r.SaveSeqKV(s.id, 0, n, buf); err != nil {
			t.Fatalf("sequence %d: %v", i, err)
		}
		for o := 0; o < len(buf); o += 4 {
			finite("a committed K/V entry", math.Float32frombits(binary.LittleEndian.Uint32(buf[o:])))
		}
	}
	if r.Stats().Graphs[r.pre.method].Calls == 0 {
		t.Fatal("no prefill_forward call")
	}
	if f := graphio.Row(r.pre.logits, r.pre.ar-1, r.pre.vocab).At(0); !math.IsNaN(float64(f)) {
		t.Fatalf("the last call's padding row holds %v, not hostsim's poison", f)
	}
	// The learned call costs (what StepCost weighs, exported as metrics) are
	// both shards' recent times.
	st := r.Stats()
	for _, g := range r.GraphTotals() {
		if want := st.Graphs[g.Graph].Recent * 2; g.Cost != want || g.Cost <= 0 {
			t.Errorf("%s: call cost %v, want %v (2 shards × recent)", g.Graph, g.Cost, want)
		}
	}
	if c := r.callCost(r.pre); c != st.Graphs[r.pre.method].Recent*2 {
		t.Errorf("prefill_forward priced at %v, want its recent time × 2", c)
	}
}

// TestRemeasureStaleCost: a graph whose one measured call was slow (600 ms
// of emulated latency for kv_forward) is given a call again after
// plan.IdleSteps Steps without one, and once its new time is measured the
// single-row Steps go back to it.
func TestRemeasureStaleCost(t *testing.T) {
	rt, path := numericPTE(t, 128, 1)
	r := openRunner(t, rt, path)
	t.Setenv("HOSTSIM_LATENCY_US_DECODE", "600000")
	warm := newBseqs(t, r, [][]int32{{128000, 5}}, 2) // kv_forward measured once, at 600 ms
	drive(t, r, warm, 8)
	r.Release(warm[0].id)
	t.Setenv("HOSTSIM_LATENCY_US_DECODE", "5000") // now kv_forward is the cheaper graph for one row
	t.Setenv("HOSTSIM_LATENCY_US_PREFILL", "30000")
	dec := func() int64 { return r.Stats().Graphs[r.dec.method].Calls }
	before := dec()
	ss := newBseqs(t, r, [][]int32{{128000, 9, 10}}, 2*plan.IdleSteps+4)
	drive(t, r, ss, 8)
	if got := dec() - before; got < 8 { // without re-measuring: none; with: most of the last 36 (noise aside)
		t.Fatalf("kv_forward ran %d times in %d one-row Steps after its stale 600 ms, want it re-measured and chosen again",
			got, 2*plan.IdleSteps+4)
	}
}

// TestSlowFirstPrefillDoesNotStick: a prefill_forward whose first call was
// slow (600 ms: cold caches after a build) gets a call again after
// plan.IdleStepsWarming multi-row Steps, not plan.IdleSteps, and once its real
// cost is measured the multi-row Steps go to it (the first 4-stream bench
// run after a build once stayed on one-row calls).
func TestSlowFirstPrefillDoesNotStick(t *testing.T) {
	rt, path := numericPTE(t, 128, 1)
	r := openRunner(t, rt, path)
	t.Setenv("HOSTSIM_LATENCY_US_PREFILL", "600000")
	t.Setenv("HOSTSIM_LATENCY_US_DECODE", "20000")
	warm := newBseqs(t, r, [][]int32{{128000, 5}}, 2) // prefill_forward measured once, at 600 ms
	drive(t, r, warm, 8)
	r.Release(warm[0].id)
	t.Setenv("HOSTSIM_LATENCY_US_PREFILL", "5000") // its real cost: below two kv_forward calls
	pre := func() int64 { return r.Stats().Graphs[r.pre.method].Calls }
	ss := newBseqs(t, r, [][]int32{{128000, 9}, {128000, 10}}, plan.IdleStepsWarming+8)
	before := pre()
	drive(t, r, ss, 8)                  // 1 prompt Step, then plan.IdleStepsWarming+8 Steps of 2 rows
	if got := pre() - before; got < 6 { // the first Steps go to kv_forward, then prefill_forward from the re-measure on
		t.Fatalf("prefill_forward ran %d times in %d two-row Steps after its slow first call, want it re-measured within %d Steps and chosen after",
			got, plan.IdleStepsWarming+9, plan.IdleStepsWarming)
	}
}
