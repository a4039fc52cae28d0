package inference

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
	win     []int32   // with RepeatLastN: per id, its occurrences in the window
	recent  []int32   // with RepeatLastN: the sequence's last tokens, window at the end
	touched []uint64  // bitset: ids whose logit gets an override
	tlist   []int32   // the touched ids, in first-touch order
	prompt  []int32

	raw   []cand    // collected raw logits (untouched ids)
	tv    []cand    // touched ids, adjusted
	cands []cand    // candidates after penalties, within the cutoff
	kept  []cand    // top_k output
	ws    []float64 // weights of the filter's input
	pbuf  []cand    // top_p output
	pw    []float64 // and its weights
	edge  []int
	m     float32 // best adjusted logit

	// The histogram path (see hist), for steps where many tokens are in play.
	bigMin  int              // candidates above which a step switches to it
	wasBig  bool             // the previous step used it: skip the collect attempt
	big     bool             // this step uses it
	acc     *[nbig]bucketAcc // per bucket: count<<40 + sum of fractions, list of ids
	bw      *[nbig]float64   // per bucket: mass
	bblk    [nbig / 64]float64
	next    []int32 // bucket lists: the next id+1 (0: end)
	gids    []int32
	l       Logits
	thr     float32 // m − T·sampleCutoff
	scale   float32 // buckets per logit unit
	bTop    int     // buckets above bTop are kept whole; the kept rest is in pbuf
	zk      float64 // kept mass
	inRange int     // candidates of the step (within the cutoff)

	// The histogram path over F16 and U16 codes (see histCodes).
	code   bool
	cnt    *[1 << 16]uint32  // per code: untouched ids with that logit
	cntEnd int               // cnt is zero from here on
	wtab   *[1 << 16]float64 // per code: exp(logit/T)
	wFor   tabFor            // what wtab was built for
	tw     *[1 << 16]float64 // per key: the touched ids' weights
	twKeys []int             // the touched ids' keys
	twW    []float64         // and weights
	blk    [1 << 10]float64  // per 64 keys: the mass
	gbuf   []wcand
	kTop   int  // key of the best logit
	kBot   int  // lowest key within the cutoff
	bKey   int  // top_p's crossing group (-1: none)
	bKept  int  // its kept ids (the lowest), unless bList
	bList  bool // its kept tokens are in pbuf

	mask []uint64 // a Constraint's allowed tokens
}

// tabFor identifies a table of code weights: the temperature, the type and,
// for U16, the quantisation.
type tabFor struct {
	t      float32
	typ    DType
	scale  float32
	offset int32
}

// wcand is a candidate and its weight.
type wcand struct {
	cand
	w float64
}

