package qhexrt

import (
	"slices"
	"testing"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/inferencetest"
)

// TestEngineRetainedRows: finished sequences stay in the pool (retained);
// a later request takes one over or forks it, and nothing it does changes
// rows another sequence shares: in two rounds of requests with a common
// prefix (a fork of 27 rows, then a request sharing only 25 with the
// forked sequence), every answer is the one it gives alone, on a chunked
// bundle (shared slots) and a QHexRT-contract one (copies).
func TestEngineRetainedRows(t *testing.T) {
	skipNumeric(t)
	sys := testPrompt(50, 25)
	pr := func(tail ...int32) []int32 { return append(slices.Clone(sys), tail...) }
	a := inference.Request{Prompt: pr(11, 12, 13, 14, 15, 16), MaxTokens: 8, IgnoreEOS: true, Logprobs: true}
	b := inference.Request{Prompt: pr(11, 12, 23, 24, 25), MaxTokens: 8, IgnoreEOS: true, Logprobs: true}
	c := inference.Request{Prompt: pr(31, 32, 33), MaxTokens: 8, IgnoreEOS: true, Logprobs: true}
	// run returns each request's tokens' logprobs (float32 bits: the
	// logits must be the same, not only the tokens).
	run := func(t *testing.T, e *inference.Engine, rs ...inference.Request) [][]float32 {
		out := make([][]float32, len(rs))
		for i, res := range inferencetest.RunAll(t, e, rs) {
			for _, lp := range res.Choices[0].Logprobs {
				out[i] = append(out[i], lp.Logprob)
			}
		}
		return out
	}
	for _, v := range []variant{f32(simfile.Chunked, 16, simfile.MaskAdditive), f32(simfile.QHexRT, 16, simfile.MaskAdditive)} {
		t.Run(v.String(), func(t *testing.T) {
			r := openTiny(t, v)
			alone := map[*inference.Request][]float32{}
			for _, q := range []*inference.Request{&a, &b, &c} {
				e := inference.New(r, idVocab{}, inference.Config{MaxSequences: 1})
				alone[q] = run(t, e, *q)[0]
				e.Close()
			}
			e := inference.New(r, idVocab{}, inference.Config{MaxSequences: 4})
			defer e.Close()
			for round, rs := range [][]*inference.Request{{&a, &b}, {&c}, {&a, &b, &c}} {
				var reqs []inference.Request
				for _, q := range rs {
					reqs = append(reqs, *q)
				}
				for i, got := range run(t, e, reqs...) {
					if !slices.Equal(got, alone[rs[i]]) {
						t.Errorf("round %d request %d: %v, alone %v", round, i, got, alone[rs[i]])
					}
				}
			}
		})
	}
}
