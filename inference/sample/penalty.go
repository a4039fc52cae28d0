package sample

import (
	"maps"
	"math/rand/v2"
	"slices"
)

func bit(s []uint64, id int32) bool { return s[id>>6]&(1<<(uint32(id)&63)) != 0 }
func set(s []uint64, id int32)      { s[id>>6] |= 1 << (uint32(id) & 63) }

// touchState is what the penalties and the bias keep of one touched id.
type touchState struct {
	count int32   // generated-token count of the current choice
	bias  float32 // logit_bias
	// occurrences the repetition penalty counts: in the sequence, or with
	// RepeatLastN in its window
	rep int32
}

// Reset prepares the sampler for a request: its parameters, its prompt
// (for the repetition penalty) and the seed of its random stream.
func (s *Sampler) Reset(p Params, prompt []int32, seed uint64) {
	s.clear()
	s.p = p
	s.prompt = prompt
	s.rep = p.RepetitionPenalty > 0 && p.RepetitionPenalty != 1
	s.penal = p.PresencePenalty != 0 || p.FrequencyPenalty != 0
	s.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s.wasBig = false
}

func (s *Sampler) clear() {
	for _, id := range s.tlist {
		s.touched[id>>6] = 0
	}
	s.tlist, s.tstate, s.recent = s.tlist[:0], s.tstate[:0], s.recent[:0]
	clear(s.slot)
}

// touch returns id's slot, giving it one on first touch.
func (s *Sampler) touch(id int32) int32 {
	if bit(s.touched, id) {
		return s.slot[id]
	}
	set(s.touched, id)
	k := int32(len(s.tlist))
	s.slot[id] = k
	s.tlist = append(s.tlist, id)
	s.tstate = append(s.tstate, touchState{})
	return k
}

// StartChoice clears the generated-token state; the random stream carries
// on, so the choices of a seeded request are reproducible as a whole.
func (s *Sampler) StartChoice() {
	s.clear()
	// In id order: the touched ids' order is the candidates' order, which
	// the draw depends on, so map order would make a seeded request's
	// tokens vary from run to run.
	for _, id := range slices.Sorted(maps.Keys(s.p.LogitBias)) {
		if b := s.p.LogitBias[id]; b != 0 {
			s.tstate[s.touch(id)].bias = b
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

// Accept records a generated token for the penalties.
func (s *Sampler) Accept(id int32) {
	if s.rep {
		s.seen(id)
	}
	if s.penal {
		s.tstate[s.touch(id)].count++
	}
}

// seen adds id to the tokens the repetition penalty applies to. With
// RepeatLastN the token that leaves the window stops counting.
func (s *Sampler) seen(id int32) {
	s.tstate[s.touch(id)].rep++
	n := s.p.RepeatLastN
	if n <= 0 {
		return
	}
	s.recent = append(s.recent, id)
	if len(s.recent) > n {
		s.tstate[s.slot[s.recent[len(s.recent)-n-1]]].rep--
	}
	if len(s.recent) >= 2*n+64 { // keep the window, drop the rest
		s.recent = append(s.recent[:0], s.recent[len(s.recent)-n:]...)
	}
}

// repeated reports whether the repetition penalty applies to id.
func (s *Sampler) repeated(id int32) bool {
	return bit(s.touched, id) && s.tstate[s.slot[id]].rep > 0
}

// adjust applies to logit v of the touched id in slot k, in order, the
// repetition penalty (llama.cpp: over every earlier token of the sequence,
// or its last RepeatLastN, a positive logit is divided by the penalty, a
// negative one multiplied), the frequency and presence penalties (OpenAI:
// over generated tokens, logit -= count·frequency + (count > 0)·presence)
// and the logit bias.
func (s *Sampler) adjust(v float32, k int32) float32 {
	t := &s.tstate[k]
	if s.rep && t.rep > 0 {
		if v > 0 {
			v /= s.p.RepetitionPenalty
		} else {
			v *= s.p.RepetitionPenalty
		}
	}
	if t.count > 0 {
		v -= float32(t.count)*s.p.FrequencyPenalty + s.p.PresencePenalty
	}
	return v + t.bias
}
