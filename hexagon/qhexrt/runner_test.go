package qhexrt

import (
	"slices"
	"testing"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
)

// openTiny opens the tiny bundle of v on hostsim.
func openTiny(t testing.TB, v variant) *Runner {
	t.Helper()
	cfg := hostsimConfig(t)
	dir := tinyBundle(t, v)
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	r, err := Open(Config{Bundle: dir, QNN: cfg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

// f32 is the exact configuration: f32 I/O and f32 KV cache.
func f32(contract simfile.Contract, window int, mask simfile.MaskKind) variant {
	return variant{contract: contract, window: window, io: simfile.F32, kv: simfile.F32, mask: mask}
}

// TestGoldenExact checks the public tiny model's top-20 logits at every
// checked position and its greedy tokens, through Go → purego → hostsim, in
// both contracts, prefill windows 128 and 16 and both mask encodings.
// -short (make test's -race run, arm64 under qemu) runs half of the 8
// combinations, in which each pair of settings still occurs once.
func TestGoldenExact(t *testing.T) {
	g := loadGolden(t)
	const tol = 1e-4
	var variants []variant
	for ci, c := range []simfile.Contract{simfile.QHexRT, simfile.Chunked} {
		for wi, w := range []int{128, 16} {
			for mi, m := range []simfile.MaskKind{simfile.MaskAdditive, simfile.MaskU16} {
				if testing.Short() && ci^wi^mi != 0 {
					continue
				}
				variants = append(variants, f32(c, w, m))
			}
		}
	}
	for _, v := range variants {
		t.Run(v.String(), func(t *testing.T) {
			r := openTiny(t, v)
			for _, name := range []string{"short", "cross128"} {
				c := g.get(t, name)
				for _, prefill := range []bool{true, false} {
					worst, misses := checkPositions(t, r, c, prefill)
					if worst > tol || misses > 0 {
						t.Errorf("%s (prefill %v): worst top-20 error %.3g (tolerance %g), %d top-1 misses", name, prefill, worst, tol, misses)
					}
				}
				steps := len(c.Greedy)
				if got := greedy(t, r, c, steps); !slices.Equal(got, c.Greedy[:steps]) {
					t.Errorf("%s greedy = %v\nwant %v", name, got, c.Greedy[:steps])
				}
			}
		})
	}
}
