package executorch

import (
	"slices"
	"testing"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/inferencetest"
	"github.com/hexserve/hexserve/inference/kvstore"
	"github.com/hexserve/hexserve/inference/sample"
)

// TestSeedRepeats: on a .pte of each KV precision (uint8 with uint16 logits,
// mkmodel's default; uint16; float32) a seeded request repeats exactly:
// cold (nothing reused), warm (its retained rows taken over, beside three
// other streams with prompts of their own), after a prompt sharing a
// prefix, and with its rows restored from the KV store; speculative decoding
// on (prompt lookup: the system prompt repeats). prefill_forward
// reads its call's own rows at float32 and older rows from the cache, so a
// row's bits depend on where its chunk starts: the runner states the prefill
// window as the alignment of prompt runs (inference.BatchLimits.Align).
func TestSeedRepeats(t *testing.T) {
	const ar, ctx = 16, 256
	seeds, tokens := 6, 40
	if testing.Short() {
		seeds, tokens = 2, 24
	}
	rt := openRuntime(t)
	spec := inference.Speculative{Enabled: true, PromptLookup: true}
	system := slices.Repeat(batchPrompts[2][1:], 3) // a shared system prompt: two windows and a bit
	req := func(seed, extra int) inference.Request {
		s := int64(seed)
		p := append([]int32{128000}, system...)
		p = append(p, int32(100+seed), 927)
		p = append(p, slices.Repeat([]int32{int32(300 + seed)}, extra)...)
		return inference.Request{Prompt: p, MaxTokens: tokens, IgnoreEOS: true, Owner: "alice",
			Sampling: sample.Params{Temperature: 1.2, TopK: 40, TopP: 0.95, Seed: &s}}
	}
	load := func(i int) inference.Request {
		s := int64(1000 + i)
		p := append(slices.Repeat([]int32{int32(500 + i)}, 5+7*i), batchPrompts[0]...)
		return inference.Request{Prompt: p, MaxTokens: 12 + 6*i, IgnoreEOS: true, Owner: "bob",
			Sampling: sample.Params{Temperature: 0.8, Seed: &s}}
	}
	for _, kv := range []struct {
		name       string
		kv, logits simfile.DType
	}{{"u8", simfile.UFixed8, simfile.UFixed16}, {"u16", simfile.UFixed16, simfile.UFixed16}, {"f32", simfile.F32, simfile.F32}} {
		t.Run(kv.name, func(t *testing.T) {
			r := openRunner(t, rt, writePTE(t, pteOpts{ctx: ctx, ar: ar, shards: 1, kv: kv.kv, logits: kv.logits}))
			align := r.BatchLimits().Align
			if kv.kv != simfile.F32 && align != ar {
				t.Fatalf("Align %d, want the prefill window %d", align, ar)
			}
			store, err := kvstore.Open(kvstore.Config{Layout: r.KVLayout(), Memory: 64 << 20})
			if err != nil {
				t.Fatal(err)
			}
			underLoad := func(e *inference.Engine, rq inference.Request) inference.Result {
				return inferencetest.RunAll(t, e, []inference.Request{load(0), load(1), rq, load(2)})[2]
			}
			for seed := range seeds {
				rq := req(seed, 0)
				check := func(what string, res inference.Result, want []int32, cached bool) {
					t.Helper()
					if got := res.Choices[0].Tokens; !slices.Equal(got, want) {
						t.Fatalf("seed %d %s: %v, cold %v", seed, what, got, want)
					}
					c := res.Usage.CachedTokens
					if (c > 0) != cached || (align > 1 && c%align != 0) {
						t.Fatalf("seed %d %s: %d cached tokens (want > 0: %v, a multiple of %d)", seed, what, c, cached, align)
					}
				}
				e := inference.New(r, byteVocab{}, inference.Config{MaxSequences: 4, Speculative: spec})
				res := inferencetest.Run(t, e, rq)
				want := res.Choices[0].Tokens
				check("cold", res, want, false)
				check("warm under load", underLoad(e, rq), want, true)
				e.Close()

				// After a prompt sharing the system prompt (cold for rq's own turn).
				e = inference.New(r, byteVocab{}, inference.Config{MaxSequences: 4, Speculative: spec})
				inferencetest.Run(t, e, req(seed+1, 5))
				check("after a shared prefix", inferencetest.Run(t, e, rq), want, true)
				e.Close()

				e = inference.New(r, byteVocab{}, inference.Config{MaxSequences: 4, Speculative: spec, KVStore: store})
				inferencetest.Run(t, e, rq) // saved to the store
				e.Close()
				e = inference.New(r, byteVocab{}, inference.Config{MaxSequences: 4, Speculative: spec, KVStore: store})
				check("restored under load", underLoad(e, rq), want, true)
				check("warm", inferencetest.Run(t, e, rq), want, true)
				e.Close()
			}
		})
	}
}
