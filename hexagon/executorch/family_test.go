package executorch

import (
	"testing"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/internal/costtest"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// TestFamilyGolden: each family's tiny model as a .pte with float16 weights and float32 KV and
// logits (q/k norms, biases, θ 1e6 RoPE, Phi-3's split fused weights and LongRoPE with its
// attention factor, computed inside hostsim's graphs from the export's header and divisors,
// Granite's multipliers from the header, Falcon3's head_dim 256)
// reproduces the greedy tokens of its golden file (the float64 reference), over one and
// two shards.
func TestFamilyGolden(t *testing.T) {
	costtest.SkipNumericUnderRace(t, "writes and runs each family's tiny .pte")
	rt := openRuntime(t)
	for _, family := range []string{"qwen3", "qwen2", "phi3", "granite", "falcon3"} {
		c, err := tinyllama.FamilyPreset(family, "tiny")
		if err != nil {
			t.Fatal(err)
		}
		for _, shards := range []int{1, 2} {
			if testing.Short() && shards > 1 {
				continue
			}
			r := openRunner(t, rt, writePTE(t, pteOpts{ctx: 512, ar: 32, shards: shards, kv: simfile.F32, logits: simfile.F32, cfg: &c}))
			for i, gc := range loadGoldenFile(t, "golden_tiny_"+family+".json") {
				if testing.Short() && i > 0 {
					break // -short: the first case (40 greedy tokens); the full pass runs them all
				}
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

// TestLongRoPEWithMultipliers: a .pte whose header carries both LongRoPE (flag bit 3) and Granite's
// multipliers (flag bit 4, a 144-byte header) computes both: the tiny Phi-3 shape with Granite's
// tiny multipliers (no such checkpoint exists; the flags are independent) gives the float64
// reference's greedy tokens.
func TestLongRoPEWithMultipliers(t *testing.T) {
	c, err := tinyllama.FamilyPreset("phi3", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	c.ModelType, c.Architectures = "granite", []string{"GraniteForCausalLM"}
	c.EmbeddingMultiplier, c.AttentionMultiplier, c.ResidualMultiplier, c.LogitsScaling = 1.25, 0.125, 0.22, 8
	m, err := tinyllama.NewModel(c)
	if err != nil {
		t.Fatal(err)
	}
	prompt := []int{1, 32010, 1724, 338, 29871, 29906, 718}
	want, err := m.Greedy(prompt, 24)
	if err != nil {
		t.Fatal(err)
	}
	r := openRunner(t, openRuntime(t), writePTE(t, pteOpts{ctx: 512, ar: 32, shards: 1, kv: simfile.F32, logits: simfile.F32, cfg: &c}))
	seq := make([]int32, len(prompt))
	for i, id := range prompt {
		seq[i] = int32(id)
	}
	got, _ := greedy(t, r, seq, 0, len(want))
	for i := range want {
		if int(got[i]) != want[i] {
			t.Fatalf("token %d = %d, reference %d (got %v, want %v)", i, got[i], want[i], got, want)
		}
	}
}
