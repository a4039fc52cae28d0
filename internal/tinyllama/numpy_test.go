package tinyllama

import (
	"math"
	"slices"
	"testing"
)

// numpyCase is one case of testdata/tinyllama/numpy_<family>.json, written by
// numpy_reference.py (an independent float64 reference in numpy, built from SPEC.md alone).
type numpyCase struct {
	Name   string `json:"name"`
	Checks []struct {
		Pos       int         `json:"pos"`
		Top       [][]float64 `json:"top"`
		LogSumExp float64     `json:"logsumexp"`
	} `json:"checks"`
	Greedy []int `json:"greedy"`
}

// TestNumpyReference: every family's golden (the Go reference's output) agrees with the
// checked-in numpy reference, without running Python: the same greedy tokens, the same top-20
// ids and logits and logsumexp at every checked position within 1e-9; and the Go reference,
// run now on each family's short case, agrees with numpy too.
func TestNumpyReference(t *testing.T) {
	for _, family := range []string{"public", "qwen2", "qwen3", "phi3", "granite", "falcon3"} {
		t.Run(family, func(t *testing.T) {
			var g struct {
				Config Config       `json:"config"`
				Cases  []goldenCase `json:"cases"`
			}
			var np struct {
				Cases []numpyCase `json:"cases"`
			}
			readJSON(t, "../../testdata/tinyllama/golden_tiny_"+family+".json", &g)
			readJSON(t, "../../testdata/tinyllama/numpy_"+family+".json", &np)
			if len(np.Cases) != len(g.Cases) {
				t.Fatalf("numpy has %d cases, the golden %d", len(np.Cases), len(g.Cases))
			}
			for i, nc := range np.Cases {
				gc := g.Cases[i]
				if !slices.Equal(gc.Greedy, nc.Greedy) {
					t.Errorf("%s: greedy\n golden %v\n numpy  %v", nc.Name, gc.Greedy, nc.Greedy)
				}
				if len(gc.Checks) != len(nc.Checks) {
					t.Fatalf("%s: %d checks, numpy %d", nc.Name, len(gc.Checks), len(nc.Checks))
				}
				for j, nch := range nc.Checks {
					compareTop(t, nc.Name, nch.Pos, gc.Checks[j].Pos, gc.Checks[j].Top, nch.Top, gc.Checks[j].LogSumExp, nch.LogSumExp)
				}
			}
			m, err := NewModel(g.Config)
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Greedy(g.Cases[0].PromptIDs, len(np.Cases[0].Greedy))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, np.Cases[0].Greedy) {
				t.Errorf("the Go reference's greedy tokens now\n got   %v\n numpy %v", got, np.Cases[0].Greedy)
			}
		})
	}
}

// compareTop checks one position's top-20 (id, logit) pairs and logsumexp against numpy's.
func compareTop(t *testing.T, name string, pos, gpos int, top, ntop [][]float64, lse, nlse float64) {
	t.Helper()
	if pos != gpos || len(top) != len(ntop) {
		t.Fatalf("%s: position %d with %d top logits, numpy %d with %d", name, gpos, len(top), pos, len(ntop))
	}
	for k := range top {
		if top[k][0] != ntop[k][0] || math.Abs(top[k][1]-ntop[k][1]) > 1e-9 {
			t.Errorf("%s pos %d: top[%d] golden (%v, %v), numpy (%v, %v)", name, pos, k, top[k][0], top[k][1], ntop[k][0], ntop[k][1])
		}
	}
	if math.Abs(lse-nlse) > 1e-9 {
		t.Errorf("%s pos %d: logsumexp golden %v, numpy %v", name, pos, lse, nlse)
	}
}
