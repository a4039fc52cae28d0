package sample

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// stepLogits are rows that take each path of a step at V = 128,256: peaked
// (collection), nearly flat F32 (bucket histogram), F16 and U16 (code
// histogram).
func stepLogits(r *rand.Rand) []Logits {
	peaked := peakedLogits(r)
	flat := randLogits(r, llamaVocab, 1)
	return []Logits{f32(peaked), f32(flat), toF16(flat), toU16(flat), toF16(peaked)}
}

// seqParams are the parameters of the test sequences: nucleus with
// penalties, a repetition window, bias, top_k, greedy.
func seqParams(i int) Params {
	return []Params{
		{Temperature: 0.7, TopP: 0.9, PresencePenalty: 0.5, FrequencyPenalty: 0.5, RepetitionPenalty: 1.1},
		{Temperature: 1, TopP: 0.95, RepetitionPenalty: 1.2, RepeatLastN: 64, LogitBias: map[int32]float32{7: 3, 99: -100}},
		{Temperature: 0.8, TopK: 40, MinP: 0.05},
		{},
	}[i%4]
}

// startSeq returns a sampler for sequence i with a 200-token prompt.
func startSeq(r *rand.Rand, i int) *Sampler {
	s := New(llamaVocab)
	prompt := make([]int32, 200)
	for k := range prompt {
		prompt[k] = int32(r.IntN(llamaVocab))
	}
	s.Reset(seqParams(i), prompt, uint64(1000+i))
	s.StartChoice()
	return s
}

// TestSequenceMemory bounds the host memory a sequence's sampler holds
// between steps at V = 128,256, after steps on every path: the heap with 32
// sequences alive, less the heap once they are dropped (the Scratch they
// shared stays: it is the sampling goroutine's, counted once).
func TestSequenceMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("samples 32 sequences over every path at V = 128,256 (seconds)")
	}
	const nSeq, steps = 32, 10
	r := rand.New(rand.NewPCG(21, 22))
	rows := stepLogits(r)
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	empty := heap()
	var sc Scratch
	seqs := make([]*Sampler, nSeq)
	for i := range seqs {
		seqs[i] = startSeq(r, i)
	}
	for step := range steps {
		for i, s := range seqs {
			tok, _ := s.Sample(&sc, rows[(i+step)%len(rows)], i%5 == 0, 5)
			s.Accept(tok)
		}
	}
	with := heap()
	clear(seqs)
	without := heap()
	per := (int64(with) - int64(without)) / nSeq
	t.Logf("%d sequences at V = %d: %d bytes each (%d KiB); the shared Scratch: %d KiB",
		nSeq, llamaVocab, per, per>>10, (int64(without)-int64(empty))>>10)
	if per > 1<<20 {
		t.Errorf("a sequence holds %d bytes, over 1 MiB", per)
	}
	if per <= 0 {
		t.Errorf("a sequence holds %d bytes: the measurement is broken", per)
	}
	runtime.KeepAlive(&sc)
}

// TestWorkersBitIdentical: rows sampled by Workers (four goroutines, each
// with its own Scratch) give every sequence the tokens and logprobs it gets
// when one goroutine samples all, on every path, with seeds.
func TestWorkersBitIdentical(t *testing.T) {
	const nSeq = 8
	steps := 12
	if testing.Short() {
		steps = 4
	}
	r := rand.New(rand.NewPCG(23, 24))
	rows := stepLogits(r)
	run := func(helpers int) [][]int32 {
		rr := rand.New(rand.NewPCG(25, 26))
		seqs := make([]*Sampler, nSeq)
		for i := range seqs {
			seqs[i] = startSeq(rr, i)
		}
		w := NewWorkers(helpers)
		defer w.Stop()
		out := make([][]int32, nSeq)
		jobs := make([]Job, nSeq)
		for step := range steps {
			for i, s := range seqs {
				// rotate the rows so each goroutine's Scratch serves
				// different paths and sequences from step to step
				jobs[i] = Job{S: s, L: rows[(i+step)%len(rows)], WantLP: i%3 == 0, Top: 3}
			}
			w.Run(jobs)
			for i, j := range jobs {
				seqs[i].Accept(j.Tok)
				out[i] = append(out[i], j.Tok)
				if j.LP != nil {
					out[i] = append(out[i], int32(j.LP.Logprob*1e6), j.LP.Top[0].ID)
				}
			}
		}
		return out
	}
	alone, together := run(0), run(3)
	distinct := map[int32]bool{}
	for i := range alone {
		if !slices.Equal(alone[i], together[i]) {
			t.Errorf("sequence %d: one goroutine %v, four %v", i, alone[i], together[i])
		}
		for _, tok := range alone[i] {
			distinct[tok] = true
		}
	}
	if len(distinct) < nSeq {
		t.Errorf("only %d distinct tokens: the draws are not random, the test says nothing", len(distinct))
	}
}

// TestScratchTablesShared: sequences of six temperatures (more than a
// Scratch keeps weight tables for) sampling in turn on one Scratch draw what
// each draws on a Scratch of its own, on the code histogram.
func TestScratchTablesShared(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	flat := randLogits(r, llamaVocab, 1)
	rows := []Logits{toF16(flat), toU16(flat)}
	temps := []float32{0.5, 0.7, 0.9, 1.1, 1.3, 1.5}
	run := func(shared bool) [][]int32 {
		var one Scratch
		out := make([][]int32, len(temps))
		seqs := make([]*Sampler, len(temps))
		own := make([]Scratch, len(temps))
		for i, temp := range temps {
			seqs[i] = New(llamaVocab)
			seqs[i].Reset(Params{Temperature: temp, TopP: 0.9}, nil, uint64(i))
			seqs[i].StartChoice()
		}
		for step := range 6 {
			for i, s := range seqs {
				sc := &own[i]
				if shared {
					sc = &one
				}
				tok, _ := s.Sample(sc, rows[step%2], false, 0)
				if !s.code {
					t.Fatal("code histogram not taken")
				}
				out[i] = append(out[i], tok)
			}
		}
		return out
	}
	alone, shared := run(false), run(true)
	for i := range alone {
		if !slices.Equal(alone[i], shared[i]) {
			t.Errorf("T = %v: own scratch %v, shared %v", temps[i], alone[i], shared[i])
		}
	}
}