func newSampler(vocab int) *sampler {
	w := (vocab + 63) / 64
	return &sampler{
		counts:  make([]int32, vocab),
		bias:    make([]float32, vocab),
		prev:    make([]uint64, w),
		win:     make([]int32, vocab),
		touched: make([]uint64, w),
		raw:     make([]cand, 0, vocab),
		cands:   make([]cand, 0, vocab),
		kept:    make([]cand, 0, vocab),
		ws:      make([]float64, 0, vocab),
		pbuf:    make([]cand, 0, vocab),
		pw:      make([]float64, 0, vocab),
		bigMin:  bigMin,
		acc:     new([nbig]bucketAcc),
		bw:      new([nbig]float64),
		next:    make([]int32, vocab),
		cnt:     new([1 << 16]uint32),
		wtab:    new([1 << 16]float64),
		tw:      new([1 << 16]float64),
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
	for id, b := range s.p.LogitBias {
		if b != 0 {
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

// prepare collects the candidates of one step into s.cands: every token
// whose adjusted logit is within delta of the best (s.m), where delta is 0
// for greedy and T·sampleCutoff otherwise. The touched ids (penalties, bias)
// are computed first, one by one; the vocabulary scans skip them. With
// wantLP, s.raw also holds the untouched ids' raw logits within
// logprobCutoff of the best raw logit.
func (s *sampler) prepare(l Logits, wantLP bool) {
	s.big = false
	var skip []uint64
	if len(s.tlist) > 0 {
		skip = s.touched
	}
	inf := float32(math.Inf(-1))
	mt, rt := inf, inf // best adjusted and best raw logit of the touched ids
	s.tv = s.tv[:0]
	for _, id := range s.tlist {
		r := l.At(int(id))
		v := s.adjust(r, id)
		s.tv = append(s.tv, cand{id, v})
		mt, rt = max(mt, v), max(rt, r)
	}
	var dS float32
	if s.p.Temperature > 0 {
		dS = s.p.Temperature * sampleCutoff
	}
	c := s.cands[:0]
	s.raw = s.raw[:0]
	var m float32
	if dS == 0 && !wantLP {
		best, mu := argmax(l, skip)
		m = max(mu, mt)
		if best >= 0 && mu >= m {
			c = append(c, cand{int32(best), mu})
		}
	} else {
		// Keep the untouched ids within d of their best (mu); the floor,
		// from the touched ids, cuts what they make irrelevant anyway.
		d, floor := dS, mt-dS
		if wantLP {
			d, floor = max(dS, logprobCutoff), min(floor, rt-logprobCutoff)
		}
		var mu float32
		ok := false
		if s.histOK(l, wantLP) {
			if !s.wasBig {
				s.raw, mu, ok = collectUpTo(l, d, floor, skip, s.raw, s.bigMin)
			}
			if !ok {
				if s.hist(l, skip, mt) {
					s.cands = c
					return
				}
				s.raw = s.raw[:0]
			}
		}
		s.wasBig = false
		if !ok {
			s.raw, mu = collect(l, d, floor, skip, s.raw)
		}
		m = max(mu, mt)
		thr := m - dS
		if wantLP {
			thr = min(thr, max(mu, rt)-logprobCutoff)
		}
		n := 0
		for _, x := range s.raw {
			if x.v >= thr {
				s.raw[n] = x
				n++
			}
		}
		s.raw = s.raw[:n]
		for _, x := range s.raw {
			if x.v >= m-dS {
				c = append(c, x)
			}
		}
	}
	for _, x := range s.tv {
		if x.v >= m-dS {
			c = append(c, x)
		}
	}
	s.m, s.cands, s.inRange = m, c, len(c)
}

// filter applies top_k, the temperature softmax, top_p and min_p to s.cands
// and returns the kept tokens with their unnormalised weights (the best
// token weighs 1). No step sorts more than the tokens it keeps: top_k is a
// bounded heap, top_p buckets the weights by binary exponent and sorts only
// the bucket where the cumulative mass crosses p.
func (s *sampler) filter() ([]cand, []float64) {
	if s.big && s.code {
		return s.keptCodes()
	}
	if s.big {
		return s.keptBig()
	}
	c := s.cands
	if k := s.p.TopK; k > 0 && k < len(c) {
		c = topK(c, k, s.kept[:0])
	}
	inv := 1 / s.p.Temperature
	ws := s.ws[:0]
	var z float64
	for _, x := range c {
		w := float64(expNeg((x.v - s.m) * inv))
		ws = append(ws, w)
		z += w
	}
	s.ws = ws // keep the buffer; topP writes its own (s.pw)
	if p := float64(s.p.TopP); p > 0 && p < 1 {
		c, ws = s.topP(c, ws, p*z)
	}
	if mp := float64(s.p.MinP); mp > 0 {
		// The best token has weight 1, so p ≥ min_p·p_max is w ≥ min_p.
		n := 0
		for i, w := range ws {
			if w >= mp {
				c[n], ws[n] = c[i], w
				n++
			}
		}
		c, ws = c[:n], ws[:n]
	}
	return c, ws
}

// topK returns the k best of c (in heap order) in out.
func topK(c []cand, k int, out []cand) []cand {
	h := append(out, c[:k]...)
	// a min-heap on "better": the root is the worst kept candidate
	worse := func(a, b cand) bool { return better(b, a) }
	sift := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			b := l
			if r := l + 1; r < len(h) && worse(h[r], h[l]) {
				b = r
			}
			if !worse(h[b], h[i]) {
				return
			}
			h[i], h[b] = h[b], h[i]
			i = b
		}
	}
	for i := k/2 - 1; i >= 0; i-- {
		sift(i)
	}
	for _, x := range c[k:] {
		if better(x, h[0]) {
			h[0] = x
			sift(0)
		}
	}
	return h
}

// topP keeps the smallest set of best tokens whose weights reach mass.
// Weights are in (0, 1]; they are bucketed by binary exponent and the top
// four mantissa bits (bucket 0 holds the heaviest), so one pass over the
// bucket masses finds the bucket where the cumulative mass crosses, and only
// that bucket is sorted.
func (s *sampler) topP(c []cand, ws []float64, mass float64) ([]cand, []float64) {
	const nb = 64 * 16
	var bm [nb]float64
	bucket := func(w float64) int {
		b := math.Float64bits(w)
		e := 1023 - int(b>>52&0x7ff) // 0 for w in [1, 2)
		if e >= 64 {
			return nb - 1
		}
		return e<<4 | int(15-b>>48&15)
	}
	for _, w := range ws {
		bm[bucket(w)] += w
	}
	cum, cross := 0.0, nb-1
	for b, m := range bm {
		if cum+m >= mass {
			cross = b
			break
		}
		cum += m
	}
	// Keep buckets above the crossing one; sort the crossing bucket.
	kept, kw, edge := s.pbuf[:0], s.pw[:0], s.edge[:0]
	for i, w := range ws {
		switch b := bucket(w); {
		case b < cross:
			kept = append(kept, c[i])
			kw = append(kw, w)
		case b == cross:
			edge = append(edge, i)
		}
	}
	slices.SortFunc(edge, func(a, b int) int {
		if better(c[a], c[b]) {
			return -1
		}
		return 1
	})
	for _, i := range edge {
		if cum >= mass {
			break
		}
		kept = append(kept, c[i])
		kw = append(kw, ws[i])
		cum += ws[i]
	}
	s.pbuf, s.pw, s.edge = kept, kw, edge
	return kept, kw
}

// sample picks the next token from l. With wantLP it also returns the
// token's log-probability and up to top alternatives, from the log-softmax of
// the raw logits (before penalties and temperature, like OpenAI).
func (s *sampler) sample(l Logits, wantLP bool, top int) (int32, *Logprob) {
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
func (s *sampler) draw() int32 {
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

// sampleConstrained draws a token that c allows. It samples as usual and
// keeps the token if c allows it; otherwise it samples again among the
// allowed tokens only. For temperature sampling without top_k/top_p/min_p
// this is exactly the masked distribution (rejection sampling); greedy
// picks the best allowed token. Logprobs are of the raw distribution, as
// without a constraint. It reports -1 when c allows nothing.
func (s *sampler) sampleConstrained(l Logits, wantLP bool, top int, c Constraint) (int32, *Logprob) {
	id, lp := s.sample(l, wantLP, top)
	if c.Allowed(id) {
		return id, lp
	}
	if len(s.mask) == 0 {
		s.mask = make([]uint64, (l.Len()+63)/64)
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
			v := s.adjust(r, i)
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
func (s *sampler) logprobs(l Logits, id int32, top int) *Logprob {
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

const (
	// nbig buckets span [m − T·sampleCutoff, m]: a token is within
	// w/2 = 10/nbig = 6.1e-4 (in units of T) of its bucket's centre, so the
	// first-order expansion of its weight errs by less than w²/8 = 1.9e-7
	// (relative), below the float32 rounding of (v − m)/T itself.
	nbig = 16384
	// bigMin is the number of candidates from which a step takes the
	// histogram path.
	bigMin = 8192
)

// bucketE[b] is the weight of bucket b's centre relative to the best token.
var bucketE = func() *[nbig]float64 {
	var e [nbig]float64
	for b := range e {
		e[b] = math.Exp((float64(b)+0.5)*sampleCutoff/nbig - sampleCutoff)
	}
	return &e
}()

// bucketOf returns the bucket of a logit v ≥ s.thr, as histF32 computes it.
func (s *sampler) bucketOf(v float32) int {
	return int(min(int64((v-s.thr)*s.scale), qMax) >> 16)
}

// histOK reports whether the histogram path can serve this step.
func (s *sampler) histOK(l Logits, wantLP bool) bool {
	return !wantLP && s.p.Temperature > 0 && s.p.TopK <= 0 && s.p.MinP <= 0 &&
		(l.Type == F32 || l.Type == F16 || l.Type == U16 && l.Scale > 0)
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

// hist prepares a step with many candidates (nearly flat logits), where
// materialising and sorting them would cost milliseconds. F16 and U16 logits
// go to histCodes. Otherwise one pass finds the best logit m; a second puts every
// logit within the cutoff into one of nbig equal buckets over
// [m − T·sampleCutoff, m], summing per bucket (in fixed point) the count and
// the positions within the bucket, which give the first-order expansion of
// the weights around its centre (no exp per token), and links each id into
// its bucket's list. The touched ids are then taken out and added back with their
// adjusted logits and exact weights. top_p walks the bucket masses from the
// top (by blocks of 64) and resolves only the bucket where the cumulative
// mass crosses p: its tokens are gathered, weighed exactly and sorted. It
// reports false (nothing done) if the best logit is not finite.
func (s *sampler) hist(l Logits, skip []uint64, mt float32) bool {
	if s.code = l.Type != F32 && s.histCodes(l, mt); s.code {
		return true
	}
	_, mu := argmax(l, skip)
	m := max(mu, mt)
	if math.IsInf(float64(m), 0) || m != m {
		return false
	}
	dS := s.p.Temperature * sampleCutoff
	thr := m - dS
	s.l, s.m, s.thr, s.scale = l, m, thr, nbig*65536/dS
	acc := s.acc
	clear(acc[:])
	switch l.Type {
	case F32:
		histF32(l.F32, thr, s.scale, acc, s.next)
	case F16:
		histF16(l.Raw16, thr, s.scale, acc, s.next)
	default:
		histU16(l, thr, s.scale, acc, s.next)
	}
	for _, id := range s.tlist {
		if t := (l.At(int(id)) - thr) * s.scale; t >= 0 {
			q := min(int64(t), qMax)
			acc[q>>16].sum -= 1<<40 | uint64(q&0xffff) // still listed, but skipped
		}
	}
	const dw = float64(sampleCutoff) / nbig // bucket width in units of T
	n := 0
	for b, e := range acc {
		a := e.sum
		c, f := float64(a>>40), float64(a&(1<<40-1))
		// Σ (1 + δ) with δ = ((f + ½)/65536 − ½)·dw
		s.bw[b] = bucketE[b] * (c*(1+dw*(0.5/65536-0.5)) + dw/65536*f)
		n += int(a >> 40)
	}
	inv := 1 / s.p.Temperature
	for _, x := range s.tv {
		if x.v >= thr {
			s.bw[s.bucketOf(x.v)] += float64(expNeg((x.v - m) * inv))
			n++
		}
	}
	var z float64
	for i := range s.bblk {
		var bz float64
		for _, w := range s.bw[i*64 : i*64+64] {
			bz += w
		}
		s.bblk[i] = bz
		z += bz
	}
	s.big, s.wasBig, s.inRange = true, n >= s.bigMin, n
	s.bTop, s.zk = -1, z
	kept, kw := s.pbuf[:0], s.pw[:0]
	if p := float64(s.p.TopP); p > 0 && p < 1 {
		mass, cum := p*z, 0.0
		for b := nbig - 1; b >= 0 && cum < mass; b-- {
			if s.bTop < 0 && b&63 == 63 && cum+s.bblk[b>>6] < mass {
				cum += s.bblk[b>>6]
				b -= 63
				continue
			}
			if s.bw[b] == 0 {
				continue
			}
			if s.bTop < 0 && cum+s.bw[b] < mass {
				cum += s.bw[b]
				continue
			}
			// The crossing bucket (or, if its exact weights fell short of
			// the estimate, the next ones): keep its best tokens.
			if s.bTop < 0 {
				s.bTop = b
			}
			c, ws := s.bucket(b)
			s.sortByBetter(c, ws)
			for i, x := range c {
				if cum >= mass {
					break
				}
				kept = append(kept, x)
				kw = append(kw, ws[i])
				cum += ws[i]
			}
		}
		if s.bTop < 0 { // rounding: everything is kept
			s.bTop, s.zk = -1, z
		} else {
			s.zk = cum
		}
	}
	s.pbuf, s.pw = kept, kw
	return true
}

// bucket returns the candidates of bucket b (untouched from its list, then
// the touched ones) and their exact weights, in s.kept and s.ws.
func (s *sampler) bucket(b int) ([]cand, []float64) {
	s.gids = s.gids[:0]
	for j := s.acc[b].head; j != 0; j = s.next[j-1] {
		if !skipped(s.touched, int(j-1)) {
			s.gids = append(s.gids, j-1)
		}
	}
	c, ws := s.kept[:0], s.ws[:0]
	for _, id := range s.gids {
		c = append(c, cand{id, val(s.l, id)})
	}
	for _, x := range s.tv {
		if x.v >= s.thr && s.bucketOf(x.v) == b {
			c = append(c, x)
		}
	}
	inv := 1 / s.p.Temperature
	for _, x := range c {
		ws = append(ws, float64(expNeg((x.v-s.m)*inv)))
	}
	s.kept, s.ws = c, ws
	return c, ws
}

// sortByBetter sorts c (best first) and ws with it.
func (s *sampler) sortByBetter(c []cand, ws []float64) {
	slices.SortFunc(c, func(a, b cand) int {
		if better(a, b) {
			return -1
		}
		return 1
	})
	inv := 1 / s.p.Temperature
	for i, x := range c {
		ws[i] = float64(expNeg((x.v - s.m) * inv))
	}
}

// sampleBig draws a token after hist: it walks the bucket masses to the
// bucket holding the draw and weighs only that bucket's tokens exactly.
func (s *sampler) sampleBig() int32 {
	u := s.rng.Float64() * s.zk
	for b := nbig - 1; b > s.bTop; b-- {
		if b&63 == 63 && b-63 > s.bTop && u >= s.bblk[b>>6] {
			u -= s.bblk[b>>6]
			b -= 63
			continue
		}
		w := s.bw[b]
		if w == 0 {
			continue
		}
		if u < w {
			return s.pick(b, u)
		}
		u -= w
	}
	for i, w := range s.pw {
		if u -= w; u < 0 {
			return s.pbuf[i].id
		}
	}
	if n := len(s.pbuf); n > 0 { // rounding
		return s.pbuf[n-1].id
	}
	for b := s.bTop + 1; b < nbig; b++ {
		if s.bw[b] > 0 {
			return s.pick(b, math.Inf(1))
		}
	}
	return 0
}

// pick returns the token of bucket b where the draw u (within the bucket's
// mass) falls, walking its tokens (untouched from its list, then touched) and
// weighing each exactly until u is used up; the last one if the exact
// weights sum below u.
func (s *sampler) pick(b int, u float64) int32 {
	inv := 1 / s.p.Temperature
	last := int32(-1)
	for j := s.acc[b].head; j != 0; j = s.next[j-1] {
		if i := j - 1; !skipped(s.touched, int(i)) {
			last = i
			if u -= float64(expNeg((val(s.l, i) - s.m) * inv)); u < 0 {
				return i
			}
		}
	}
	for _, c := range s.tv {
		if c.v >= s.thr && s.bucketOf(c.v) == b {
			last = c.id
			if u -= float64(expNeg((c.v - s.m) * inv)); u < 0 {
				return last
			}
		}
	}
	return max(last, 0)
}

// keptBig materialises the kept tokens of a histogram step and their exact
// weights (for tests; sampleBig never needs them all).
func (s *sampler) keptBig() ([]cand, []float64) {
	inv := 1 / s.p.Temperature
	var c []cand
	var ws []float64
	for i := range s.l.Len() {
		if v := val(s.l, int32(i)); v >= s.thr && s.bucketOf(v) > s.bTop && !skipped(s.touched, i) {
			c = append(c, cand{int32(i), val(s.l, int32(i))})
		}
	}
	for _, x := range s.tv {
		if x.v >= s.thr && s.bucketOf(x.v) > s.bTop {
			c = append(c, x)
		}
	}
	for _, x := range c {
		ws = append(ws, float64(expNeg((x.v-s.m)*inv)))
	}
	return append(c, s.pbuf...), append(ws, s.pw...)
}

// Keys order the codes of histCodes by value. For U16 the key is the code;
// for F16 it is halfKey, except that +0 and -0 form one group under key
// 0x8000 (key 0x7fff is never used).

// codeVal returns the logit of code c of s.l (F16 NaN as -Inf).
func (s *sampler) codeVal(c uint16) float32 {
	if s.l.Type == U16 {
		return u16Val(s.l, int(c))
	}
	return half2f[c]
}

// codeKey returns the key of code c (-1 for NaN).
func (s *sampler) codeKey(c uint16) int {
	switch k := halfKey(c); {
	case s.l.Type == U16:
		return int(c)
	case isNaN16(c):
		return -1
	case k == 0x7fff:
		return 0x8000
	default:
		return k
	}
}

// ceilKey returns the key of the smallest logit at least v (1<<16 for U16
// when every code is below v).
func (s *sampler) ceilKey(v float32) int {
	if s.l.Type == U16 {
		return u16Ceil(s.l, v)
	}
	if k := halfKeyCeil(v); k != 0x7fff {
		return k
	}
	return 0x8000
}

// groupCodes returns the codes of the group of key k.
func (s *sampler) groupCodes(k int) (uint16, uint16) {
	switch {
	case s.l.Type == U16:
		return uint16(k), uint16(k)
	case k == 0x8000:
		return 0, 0x8000
	}
	h := keyHalf(k)
	return h, h
}

func (s *sampler) groupCount(k int) int {
	if s.l.Type == F16 && k == 0x7fff {
		return 0
	}
	h, h2 := s.groupCodes(k)
	c := int(s.cnt[h])
	if h2 != h {
		c += int(s.cnt[h2])
	}
	return c
}

// groupMass is the weight of group k, in units of exp(logit/T).
func (s *sampler) groupMass(k int) float64 {
	h, _ := s.groupCodes(k)
	return float64(s.groupCount(k))*s.wtab[h] + s.tw[k]
}

// bestCode returns the best logit among the counted F16 codes (-Inf if
// none).
func (s *sampler) bestCode() float32 {
	cnt := s.cnt
	if h := topCounted(cnt, 0x7c00); h >= 0 {
		return half2f[h]
	}
	for h := 0x8000; h <= 0xfc00; h++ {
		if cnt[h] != 0 {
			return half2f[h]
		}
	}
	return float32(math.Inf(-1))
}

// topCounted returns the largest code c ≤ hi with cnt[c] > 0, or -1.
func topCounted(cnt *[1 << 16]uint32, hi int) int {
	c := hi
	for c >= 3 && cnt[c]|cnt[c-1]|cnt[c-2]|cnt[c-3] == 0 {
		c -= 4
	}
	for ; c >= 0; c-- {
		if cnt[c] != 0 {
			return c
		}
	}
	return -1
}

// histCodes is hist for F16 logits and U16 logits with a positive scale,
// where every logit is one of 65,536 codes: one pass counts the ids per code
// (the touched ids are taken out again), so the weights are exact with one
// exp per code, from a table built once per temperature (and quantisation).
// Groups of equal logits are walked from the best down, by blocks of 64
// keys; ties in a group go to the lowest ids, so a group needs its ids only
// when top_p splits it while holding touched ids, or when the draw lands in
// it. It reports false when the logits are out of the table's range
// (|logit|/T near 700), above every code, or not finite.
func (s *sampler) histCodes(l Logits, mt float32) bool {
	x, cnt := l.Raw16, s.cnt
	s.l = l
	clear(cnt[:s.cntEnd])
	countCodes(x, cnt)
	for _, id := range s.tlist {
		cnt[x[id]]--
	}
	best := float32(math.Inf(-1))
	if l.Type == U16 {
		// the codes grow with the value: the counts end at the best one,
		// and the next step clears no further
		top := topCounted(cnt, 0xffff)
		if top >= 0 {
			best = u16Val(l, top)
		}
		s.cntEnd = top + 1
	} else {
		best, s.cntEnd = s.bestCode(), 1<<16
	}
	m, n := max(best, mt), 0
	dS := s.p.Temperature * sampleCutoff
	thr := m - dS
	T := float64(s.p.Temperature)
	if !(float64(m)/T < 700 && float64(thr)/T > -700) {
		return false
	}
	kTop, kBot := s.ceilKey(m), s.ceilKey(thr)
	if l.Type == U16 && kTop > 0xffff || l.Type == F16 && m > 65504 {
		return false
	}
	tab := tabFor{t: s.p.Temperature, typ: l.Type}
	if l.Type == U16 {
		tab.scale, tab.offset = l.Scale, l.Offset
	}
	if s.wFor != tab {
		for c := range s.wtab {
			// no +Inf: 0·w must stay 0
			s.wtab[c] = min(math.Exp(float64(s.codeVal(uint16(c)))/T), math.MaxFloat64)
		}
		s.wFor = tab
	}
	for _, k := range s.twKeys {
		s.tw[k] = 0
	}
	s.twKeys, s.twW = s.twKeys[:0], s.twW[:0]
	for _, x := range s.tv {
		if x.v >= thr {
			k, w := s.ceilKey(x.v), math.Exp(float64(x.v)/T)
			s.tw[k] += w
			s.twKeys = append(s.twKeys, k)
			s.twW = append(s.twW, w)
			n++
		}
	}
	for b := kBot >> 6; b <= kTop>>6; b++ {
		hi := min(b<<6+63, kTop)
		if l.Type == F16 && hi == 0x7fff { // -0 goes with +0, in block 0x200
			hi--
		}
		w, c := s.keyMass(max(b<<6, kBot), hi)
		s.blk[b] = w
		n += c
	}
	if l.Type == F16 && kBot <= 0x8000 && kTop >= 0x8000 {
		c := s.cnt[0x8000]
		s.blk[0x200] += float64(c) * s.wtab[0x8000]
		n += int(c)
	}
	for i, k := range s.twKeys {
		s.blk[k>>6] += s.twW[i]
	}
	var z float64
	for _, w := range s.blk[kBot>>6 : kTop>>6+1] {
		z += w
	}
	s.l, s.m, s.thr, s.kTop, s.kBot = l, m, thr, kTop, kBot
	s.big, s.wasBig, s.inRange = true, n >= s.bigMin, n
	s.bKey, s.bList, s.zk = -1, false, z
	kept, kw := s.pbuf[:0], s.pw[:0]
	if p := float64(s.p.TopP); p > 0 && p < 1 {
		mass, cum := p*z, 0.0
	blocks:
		for b := kTop >> 6; b >= kBot>>6; b-- {
			if cum+s.blk[b] < mass {
				cum += s.blk[b]
				continue
			}
			for k := min(b<<6+63, kTop); k >= max(b<<6, kBot); k-- {
				g := s.groupMass(k)
				if g == 0 {
					continue
				}
				if cum+g < mass {
					cum += g
					continue
				}
				s.bKey = k
				if s.tw[k] == 0 { // equal weights: keep the lowest ids
					h, _ := s.groupCodes(k)
					w, n := s.wtab[h], s.groupCount(k)
					need := min(max(int(math.Ceil((mass-cum)/w)), 1), n)
					for need > 1 && cum+float64(need-1)*w >= mass {
						need--
					}
					for need < n && cum+float64(need)*w < mass {
						need++
					}
					s.bKept, s.zk = need, cum+float64(need)*w
				} else {
					for _, c := range s.groupCands(k) {
						if cum >= mass {
							break
						}
						kept = append(kept, c.cand)
						kw = append(kw, c.w)
						cum += c.w
					}
					s.bList, s.zk = true, cum
				}
				break blocks
			}
		}
	}
	s.pbuf, s.pw = kept, kw
	return true
}

// keyMass returns the mass and number of the untouched ids with keys k0..k1
// (for F16, within one sign of halves).
func (s *sampler) keyMass(k0, k1 int) (float64, int) {
	h0, h1 := k0, k1
	switch {
	case s.l.Type == U16:
	case k0 >= 0x8000:
		h0, h1 = k0-0x8000, k1-0x8000
	default:
		h0, h1 = 0xffff-k1, 0xffff-k0
	}
	c, w := s.cnt[h0:h1+1], s.wtab[h0:h1+1]
	w = w[:len(c)]
	var a0, a1, a2, a3 float64
	var n0, n1 uint32
	i := 0
	for ; i+4 <= len(c); i += 4 {
		c4 := c[i : i+4 : i+4]
		if c4[0]|c4[1]|c4[2]|c4[3] == 0 { // runs of empty codes (U16's fine steps)
			continue
		}
		w4 := w[i : i+4 : i+4]
		// counts fit in int32, whose conversion is one instruction
		a0 += float64(int32(c4[0])) * w4[0]
		a1 += float64(int32(c4[1])) * w4[1]
		a2 += float64(int32(c4[2])) * w4[2]
		a3 += float64(int32(c4[3])) * w4[3]
		n0 += c4[0] + c4[1]
		n1 += c4[2] + c4[3]
	}
	for ; i < len(c); i++ {
		a0 += float64(c[i]) * w[i]
		n0 += c[i]
	}
	return a0 + a1 + a2 + a3, int(n0) + int(n1)
}

// groupCands returns the tokens of group k, best first, with their weights.
func (s *sampler) groupCands(k int) []wcand {
	h, h2 := s.groupCodes(k)
	s.gids = gatherCodes(s.l.Raw16, h, h2, s.touched, s.gids[:0])
	g := s.gbuf[:0]
	for _, id := range s.gids {
		g = append(g, wcand{cand{id, s.codeVal(h)}, s.wtab[h]})
	}
	for _, x := range s.tv {
		if x.v >= s.thr && s.ceilKey(x.v) == k {
			g = append(g, wcand{x, math.Exp(float64(x.v) / float64(s.p.Temperature))})
		}
	}
	slices.SortFunc(g, func(a, b wcand) int {
		if better(a.cand, b.cand) {
			return -1
		}
		return 1
	})
	s.gbuf = g
	return g
}

// pickCode returns the token of group k where the draw u (within the
// group's mass) falls; at most the n-th (from 1) of equal weights.
func (s *sampler) pickCode(k int, u float64, n int) int32 {
	if s.tw[k] == 0 {
		h, h2 := s.groupCodes(k)
		j := min(max(int(u/s.wtab[h]), 0), n-1)
		return nthCode(s.l.Raw16, h, h2, s.touched, j)
	}
	g := s.groupCands(k)
	for _, c := range g {
		if u -= c.w; u < 0 {
			return c.id
		}
	}
	return g[len(g)-1].id
}

// sampleCodes draws a token after histCodes.
func (s *sampler) sampleCodes() int32 {
	u := s.rng.Float64() * s.zk
	lo := s.kBot // the lowest key kept whole
	if s.bKey >= 0 {
		lo = s.bKey + 1
	}
	last := -1
	for b := s.kTop >> 6; b >= lo>>6; b-- {
		if b<<6 >= lo && u >= s.blk[b] {
			u -= s.blk[b]
			continue
		}
		for k := min(b<<6+63, s.kTop); k >= max(b<<6, lo); k-- {
			g := s.groupMass(k)
			if g == 0 {
				continue
			}
			if u < g {
				return s.pickCode(k, u, s.groupCount(k))
			}
			u -= g
			last = k
		}
	}
	switch {
	case s.bKey >= 0 && s.bList:
		for i, w := range s.pw {
			if u -= w; u < 0 {
				return s.pbuf[i].id
			}
		}
		return s.pbuf[len(s.pbuf)-1].id
	case s.bKey >= 0:
		return s.pickCode(s.bKey, u, s.bKept)
	}
	// rounding: the lowest kept group
	for k := lo; k <= s.kTop && last < 0; k++ {
		if s.groupMass(k) > 0 {
			last = k
		}
	}
	if last < 0 {
		return 0
	}
	return s.pickCode(last, math.Inf(1), s.groupCount(last))
}

// keptCodes materialises the kept tokens of a histCodes step (for tests).
func (s *sampler) keptCodes() ([]cand, []float64) {
	lo := s.kBot
	if s.bKey >= 0 {
		lo = s.bKey + 1
	}
	var c []cand
	nb := 0
	for i, h := range s.l.Raw16 {
		k := s.codeKey(h)
		if k < 0 || skipped(s.touched, i) {
			continue
		}
		if k >= lo || k == s.bKey && !s.bList && nb < s.bKept {
			if k == s.bKey {
				nb++
			}
			c = append(c, cand{int32(i), s.codeVal(h)})
		}
	}
	for _, x := range s.tv {
		if x.v >= s.thr && s.ceilKey(x.v) >= lo {
			c = append(c, x)
		}
	}
	if s.bList {
		c = append(c, s.pbuf...)
	}
	inv := 1 / s.p.Temperature
	ws := make([]float64, len(c))
	for i, x := range c {
		ws[i] = float64(expNeg((x.v - s.m) * inv))
	}
	return c, ws
}
