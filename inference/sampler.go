package inference

import (
	"math"
	"math/rand/v2"
)

// cand is a candidate token and its logit.
type cand struct {
	id int32
	v  float32
}

// better orders candidates: higher logit first, ties to the lower id.
func better(a, b cand) bool { return a.v > b.v || a.v == b.v && a.id < b.id }

const (
	// sampleCutoff: a token more than sampleCutoff·T below the best logit has
	// weight < e^-26 relative to the best; all of them together (V = 128,256)
	// weigh < 1e-6 of it, so the sampler ignores them.
	sampleCutoff = 26
	// logprobCutoff: the same for the raw log-softmax (total error < 1e-8).
	logprobCutoff = 30
)

// sampler turns logits into tokens for one request. The worker owns one and
// reuses its vocabulary-sized buffers; per-request state is cleared through
// the list of touched ids, never by clearing whole arrays.
type sampler struct {
	p   Sampling
	rng *rand.Rand

	rep   bool // repetition penalty active
	penal bool // presence or frequency penalty active

	counts  []int32   // generated-token counts of the current choice
	bias    []float32 // logit_bias, dense
	prev    []uint64  // bitset: ids seen in the sequence (repetition penalty)
	touched []uint64  // bitset: ids whose logit gets an override
	tlist   []int32   // the touched ids, in first-touch order
	prompt  []int32

	raw   []cand // collected raw logits (untouched ids)
	tv    []cand // touched ids, adjusted
	cands []cand // candidates after penalties, within the cutoff
	kept  []cand
	ws    []float64
	m     float32 // best adjusted logit
	mu    float32 // best raw logit among untouched ids
}

func newSampler(vocab int) *sampler {
	w := (vocab + 63) / 64
	return &sampler{
		counts:  make([]int32, vocab),
		bias:    make([]float32, vocab),
		prev:    make([]uint64, w),
		touched: make([]uint64, w),
		raw:     make([]cand, 0, vocab),
		cands:   make([]cand, 0, vocab),
		kept:    make([]cand, 0, vocab),
		ws:      make([]float64, 0, vocab),
	}
}

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
	}
	s.tlist = s.tlist[:0]
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
	for id, b := range s.p.LogitBias {
		if b != 0 {
			s.bias[id] = b
			s.touch(id)
		}
	}
	if s.rep {
		for _, id := range s.prompt {
			set(s.prev, id)
			s.touch(id)
		}
	}
}

// accept records a generated token for the penalties.
func (s *sampler) accept(id int32) {
	if s.rep {
		set(s.prev, id)
		s.touch(id)
	}
	if s.penal {
		s.counts[id]++
		s.touch(id)
	}
}

// adjust applies, in order, the repetition penalty (llama.cpp: over every
// earlier token of the sequence, a positive logit is divided by the penalty,
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

// prepare collects the candidates of one step: s.cands holds every token
// whose adjusted logit is within delta of the best (s.m), where delta is 0
// for greedy and T·sampleCutoff otherwise; s.raw holds the untouched ids'
// raw logits within max(delta, logprobCutoff when wantLP) of theirs.
func (s *sampler) prepare(l Logits, wantLP bool) {
	var dS float32
	if s.p.Temperature > 0 {
		dS = s.p.Temperature * sampleCutoff
	}
	d := dS
	if wantLP && d < logprobCutoff {
		d = logprobCutoff
	}
	var skip []uint64
	if len(s.tlist) > 0 {
		skip = s.touched
	}
	s.raw, s.mu = collect(l, d, skip, s.raw[:0])
	m := s.mu
	s.tv = s.tv[:0]
	for _, id := range s.tlist {
		v := s.adjust(l.At(int(id)), id)
		s.tv = append(s.tv, cand{id, v})
		if v > m {
			m = v
		}
	}
	s.m = m
	thr := m - dS
	c := s.cands[:0]
	for _, x := range s.raw {
		if x.v >= thr {
			c = append(c, x)
		}
	}
	for _, x := range s.tv {
		if x.v >= thr {
			c = append(c, x)
		}
	}
	s.cands = c
}

