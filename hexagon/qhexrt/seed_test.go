package qhexrt

import (
	"context"
	"slices"
	"testing"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/inference/inferencetest"
)

// TestSeedColdWarmRunner: on 16-bit QHexRT-contract bundles a prompt
// within one prefill window gives bit-identical logits, and leaves identical
// cache rows, whether its sequence starts cold or from rows restored out of
// the KV store (the engine names their tokens, SeqTokenRecorder, and the
// runner evaluates the prompt with one prefill call from 0 as when cold).
// Before, the warm prompt's last token went through the decode graph and
// near-tied logits flipped. (A chunked bundle's prefill graph starts at any
// row: a restored prefix is continued, not recomputed.)
func TestSeedColdWarmRunner(t *testing.T) {
	ctx := context.Background()
	for _, v := range []variant{
		{contract: simfile.QHexRT, window: 128, io: simfile.F16, kv: simfile.F16},
		{contract: simfile.QHexRT, window: 16, io: simfile.UFixed16, kv: simfile.F16},
	} {
		t.Run(v.String(), func(t *testing.T) {
			prompt := loadGolden(t).get(t, "cross128").PromptIDs[:min(v.window, 40)]
			next := append(slices.Clip(prompt), 791) // a continuation token
			eval := func(s *inferencetest.Session, seq []int32, valid int) []float32 {
				l, _, err := s.Eval(ctx, seq, valid)
				if err != nil {
					t.Fatal(err)
				}
				return copyLogits(l)
			}
			cold := inferencetest.NewSession(openTiny(t, v))
			coldPrompt := eval(cold, prompt, 0)
			coldNext := eval(cold, next, len(prompt))

			r := openTiny(t, v)
			first := inferencetest.NewSession(r)
			eval(first, next, 0)
			eval(first, append(slices.Clip(next), 13), len(next))
			for _, n := range []int{len(prompt) - 1, len(prompt) / 2} {
				rows := make([]byte, n*r.KVLayout().RowBytes)
				if err := first.Save(0, n, rows); err != nil {
					t.Fatal(err)
				}
				warm := inferencetest.NewSession(r)
				if err := warm.Restore(0, rows, prompt); err != nil {
					t.Fatal(err)
				}
				if got := eval(warm, prompt, n); !slices.Equal(got, coldPrompt) {
					t.Fatalf("prompt logits with %d rows restored differ from the cold ones", n)
				}
				if got := eval(warm, next, len(prompt)); !slices.Equal(got, coldNext) {
					t.Fatalf("the next step after a warm prompt (%d rows restored) differs from the cold one", n)
				}
				warm.Close()
			}
		})
	}
}
