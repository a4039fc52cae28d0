package qhexrt

import (
	"context"
	"slices"
	"testing"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/inference"
)

// TestGoldenLong runs the `long` case (400 prompt tokens, 100 generated:
// most of the 512-token context) through Eval, with one context binary
// holding all three graphs.
func TestGoldenLong(t *testing.T) {
	if testing.Short() {
		t.Skip("long case skipped in -short mode")
	}
	g := loadGolden(t)
	c := g.get(t, "long")
	for _, v := range []variant{
		{contract: simfile.Chunked, window: 128, io: simfile.F32, kv: simfile.F32, shared: true},
		{contract: simfile.QHexRT, window: 128, io: simfile.F32, kv: simfile.F32, shared: true},
	} {
		t.Run(v.String(), func(t *testing.T) {
			r := openTiny(t, v)
			if worst, misses := checkPositions(t, r, c, true); worst > 1e-4 || misses > 0 {
				t.Errorf("worst top-20 error %.3g, %d top-1 misses", worst, misses)
			}
			if got := greedy(t, r, c, len(c.Greedy)); !slices.Equal(got, c.Greedy) {
				t.Errorf("greedy = %v\nwant %v", got, c.Greedy)
			}
			st := r.Stats()
			t.Logf("calls: prefill %d (mean %v), decode %d (mean %v), lm-head %d (mean %v); host %v (embed %v, rope %v, mask %v, kv %v, convert %v)",
				st.Graphs[r.GraphKey("prefill")].Calls, st.Graphs[r.GraphKey("prefill")].Mean(), st.Graphs[r.GraphKey("decode")].Calls, st.Graphs[r.GraphKey("decode")].Mean(),
				st.Graphs[r.GraphKey("lmhead")].Calls, st.Graphs[r.GraphKey("lmhead")].Mean(), st.Host(), st.Embed, st.Rope, st.Mask, st.KVCopy, st.Convert)
		})
	}
}

// TestDecodeStepAllocs: a decode step's host work allocates little: a Step
// of one decode row allocates no more than the two graph executes it makes
// (the qnn binding's purego calls allocate a few objects each) and its
// result (the Rows slice and value).
func TestDecodeStepAllocs(t *testing.T) {
	r := openTiny(t, f32(simfile.Chunked, 16, simfile.MaskAdditive))
	seq := loadGolden(t).get(t, "short").PromptIDs
	ctx := context.Background()
	s := evalOn(r)
	if _, _, err := s.Eval(ctx, seq, 0); err != nil {
		t.Fatal(err)
	}
	grow := append(slices.Clip(seq), make([]int32, 32)...) // each run decodes one more token
	n := len(seq)
	runs := []inference.Run{{Seq: s.ID()}}
	allocs := testing.AllocsPerRun(20, func() {
		runs[0].Start, runs[0].Tokens = n, grow[n:n+1]
		n++
		rows, err := r.Step(ctx, runs)
		if err == nil {
			_, err = rows[0].Logits(ctx, 0)
		}
		if err != nil {
			t.Fatal(err)
		}
	})
	exec := testing.AllocsPerRun(20, func() {
		if err := r.graphs[roleDecode].call.Execute(); err != nil {
			t.Fatal(err)
		}
		if err := r.graphs[roleLMHead].call.Execute(); err != nil {
			t.Fatal(err)
		}
	})
	const result = 2 // the []Rows and its one Rows
	t.Logf("%.1f allocations per decode step, %.1f in the two executes", allocs, exec)
	if allocs > exec+result {
		t.Errorf("%.1f allocations per decode step, %.1f of them outside the graph executes and the result", allocs, allocs-exec-result)
	}
}

// BenchmarkDecodeStep measures one decode step (decode graph + lm-head) on
// hostsim with the tiny model, and the host-side share.
func BenchmarkDecodeStep(b *testing.B) {
	cfg := hostsimConfig(b)
	dir := tinyBundle(b, f32(simfile.QHexRT, 128, simfile.MaskAdditive))
	r, err := Open(Config{Bundle: dir, QNN: cfg})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	seq := loadGolden(b).get(b, "short").PromptIDs
	ctx := context.Background()
	if _, _, err := evalOn(r).Eval(ctx, seq, 0); err != nil {
		b.Fatal(err)
	}
	before := r.Stats()
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := evalOn(r).Eval(ctx, seq, len(seq)-1); err != nil {
			b.Fatal(err)
		}
	}
	after := r.Stats()
	b.ReportMetric(float64((after.Host()-before.Host()).Nanoseconds())/float64(b.N), "host-ns/op")
}

// TestStatsConcurrent: Stats may be read while an Eval runs (-race checks it).
func TestStatsConcurrent(t *testing.T) {
	r := openTiny(t, f32(simfile.QHexRT, 16, simfile.MaskAdditive))
	seq := loadGolden(t).get(t, "short").PromptIDs
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 5 {
			if _, _, err := evalOn(r).Eval(context.Background(), seq, 0); err != nil {
				t.Error(err)
			}
		}
	}()
	var last plan.Stats
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			last = r.Stats()
		}
	}
	if st := r.Stats(); st.Graphs[r.GraphKey("lmhead")].Calls != 5 || st.Graphs[r.GraphKey("lmhead")].Calls < last.Graphs[r.GraphKey("lmhead")].Calls {
		t.Errorf("lm-head calls %d (last seen %d), want 5", st.Graphs[r.GraphKey("lmhead")].Calls, last.Graphs[r.GraphKey("lmhead")].Calls)
	}
}
