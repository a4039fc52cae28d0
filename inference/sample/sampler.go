package sample

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
)

// cand is a candidate token and its logit.
type cand struct {
	id int32
	v  float32
}

// better orders candidates: higher logit first, ties to the lower id.
func better(a, b cand) bool { return a.v > b.v || a.v == b.v && a.id < b.id }

const (
	// sampleCutoff: a token more than sampleCutoff·T below the best logit
	// weighs < e^-20 = 2e-9 of the best, so the sampler ignores it. All such
	// tokens together (V = 128,256) weigh at most 2.6e-4 of the best token
	// (in practice far less), which bounds the error this makes in top_p's
	// mass and in the kept tokens' probabilities. top_k, min_p and greedy
	// are exact.
	sampleCutoff = 20
	// logprobCutoff: the same for the raw log-softmax (logprob error at
	// most 2.6e-4 nats, in practice far less).
	logprobCutoff = 20
)

// Sampler turns logits into tokens for one sequence (one choice of a
// request): its parameters, its random stream and its penalty state, a few
// KiB plus a bit per vocabulary id. The vocabulary-sized work space of a
// step is a Scratch, which the goroutine that samples owns and passes in, so
// memory grows with the sampling goroutines, not with the sequences.
//
// A step takes one of three paths: candidate collection (collect.go: the
// tokens within the cutoff are materialised, then filter and draw), the
// bucket histogram (buckets.go: F32, and F16/U16 where the code histogram
// cannot serve) or the 16-bit code histogram (codes.go), the last two for
// steps where many tokens are in play.
type Sampler struct {
	p   Params
	rng *rand.Rand

	// Penalties and bias (penalty.go): per touched id, its slot in tlist
	// and tv.
	rep     bool            // repetition penalty active
	penal   bool            // presence or frequency penalty active
	touched []uint64        // bitset: ids whose logit gets an override
	tlist   []int32         // the touched ids, in first-touch order
	tstate  []touchState    // per slot
	slot    map[int32]int32 // touched id → slot
	recent  []int32         // with RepeatLastN: the sequence's last tokens, window at the end
	prompt  []int32

	bigMin int  // candidates above which a step takes a histogram path
	wasBig bool // the previous step did: skip the collect attempt

	*scratch // the work space of the current (or last) step
}

// Scratch is the work space of sampling steps: candidate buffers and
// histograms sized by the vocabulary, holding no sequence's state between
// steps (only tables that depend on nothing but their key). One goroutine
// uses a Scratch at a time. The zero value is ready; it grows on first use.
type Scratch struct{ scratch }

type scratch struct {
	tv []cand // touched ids, adjusted (this step)

	// The step.
	l       Logits
	m       float32 // best adjusted logit
	thr     float32 // m − T·sampleCutoff (the histogram paths)
	inRange int     // candidates of the step (within the cutoff)
	big     bool    // this step takes a histogram path
	code    bool    // ... the code histogram
	zk      float64 // kept mass (the histogram paths)

	// Candidates and filter buffers.
	raw   []cand    // collected raw logits (untouched ids)
	cands []cand    // candidates after penalties, within the cutoff
	kept  []cand    // top_k output; a bucket's or group's tokens
	ws    []float64 // weights of the filter's input
	pbuf  []cand    // top_p output; the kept part of a histogram's crossing bucket or group
	pw    []float64 // and its weights
	edge  []int
	gids  []int32 // ids gathered from a bucket or group

	bk   buckets  // the bucket histogram
	cd   codeHist // the code histogram
	mask []uint64 // a Constraint's allowed tokens
}

// New returns a sampler for a vocabulary of vocab tokens.
func New(vocab int) *Sampler {
	return &Sampler{
		touched: make([]uint64, (vocab+63)/64),
		slot:    map[int32]int32{},
		bigMin:  bigMin,
	}
}

// Sample picks the next token from l, using sc for the step's work. With
// wantLP it also returns the token's log-probability and up to top
// alternatives, from the log-softmax of the raw logits (before penalties
// and temperature, like OpenAI).
func (s *Sampler) Sample(sc *Scratch, l Logits, wantLP bool, top int) (int32, *Logprob) {
	s.scratch = &sc.scratch
	return s.sample(l, wantLP, top)
}

// SampleConstrained draws a token that c allows. It samples as usual and
// keeps the token if c allows it; otherwise it samples again among the
// allowed tokens only. For temperature sampling without top_k/top_p/min_p
// this is exactly the masked distribution (rejection sampling); greedy
// picks the best allowed token. Logprobs are of the raw distribution, as
// without a constraint. It reports -1 when c allows nothing.
func (s *Sampler) SampleConstrained(sc *Scratch, l Logits, wantLP bool, top int, c Constraint) (int32, *Logprob) {
	s.scratch = &sc.scratch
	return s.sampleConstrained(l, wantLP, top, c)
}

