package sample

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/hexserve/hexserve/internal/half"
	"github.com/hexserve/hexserve/internal/threadcpu"
)

const llamaVocab = 128256

// peakedLogits resembles an LM head's output: a broad bulk (N(0, 2.5)) and a
// few dozen plausible tokens well above it.
func peakedLogits(r *rand.Rand) []float32 {
	x := randLogits(r, llamaVocab, 2.5)
	for k := range 40 {
		x[r.IntN(llamaVocab)] = 22 - 0.4*float32(k) + float32(r.NormFloat64())
	}
	return x
}

func toF16(x []float32) Logits {
	h := make([]uint16, len(x))
	for i, v := range x {
		h[i] = half.FromFloat32(v)
	}
	return Logits{Type: F16, Raw16: h}
}

// toU16 quantises x like a uint16 lm-head output: real = (q − 30000)·0.001
// (codes rounded and clamped; −30 to 35.5).
func toU16(x []float32) Logits {
	q := make([]uint16, len(x))
	for i, v := range x {
		q[i] = uint16(min(max(math.Round(float64(v)/0.001+30000), 0), 65535))
	}
	return Logits{Type: U16, Raw16: q, Scale: 0.001, Offset: -30000}
}

func benchSample(b *testing.B, l Logits, p Params, lp bool, bigMinOpt ...int) {
	s := newSampler(llamaVocab)
	if len(bigMinOpt) > 0 {
		s.bigMin = bigMinOpt[0]
	}
	r := rand.New(rand.NewPCG(1, 1))
	prompt := make([]int32, 200)
	for i := range prompt {
		prompt[i] = int32(r.IntN(llamaVocab))
	}
	s.Reset(p, prompt, 1)
	s.StartChoice()
	for range 50 {
		s.Accept(int32(r.IntN(llamaVocab)))
	}
	s.sample(l, lp, 5) // first use: buffers grow, pages are touched
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0, cpuOK := threadcpu.Time()
	n := 0
	for b.Loop() {
		s.sample(l, lp, 5)
		n++
	}
	if c1, _ := threadcpu.Time(); cpuOK {
		b.ReportMetric(float64(c1-c0)/float64(n), "cpu-ns/op")
	}
	b.ReportMetric(float64(s.inRange), "candidates")
}

// BenchmarkSample measures one sampling step over the Llama-3 vocabulary.
// The F16 and U16 cases of each distribution are the same logits, rounded
// to each type, and run back to back.
func BenchmarkSample(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	peaked := peakedLogits(r)
	flat := randLogits(r, llamaVocab, 1)
	nucleus := Params{Temperature: 0.7, TopP: 0.9, PresencePenalty: 0.5, FrequencyPenalty: 0.5, RepetitionPenalty: 1.1}
	b.Run("greedy/F32", func(b *testing.B) { benchSample(b, f32(peaked), Params{}, false) })
	b.Run("greedy/F16", func(b *testing.B) { benchSample(b, toF16(peaked), Params{}, false) })
	b.Run("greedy/U16", func(b *testing.B) { benchSample(b, toU16(peaked), Params{}, false) })
	b.Run("nucleus+penalties/F32", func(b *testing.B) { benchSample(b, f32(peaked), nucleus, false) })
	b.Run("nucleus+penalties/F16", func(b *testing.B) { benchSample(b, toF16(peaked), nucleus, false) })
	b.Run("nucleus+penalties/U16", func(b *testing.B) { benchSample(b, toU16(peaked), nucleus, false) })
	b.Run("nucleus+penalties+logprobs/F32", func(b *testing.B) { benchSample(b, f32(peaked), nucleus, true) })
	// The worst case: nearly flat logits put the whole vocabulary in play.
	b.Run("greedy/F16/flat", func(b *testing.B) { benchSample(b, toF16(flat), Params{}, false) })
	b.Run("greedy/U16/flat", func(b *testing.B) { benchSample(b, toU16(flat), Params{}, false) })
	b.Run("nucleus+penalties/F32/flat", func(b *testing.B) { benchSample(b, f32(flat), nucleus, false) })
	b.Run("nucleus+penalties/F16/flat", func(b *testing.B) { benchSample(b, toF16(flat), nucleus, false) })
	b.Run("nucleus+penalties/U16/flat", func(b *testing.B) { benchSample(b, toU16(flat), nucleus, false) })
	// In between (~13,000 candidates, like the tiny bundle's random-weight
	// logits), with either path.
	mid := randLogits(r, llamaVocab, 4.5)
	b.Run("greedy/F16/mid", func(b *testing.B) { benchSample(b, toF16(mid), Params{}, false) })
	b.Run("greedy/U16/mid", func(b *testing.B) { benchSample(b, toU16(mid), Params{}, false) })
	b.Run("nucleus+penalties/F32/mid", func(b *testing.B) { benchSample(b, f32(mid), nucleus, false) })
	b.Run("nucleus+penalties/F32/mid/collect", func(b *testing.B) { benchSample(b, f32(mid), nucleus, false, llamaVocab) })
	b.Run("nucleus+penalties/F32/mid/hist", func(b *testing.B) { benchSample(b, f32(mid), nucleus, false, 0) })
	b.Run("nucleus+penalties/F16/mid", func(b *testing.B) { benchSample(b, toF16(mid), nucleus, false) })
	b.Run("nucleus+penalties/U16/mid", func(b *testing.B) { benchSample(b, toU16(mid), nucleus, false) })
}
