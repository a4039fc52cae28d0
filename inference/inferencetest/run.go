package inferencetest

import (
	"sync"
	"testing"

	"github.com/hexserve/hexserve/inference"

	"github.com/hexserve/hexserve/inference/sample"
)

// Submit submits req to e, failing t on an error.
func Submit(t testing.TB, e *inference.Engine, req inference.Request) *inference.Stream {
	t.Helper()
	s, err := e.Submit(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Run submits req to e and collects its result, failing t on an error.
func Run(t testing.TB, e *inference.Engine, req inference.Request) inference.Result {
	t.Helper()
	res, err := inference.Collect(Submit(t, e, req))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// RunAll submits reqs at once (so that they run side by side) and collects
// their results, failing t on an error.
func RunAll(t testing.TB, e *inference.Engine, reqs []inference.Request) []inference.Result {
	t.Helper()
	res := make([]inference.Result, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		s, err := e.Submit(t.Context(), r)
		if err != nil {
			t.Fatalf("Submit %d: %v", i, err)
		}
		wg.Go(func() { res[i], errs[i] = inference.Collect(s) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	return res
}

// Tokens returns the tokens of each of r's choices.
func Tokens(r inference.Result) [][]int32 {
	var out [][]int32
	for _, c := range r.Choices {
		out = append(out, c.Tokens)
	}
	return out
}

// Argmax is l's greedy token: the index of its largest value (the first on
// ties).
func Argmax(l sample.Logits) int {
	best := 0
	for i := 1; i < l.Len(); i++ {
		if l.At(i) > l.At(best) {
			best = i
		}
	}
	return best
}