// filter applies top_k, the temperature softmax, top_p and min_p to s.cands
// and returns the kept tokens with their unnormalised weights.
func (s *sampler) filter() ([]cand, []float64) {
	t := float64(s.p.Temperature)
	m := float64(s.m)
	c := s.cands
	ws := s.ws[:0]
	kept := s.kept[:0]
	topP := float64(s.p.TopP)
	useP := topP > 0 && topP < 1
	if k := s.p.TopK; k > 0 && k < len(c) {
		heapify(c)
		var z float64
		for range k {
			x := pop(&c)
			w := math.Exp((float64(x.v) - m) / t)
			kept, ws = append(kept, x), append(ws, w)
			z += w
		}
		if useP {
			cum := 0.0
			for i, w := range ws {
				cum += w
				if cum >= topP*z {
					kept, ws = kept[:i+1], ws[:i+1]
					break
				}
			}
		}
	} else if useP {
		var z float64
		for _, x := range c {
			z += math.Exp((float64(x.v) - m) / t)
		}
		heapify(c)
		cum := 0.0
		for len(c) > 0 {
			x := pop(&c)
			w := math.Exp((float64(x.v) - m) / t)
			kept, ws = append(kept, x), append(ws, w)
			cum += w
			if cum >= topP*z {
				break
			}
		}
	} else {
		kept = append(kept, c...)
		for _, x := range c {
			ws = append(ws, math.Exp((float64(x.v)-m)/t))
		}
	}
	if mp := float64(s.p.MinP); mp > 0 {
		// The best token has weight 1, so p ≥ min_p·p_max is w ≥ min_p.
		n := 0
		for i, w := range ws {
			if w >= mp {
				kept[n], ws[n] = kept[i], w
				n++
			}
		}
		kept, ws = kept[:n], ws[:n]
	}
	s.kept, s.ws = kept, ws
	return kept, ws
}

// sample picks the next token from l. With wantLP it also returns the
// token's log-probability and up to top alternatives, from the log-softmax of
// the raw logits (before penalties and temperature, like OpenAI).
func (s *sampler) sample(l Logits, wantLP bool, top int) (int32, *Logprob) {
	s.prepare(l, wantLP)
	var id int32
	if s.p.Temperature <= 0 {
		best := cand{v: float32(math.Inf(-1)), id: math.MaxInt32}
		for _, x := range s.cands {
			if better(x, best) {
				best = x
			}
		}
		id = best.id
		if len(s.cands) == 0 { // all NaN: anything in range
			id = 0
		}
	} else {
		kept, ws := s.filter()
		var z float64
		for _, w := range ws {
			z += w
		}
		u := s.rng.Float64() * z
		id = kept[len(kept)-1].id
		for i, w := range ws {
			u -= w
			if u < 0 {
				id = kept[i].id
				break
			}
		}
	}
	if !wantLP {
		return id, nil
	}
	return id, s.logprobs(l, id, top)
}

// logprobs computes the raw log-softmax of the chosen token and the top
// alternatives from s.raw and the touched ids.
func (s *sampler) logprobs(l Logits, id int32, top int) *Logprob {
	set := s.raw
	for _, x := range s.tv {
		set = append(set, cand{x.id, l.At(int(x.id))})
	}
	if len(set) < top && len(set) < l.Len() { // too few within the cutoff: take them all
		set, _ = collect(l, float32(math.Inf(1)), nil, s.raw[:0])
	}
	s.raw = set[:0]
	mx := float32(math.Inf(-1))
	for _, x := range set {
		mx = max(mx, x.v)
	}
	var z float64
	for _, x := range set {
		z += math.Exp(float64(x.v - mx))
	}
	lse := float64(mx) + math.Log(z)
	lp := &Logprob{TokenLogprob: TokenLogprob{ID: id, Logprob: float32(float64(l.At(int(id))) - lse)}}
	if top > 0 {
		heapify(set)
		for range min(top, len(set)) {
			x := pop(&set)
			lp.Top = append(lp.Top, TokenLogprob{ID: x.id, Logprob: float32(float64(x.v) - lse)})
		}
	}
	return lp
}

// heapify orders h as a binary heap with the best candidate at the root.
func heapify(h []cand) {
	for i := len(h)/2 - 1; i >= 0; i-- {
		down(h, i)
	}
}

func down(h []cand, i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		b := l
		if r := l + 1; r < n && better(h[r], h[l]) {
			b = r
		}
		if !better(h[b], h[i]) {
			return
		}
		h[i], h[b] = h[b], h[i]
		i = b
	}
}

// pop removes and returns the best candidate of the heap *h.
func pop(h *[]cand) cand {
	a := *h
	x := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	down(a, 0)
	*h = a
	return x
}
