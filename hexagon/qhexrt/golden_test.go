package qhexrt

import (
	"context"
	"math"
	"testing"

	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/inferencetest"
	"github.com/hexserve/hexserve/inference/sample"
)

// golden is testdata/tinyllama/golden_tiny_public.json.
type golden struct {
	Cases []goldenCase `json:"cases"`
}

type goldenCase struct {
	Name      string  `json:"name"`
	PromptIDs []int32 `json:"prompt_ids"`
	Checks    []struct {
		Pos    int         `json:"pos"`
		Margin float64     `json:"margin"`
		Top    [][]float64 `json:"top"` // [id, logit]
	} `json:"checks"`
	Greedy        []int32   `json:"greedy"`
	GreedyMargins []float64 `json:"greedy_margins"`
}

func loadGolden(t testing.TB) golden {
	var g golden
	readJSON(t, "golden_tiny_public.json", &g)
	return g
}

func (g golden) get(t testing.TB, name string) goldenCase {
	for _, c := range g.Cases {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no golden case %q", name)
	return goldenCase{}
}

// topError is the largest |logit - golden| over a check's top-20, and
// whether the argmax of l is the golden top-1.
func topError(l sample.Logits, top [][]float64) (maxErr float64, top1 bool) {
	for _, e := range top {
		maxErr = max(maxErr, math.Abs(float64(l.At(int(e[0])))-e[1]))
	}
	return maxErr, argmax(l) == int32(top[0][0])
}

// argmax is l's greedy token.
func argmax(l sample.Logits) int32 { return int32(inferencetest.Argmax(l)) }

// evalRows evaluates seq on a new sequence of r through the Batcher, as
// the engine's Steps would: runs of a prefill window's rows (prefill), else
// one row per Step (on a chunked bundle the decode or prefill graph, as the
// policy chooses). It calls f with the logits of every position want
// accepts, and releases the sequence.
func evalRows(ctx context.Context, r *Runner, seq []int32, prefill bool, want func(pos int) bool, f func(pos int, l sample.Logits)) error {
	id, err := r.Open(len(seq))
	if err != nil {
		return err
	}
	defer r.Release(id)
	per := 1
	if prefill {
		per = r.BatchLimits().Rows
	}
	for at := 0; at < len(seq); at += per {
		run := inference.Run{Seq: id, Start: at, Tokens: seq[at:min(at+per, len(seq))]}
		out, err := r.Step(ctx, []inference.Run{run})
		if err != nil {
			return err
		}
		for i := range run.Tokens {
			if !want(at + i) {
				continue
			}
			l, err := out[0].Logits(ctx, i)
			if err != nil {
				return err
			}
			f(at+i, l)
		}
	}
	return nil
}

// checkPositions evaluates c's prompt from position 0 (prefill windows or
// one row per Step) and returns the worst top-20 error and the number of
// checked positions whose top-1 differs.
func checkPositions(t *testing.T, r *Runner, c goldenCase, prefill bool) (worst float64, top1Misses int) {
	t.Helper()
	want := map[int][][]float64{}
	for _, ch := range c.Checks {
		want[ch.Pos] = ch.Top
	}
	seen := 0
	wanted := func(pos int) bool { _, ok := want[pos]; return ok }
	err := evalRows(context.Background(), r, c.PromptIDs, prefill, wanted, func(pos int, l sample.Logits) {
		seen++
		e, ok1 := topError(l, want[pos])
		worst = max(worst, e)
		if !ok1 {
			top1Misses++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != len(c.Checks) {
		t.Fatalf("%d of %d checked positions evaluated", seen, len(c.Checks))
	}
	return worst, top1Misses
}

// greedy continues c's prompt through Eval (the engine's path: the KV cache
// reused) for len(c.Greedy) tokens and returns the generated ids and the
// worst |logit error| of the chosen token against the golden margin bound.
func greedy(t *testing.T, r *Runner, c goldenCase, steps int) []int32 {
	t.Helper()
	seq := append([]int32(nil), c.PromptIDs...)
	valid := 0
	var out []int32
	for range steps {
		l, reused, err := evalOn(r).Eval(context.Background(), seq, valid)
		if err != nil {
			t.Fatal(err)
		}
		if reused > valid {
			t.Fatalf("reused %d rows of %d valid", reused, valid)
		}
		id := argmax(l)
		out = append(out, id)
		valid = len(seq)
		seq = append(seq, id)
	}
	return out
}
