package inference_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/hexserve/hexserve/inference"

	"github.com/hexserve/hexserve/inference/inferencetest"
	"github.com/hexserve/hexserve/inference/sample"
)

// BenchmarkDecodeStep measures the engine's whole host side of a decode step
// (Eval bookkeeping, sampling over 128,256 F32 logits, text, events, a
// reader) with a scripted model that costs next to nothing. One op is one token.
func BenchmarkDecodeStep(b *testing.B) {
	// Realistic logits: a N(0, 2.5) bulk and 40 plausible tokens up to ~22,
	// with the scripted token 2 above the best of them.
	r := rand.New(rand.NewPCG(3, 3))
	bg := make([]float32, 128256)
	for i := range bg {
		bg[i] = float32(r.NormFloat64() * 2.5)
	}
	for k := range 40 {
		bg[r.IntN(len(bg))] = 22 - 0.4*float32(k) + float32(r.NormFloat64())
	}
	nucleus := sample.Params{Temperature: 0.7, TopP: 0.9, PresencePenalty: 0.5, FrequencyPenalty: 0.5, RepetitionPenalty: 1.1}
	for _, tc := range []struct {
		name string
		p    sample.Params
		bg   []float32
	}{
		{"greedy", sample.Params{}, nil},
		{"nucleus+penalties", nucleus, nil},
		{"greedy/peaked", sample.Params{}, bg},
		{"nucleus+penalties/peaked", nucleus, bg},
	} {
		b.Run(tc.name, func(b *testing.B) {
			script := make([]int32, 600)
			words := map[int32]string{}
			for i := range script {
				script[i] = int32(100 + i%50)
				words[int32(100+i%50)] = " tok"
			}
			m := inferencetest.NewScripted(inference.ModelInfo{ContextLen: 512, EOS: []int32{128009}}, script)
			m.Record(false)
			if tc.bg != nil {
				m.SetBackground(tc.bg, 2)
			}
			e := inference.New(m, inferencetest.NewVocab(words), inference.Config{})
			defer e.Close()
			prompt := make([]int32, 12)
			b.ResetTimer()
			n := 0
			for n < b.N {
				s, err := e.Submit(context.Background(), inference.Request{
					Prompt: prompt, MaxTokens: min(b.N-n, 500), Sampling: tc.p, Stop: []string{"<end>"}})
				if err != nil {
					b.Fatal(err)
				}
				r, err := inference.Collect(s)
				if err != nil {
					b.Fatal(err)
				}
				n += r.Usage.CompletionTokens
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
