package genie

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hexserve/hexserve/hexagon/genie/geniesim"
	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/inferencetest"
	"github.com/hexserve/hexserve/inference/kvstore"
	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

type idVocab struct{}

func (idVocab) Piece(id int32) []byte   { return fmt.Appendf(nil, "<%d>", id) }
func (idVocab) IsSpecial(id int32) bool { return id >= 128000 }

// TestSeedRepeats: on a w4a16 bundle (uint16 activations, uint8 KV) a seeded request repeats
// exactly, 20 seeds × 64 tokens: cold (nothing reused), warm (its retained rows taken over, then
// restored from the KV store) and under load (three other streams running, decoding and with
// prompts of their own in the same calls, speculative decoding on). The runner states its
// largest AR as the alignment of prompt runs, and the engine starts them at its multiples and
// reuses prompt rows only up to one; before, a warm prompt's last rows went through another call
// than the cold one's and the text differed after a few tokens.
func TestSeedRepeats(t *testing.T) {
	const ar, ctx, seeds, tokens = 16, 512, 20, 64
	dir := t.TempDir()
	if err := geniesim.Write(dir, geniesim.Options{Config: tinyllama.Tiny(), Name: "tiny", Precision: "w4a16",
		Weights: simfile.WeightF16, Parts: 3, PromptAR: ar, Ctx: ctx}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := openRunner(t, openRuntime(t), dir)
	if got := r.BatchLimits().Align; got != ar {
		t.Fatalf("Align %d, want the largest AR %d", got, ar)
	}
	spec := inference.Speculative{Enabled: true, PromptLookup: true}
	// A shared system prompt (two runs and a bit), then each seed's own turn.
	system := slices.Repeat(prompt, 3)
	req := func(seed int) inference.Request {
		s := int64(seed)
		p := append(slices.Clone(system), prompt[:1+seed%len(prompt)]...)
		p = append(p, int32(100+seed), 927)
		return inference.Request{Prompt: p, MaxTokens: tokens, IgnoreEOS: true, Owner: "alice",
			Sampling: sample.Params{Temperature: 0.8, TopK: 40, TopP: 0.95, Seed: &s}}
	}
	load := func(i int) inference.Request {
		s := int64(1000 + i)
		p := append(slices.Repeat([]int32{int32(500 + i)}, 5+7*i), prompt...)
		return inference.Request{Prompt: p, MaxTokens: 24 + 8*i, IgnoreEOS: true, Owner: "bob",
			Sampling: sample.Params{Temperature: 0.8, Seed: &s}}
	}
	store, err := kvstore.Open(kvstore.Config{Layout: r.KVLayout(), Memory: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	underLoad := func(e *inference.Engine, rq inference.Request) inference.Result {
		return inferencetest.RunAll(t, e, []inference.Request{load(0), load(1), rq, load(2)})[2]
	}
	n := seeds
	if testing.Short() {
		n = 4 // the full 20 seeds take ~30 s of CPU
	}
	for seed := range n {
		rq := req(seed)
		check := func(what string, res inference.Result, want []int32, cached bool) {
			t.Helper()
			if got := res.Choices[0].Tokens; !slices.Equal(got, want) {
				t.Fatalf("seed %d %s: %v, cold %v", seed, what, got, want)
			}
			if c := res.Usage.CachedTokens; (c > 0) != cached || c%ar != 0 {
				t.Fatalf("seed %d %s: %d cached tokens (want a multiple of %d, > 0: %v)", seed, what, c, ar, cached)
			}
		}
		e := inference.New(r, idVocab{}, inference.Config{MaxSequences: 4, Speculative: spec})
		res := inferencetest.Run(t, e, rq)
		want := res.Choices[0].Tokens
		check("cold", res, want, false)
		check("warm under load", underLoad(e, rq), want, true) // takes its retained rows over
		e.Close()

		e = inference.New(r, idVocab{}, inference.Config{MaxSequences: 4, Speculative: spec, KVStore: store})
		inferencetest.Run(t, e, rq) // saved to the store
		e.Close()
		e = inference.New(r, idVocab{}, inference.Config{MaxSequences: 4, Speculative: spec, KVStore: store})
		check("restored under load", underLoad(e, rq), want, true)
		check("warm", inferencetest.Run(t, e, rq), want, true)
		e.Close()
	}
}
