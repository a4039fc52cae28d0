package qhexrt

import (
	"context"
	"slices"
	"testing"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
)

// TestSeedColdWarmRunner: on 16-bit bundles a prompt within one prefill
// window gives bit-identical logits, and leaves identical cache rows, whether
// the cache was cold or held the prompt and tokens generated after it (the
// engine then passes the prompt's rows as valid). Before, the warm prompt's
// last token went through the decode graph and near-tied logits flipped.
func TestSeedColdWarmRunner(t *testing.T) {
	ctx := context.Background()
	for _, v := range []variant{
		{contract: simfile.QHexRT, window: 128, io: simfile.F16, kv: simfile.F16},
		{contract: simfile.Chunked, window: 16, io: simfile.F16, kv: simfile.F16, mask: simfile.MaskU16},
		{contract: simfile.QHexRT, window: 16, io: simfile.UFixed16, kv: simfile.F16},
	} {
		t.Run(v.String(), func(t *testing.T) {
			prompt := loadGolden(t).get(t, "cross128").PromptIDs[:min(v.window, 40)]
			next := append(slices.Clip(prompt), 791) // a continuation token
			eval := func(r *Runner, seq []int32, valid int) []float32 {
				l, _, err := r.Eval(ctx, seq, valid)
				if err != nil {
					t.Fatal(err)
				}
				return copyLogits(l)
			}
			cold := openTiny(t, v)
			coldPrompt := eval(cold, prompt, 0)
			coldNext := eval(cold, next, len(prompt))

			warm := openTiny(t, v)
			eval(warm, prompt, 0)
			eval(warm, next, len(prompt))
			eval(warm, append(slices.Clip(next), 13), len(next))
			for _, valid := range []int{len(prompt), len(prompt) - 1, len(prompt) / 2} {
				if got := eval(warm, prompt, valid); !slices.Equal(got, coldPrompt) {
					t.Fatalf("prompt logits with %d rows cached differ from the cold ones", valid)
				}
				if got := eval(warm, next, len(prompt)); !slices.Equal(got, coldNext) {
					t.Fatalf("the next step after a warm prompt (%d rows cached) differs from the cold one", valid)
				}
			}
		})
	}
}
