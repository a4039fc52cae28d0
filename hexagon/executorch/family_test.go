package executorch

import (
	"testing"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// TestFamilyGolden: each family's tiny model as a .pte with float16 weights and float32 KV and
// logits (q/k norms, biases, θ 1e6 RoPE, and Phi-3's split fused weights and LongRoPE with its
// attention factor, computed inside hostsim's graphs from the export's header and divisors)
// reproduces the greedy tokens of its golden file (the float64 reference), over one and
// two shards.
func TestFamilyGolden(t *testing.T) {
	rt := openRuntime(t)
	for _, family := range []string{"qwen3", "qwen2", "phi3"} {
		c, err := tinyllama.FamilyPreset(family, "tiny")
		if err != nil {
			t.Fatal(err)
		}
		for _, shards := range []int{1, 2} {
			if testing.Short() && shards > 1 {
				continue
			}
			r := openRunner(t, rt, writePTE(t, pteOpts{ctx: 512, ar: 32, shards: shards, kv: simfile.F32, logits: simfile.F32, cfg: &c}))
			for _, gc := range loadGoldenFile(t, "golden_tiny_"+family+".json") {
				got, _ := greedy(t, r, append([]int32(nil), gc.PromptIDs...), 0, len(gc.Greedy))
				for i := range gc.Greedy {
					if got[i] != gc.Greedy[i] {
						t.Fatalf("%s shards %d %s: token %d = %d, want %d (got %v)", family, shards, gc.Name, i, got[i], gc.Greedy[i], got)
					}
				}
			}
		}
	}
}
