package qhexrt

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/inferencetest"
	"github.com/hexserve/hexserve/inference/kvstore"
	"github.com/hexserve/hexserve/inference/sample"
)

// TestKVSnapshotRestore: rows saved from one runner and restored into
// another (after its cache held a different sequence) continue to the same
// logits, bit for bit, as the rows left resident by the same graph calls,
// and within 1e-5 of a fresh evaluation with prefill windows.
func TestKVSnapshotRestore(t *testing.T) {
	seq := loadGolden(t).get(t, "cross128").PromptIDs // 130 tokens
	other := make([]int32, len(seq))
	for i := range other {
		other[i] = int32(1000 + 7*i)
	}
	ctx := context.Background()
	for _, v := range []variant{f32(simfile.QHexRT, 16, simfile.MaskAdditive), f32(simfile.Chunked, 16, simfile.MaskU16)} {
		t.Run(v.String(), func(t *testing.T) {
			a, b := openFixed(t, v), openFixed(t, v)
			if la, lb := a.KVLayout(), b.KVLayout(); la != lb || la.RowBytes != 2*a.spec.layers*a.spec.kvDim*4 {
				t.Fatalf("layouts %+v and %+v", la, lb)
			}
			fresh := lastLogits(t, a, seq)
			for _, n := range []int{1, 40, 100} {
				// Reference: seq[:n] evaluated, then continued on the resident rows.
				if _, _, err := evalOn(a).Eval(ctx, seq[:n], 0); err != nil {
					t.Fatal(err)
				}
				rows := make([]byte, n*a.KVLayout().RowBytes)
				if err := evalOn(a).Save(0, n, rows); err != nil {
					t.Fatal(err)
				}
				l, reused, err := evalOn(a).Eval(ctx, seq, n)
				if err != nil || reused != n {
					t.Fatalf("resident continuation: reused %d, err %v", reused, err)
				}
				want := copyLogits(l)

				// b's cache holds another sequence; restore over it and continue.
				if _, _, err := evalOn(b).Eval(ctx, other, 0); err != nil {
					t.Fatal(err)
				}
				if err := evalOn(b).Restore(0, rows, seq); err != nil {
					t.Fatal(err)
				}
				l, reused, err = evalOn(b).Eval(ctx, seq, n)
				if err != nil || reused != n {
					t.Fatalf("restored continuation: reused %d, err %v", reused, err)
				}
				got := copyLogits(l)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("n=%d: logit %d is %v restored, %v resident", n, i, got[i], want[i])
					}
				}
				if d := maxDiff(got, fresh); d > 1e-5 {
					t.Errorf("n=%d: restored logits differ from a fresh evaluation by %.3g", n, d)
				}
			}
		})
	}
}

// TestKVSnapshotBounds: only committed rows are saved, and a restore
// cannot leave a gap of invalid rows.
func TestKVSnapshotBounds(t *testing.T) {
	r := openFixed(t, f32(simfile.QHexRT, 16, simfile.MaskAdditive))
	seq := loadGolden(t).get(t, "short").PromptIDs
	if _, _, err := evalOn(r).Eval(context.Background(), seq, 0); err != nil {
		t.Fatal(err)
	}
	rb := r.KVLayout().RowBytes
	n := len(seq)
	id := evalOn(r).ID()
	tests := []struct {
		name string
		err  error
	}{
		{"save within valid", r.SaveSeqKV(id, 0, n, make([]byte, n*rb))},
		{"save past valid", r.SaveSeqKV(id, 0, n+1, make([]byte, (n+1)*rb))},
		{"save with a short buffer", r.SaveSeqKV(id, 0, n, make([]byte, n*rb-1))},
		{"restore a partial row", r.RestoreSeqKV(id, 0, make([]byte, rb+1))},
		{"restore past the valid rows", r.RestoreSeqKV(id, n+1, make([]byte, rb))},
		{"restore past the context", r.RestoreSeqKV(id, 0, make([]byte, (r.spec.ctx+1)*rb))},
		{"save of an unknown sequence", r.SaveSeqKV(id+1, 0, 1, make([]byte, rb))},
	}
	for i, tc := range tests {
		if (tc.err == nil) != (i == 0) {
			t.Errorf("%s: err %v", tc.name, tc.err)
		}
	}
	if other := openFixed(t, f32(simfile.QHexRT, 128, simfile.MaskAdditive)); other.KVLayout().Identity == r.KVLayout().Identity {
		t.Errorf("two bundles with different graphs share the identity %q", r.KVLayout().Identity)
	}
}

