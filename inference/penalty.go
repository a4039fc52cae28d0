package inference

import (
	"maps"
	"math/rand/v2"
	"slices"
)

func bit(s []uint64, id int32) bool { return s[id>>6]&(1<<(uint32(id)&63)) != 0 }
func set(s []uint64, id int32)      { s[id>>6] |= 1 << (uint32(id) & 63) }

// reset prepares the sampler for a request.
func (s *sampler) reset(p Sampling, prompt []int32, seed uint64) {
	s.clear()
	s.p = p
	s.prompt = prompt
	s.rep = p.RepetitionPenalty > 0 && p.RepetitionPenalty != 1
	s.penal = p.PresencePenalty != 0 || p.FrequencyPenalty != 0
	s.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func (s *sampler) clear() {
	for _, id := range s.tlist {
		s.counts[id] = 0
		s.bias[id] = 0
		s.prev[id>>6] = 0
		s.touched[id>>6] = 0
		s.win[id] = 0
	}
	s.tlist = s.tlist[:0]
	s.recent = s.recent[:0]
}

func (s *sampler) touch(id int32) {
	if !bit(s.touched, id) {
		set(s.touched, id)
		s.tlist = append(s.tlist, id)
	}
}

// startChoice clears the generated-token state; the rng carries on, so the
// choices of a seeded request are reproducible as a whole.
func (s *sampler) startChoice() {
	s.clear()
	// In id order: the touched ids' order is the candidates' order, which
	// the draw depends on, so map order would make a seeded request's
	// tokens vary from run to run.
	for _, id := range slices.Sorted(maps.Keys(s.p.LogitBias)) {
		if b := s.p.LogitBias[id]; b != 0 {
			s.bias[id] = b
			s.touch(id)
		}
	}
	if s.rep {
		p := s.prompt
		if n := s.p.RepeatLastN; n > 0 && len(p) > n {
			p = p[len(p)-n:]
		}
		for _, id := range p {
			s.seen(id)
		}
	}
}

// accept records a generated token for the penalties.
func (s *sampler) accept(id int32) {
	if s.rep {
		s.seen(id)
	}
	if s.penal {
		s.counts[id]++
		s.touch(id)
	}
}

// seen adds id to the tokens the repetition penalty applies to. With
// RepeatLastN the token that leaves the window stops counting.
func (s *sampler) seen(id int32) {
	set(s.prev, id)
	s.touch(id)
	n := s.p.RepeatLastN
	if n <= 0 {
		return
	}
	s.win[id]++
	s.recent = append(s.recent, id)
	if len(s.recent) > n {
		old := s.recent[len(s.recent)-n-1]
		if s.win[old]--; s.win[old] == 0 {
			s.prev[old>>6] &^= 1 << (uint32(old) & 63)
		}
	}
	if len(s.recent) >= 2*n+64 { // keep the window, drop the rest
		s.recent = append(s.recent[:0], s.recent[len(s.recent)-n:]...)
	}
}

// adjust applies, in order, the repetition penalty (llama.cpp: over every
// earlier token of the sequence, or its last RepeatLastN, a positive logit is divided by the penalty,
// a negative one multiplied), the frequency and presence penalties (OpenAI:
// over generated tokens, logit -= count·frequency + (count > 0)·presence) and
// the logit bias.
func (s *sampler) adjust(v float32, id int32) float32 {
	if s.rep && bit(s.prev, id) {
		if v > 0 {
			v /= s.p.RepetitionPenalty
		} else {
			v *= s.p.RepetitionPenalty
		}
	}
	if c := s.counts[id]; c > 0 {
		v -= float32(c)*s.p.FrequencyPenalty + s.p.PresencePenalty
	}
	return v + s.bias[id]
}