// sample is Sample with the last Scratch (a new one for a new Sampler).
func (s *Sampler) sample(l Logits, wantLP bool, top int) (int32, *Logprob) {
	if s.scratch == nil {
		s.scratch = new(scratch)
	}
	s.prepare(l, wantLP)
	var id int32
	switch {
	case s.p.Temperature <= 0:
		id = greedy(s.cands)
	case s.big && s.code:
		id = s.sampleCodes()
	case s.big:
		id = s.sampleBig()
	default:
		id = s.draw()
	}
	if !wantLP {
		return id, nil
	}
	return id, s.logprobs(l, id, top)
}

// greedy is the best of cs (the lowest id among equals); 0 when cs is
// empty (all logits NaN: anything in range).
func greedy(cs []cand) int32 {
	best := cand{v: float32(math.Inf(-1)), id: math.MaxInt32}
	for _, x := range cs {
		if better(x, best) {
			best = x
		}
	}
	if len(cs) == 0 {
		return 0
	}
	return best.id
}

// draw samples one id from s.cands after top_k/top_p/min_p, by weight.
func (s *Sampler) draw() int32 {
	kept, ws := s.filter()
	var z float64
	for _, w := range ws {
		z += w
	}
	u := s.rng.Float64() * z
	for i, w := range ws {
		if u -= w; u < 0 {
			return kept[i].id
		}
	}
	return kept[len(kept)-1].id
}

func (s *Sampler) sampleConstrained(l Logits, wantLP bool, top int, c Constraint) (int32, *Logprob) {
	id, lp := s.sample(l, wantLP, top)
	if c.Allowed(id) {
		return id, lp
	}
	if w := (l.Len() + 63) / 64; len(s.mask) != w {
		s.mask = make([]uint64, w)
	} else {
		clear(s.mask)
	}
	c.Mask(s.mask)
	cs := s.cands[:0]
	m := float32(math.Inf(-1))
	for w, word := range s.mask {
		for word != 0 {
			i := int32(w*64 + bits.TrailingZeros64(word))
			word &= word - 1
			r := l.At(int(i))
			if r != r {
				continue
			}
			v := r
			if bit(s.touched, i) {
				v = s.adjust(r, s.slot[i])
			}
			cs = append(cs, cand{i, v})
			m = max(m, v)
		}
	}
	if len(cs) == 0 {
		for w, word := range s.mask { // only NaN logits: the first allowed
			if word != 0 {
				return int32(w*64 + bits.TrailingZeros64(word)), nil
			}
		}
		return -1, nil
	}
	s.cands, s.m, s.big = cs, m, false
	if s.p.Temperature <= 0 {
		id = greedy(cs)
	} else {
		id = s.draw()
	}
	if !wantLP {
		return id, nil
	}
	s.prepare(l, true)
	return id, s.logprobs(l, id, top)
}

// logprobs computes the raw log-softmax of the chosen token and the top
// alternatives from s.raw and the touched ids.
func (s *Sampler) logprobs(l Logits, id int32, top int) *Logprob {
	set := s.raw
	for _, x := range s.tv {
		set = append(set, cand{x.id, l.At(int(x.id))})
	}
	if len(set) < top && len(set) < l.Len() { // too few within the cutoff: take them all
		set, _ = collect(l, float32(math.Inf(1)), float32(math.Inf(-1)), nil, s.raw[:0])
	}
	s.raw = set[:0]
	mx := float32(math.Inf(-1))
	for _, x := range set {
		mx = max(mx, x.v)
	}
	var z float64
	for _, x := range set {
		z += float64(expNeg(x.v - mx))
	}
	lse := float64(mx) + math.Log(z)
	lp := &Logprob{TokenLogprob: TokenLogprob{ID: id, Logprob: float32(float64(l.At(int(id))) - lse)}}
	if top > 0 {
		best := set
		if top < len(set) {
			best = topK(set, top, s.kept[:0])
		}
		slices.SortFunc(best, func(a, b cand) int {
			if better(a, b) {
				return -1
			}
			return 1
		})
		for _, x := range best {
			lp.Top = append(lp.Top, TokenLogprob{ID: x.id, Logprob: float32(float64(x.v) - lse)})
		}
	}
	return lp
}

const (
	log2e = 1.44269504088896341
	ln2hi = 0.693359375
	ln2lo = -2.12194440e-4
)

// expNeg returns e^x for x ≤ 0 with a relative error below 3e-7 (0 below
// -87), several times faster than math.Exp.
func expNeg(x float32) float32 {
	if x < -87 || x != x {
		return 0
	}
	k := int32(x*log2e - 0.5) // round(x/ln2) for x ≤ 0
	fk := float32(k)
	r := x - fk*ln2hi - fk*ln2lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720))))))
	return p * math.Float32frombits(uint32(k+127)<<23)
}

// val returns logit id of l (F16 NaN as -Inf).
func val(l Logits, id int32) float32 {
	switch l.Type {
	case F32:
		return l.F32[id]
	case F16:
		return half2f[l.Raw16[id]]
	}
	return u16Val(l, int(l.Raw16[id]))
}