// openFixed opens v with decode cheaper per token than prefill, so a
// continuation after reused rows runs decode steps from them.
func openFixed(t *testing.T, v variant) *Runner {
	t.Helper()
	r, err := Open(Config{Bundle: tinyBundle(t, v), QNN: hostsimConfig(t), Logger: zerolog.Nop(),
		Costs: plan.Costs{Prefill: 1e9, Decode: 1e6, LMHead: 1e5}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// lastLogits evaluates seq from row 0 with prefill windows where the
// contract allows and returns the last position's logits.
func lastLogits(t *testing.T, r *Runner, seq []int32) []float32 {
	t.Helper()
	var out []float32
	err := evalRows(context.Background(), r, seq, true, func(pos int) bool { return pos == len(seq)-1 },
		func(_ int, l sample.Logits) { out = copyLogits(l) })
	if err != nil || out == nil {
		t.Fatalf("fresh evaluation: %v", err)
	}
	return out
}

// TestKVStoreThroughEngine: on the real runner, a turn whose history the
// engine restored from the KV store (another prompt ran in between) gets
// the log-probabilities of a fresh engine on a fresh runner.
func TestKVStoreThroughEngine(t *testing.T) {
	v := f32(simfile.QHexRT, 16, simfile.MaskAdditive)
	hist := loadGolden(t).get(t, "cross128").PromptIDs[:90]
	other := make([]int32, 70)
	for i := range other {
		other[i] = int32(2000 + 3*i)
	}
	vocab := inferencetest.NewVocab(nil)
	r := openFixed(t, v)
	st, err := kvstore.Open(kvstore.Config{Layout: r.KVLayout(), Memory: 1 << 20, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	e := inference.New(r, vocab, inference.Config{KVStore: st})
	defer e.Close()
	collect := func(e *inference.Engine, p []int32) inference.Result {
		t.Helper()
		return inferencetest.Run(t, e, inference.Request{Prompt: p, MaxTokens: 3, Logprobs: true, TopLogprobs: 5, IgnoreEOS: true})
	}
	first := collect(e, hist)
	collect(e, other)
	turn2 := append(append(append([]int32(nil), hist...), first.Choices[0].Tokens...), 9906, 11, 1268)
	got := collect(e, turn2)
	if c := got.Usage.CachedTokens; c != len(hist)+2 {
		t.Fatalf("turn 2 cached_tokens %d, want %d (the history and the reply's committed rows)", c, len(hist)+2)
	}

	fr := openFixed(t, v)
	fe := inference.New(fr, vocab, inference.Config{})
	defer fe.Close()
	want := collect(fe, turn2)
	if want.Usage.CachedTokens != 0 {
		t.Fatalf("the fresh engine reused %d rows", want.Usage.CachedTokens)
	}
	g, w := got.Choices[0], want.Choices[0]
	if !slices.Equal(g.Tokens, w.Tokens) {
		t.Fatalf("tokens %v after a restore, %v fresh", g.Tokens, w.Tokens)
	}
	if len(g.Logprobs) != 3 || len(w.Logprobs) != 3 || len(g.Logprobs[0].Top) != 5 {
		t.Fatalf("logprobs %d and %d, want 3 with 5 alternatives each", len(g.Logprobs), len(w.Logprobs))
	}
	for i := range g.Logprobs {
		for j := range g.Logprobs[i].Top {
			a, b := g.Logprobs[i].Top[j], w.Logprobs[i].Top[j]
			if a.ID != b.ID || math.Abs(float64(a.Logprob-b.Logprob)) > 1e-5 {
				t.Fatalf("token %d, top %d: %d %.7f after a restore, %d %.7f fresh", i, j, a.ID, a.Logprob, b.ID, b.Logprob)
			}
		}
	}
}
