package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hexserve/hexserve/internal/half"
)

func randLogits(r *rand.Rand, n int, sigma float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * sigma)
	}
	return x
}

func f32(x []float32) Logits { return Logits{Type: F32, F32: x} }

// TestHalfKeyOrder checks that halfKey orders halves like their values.
func TestHalfKeyOrder(t *testing.T) {
	prev := float32(math.Inf(-1))
	for k := keyNegInf; k <= keyPosInf; k++ {
		v := half.ToFloat32(keyHalf(k))
		if v < prev {
			t.Fatalf("key %#x: %v < %v", k, v, prev)
		}
		if halfKey(keyHalf(k)) != k {
			t.Fatalf("key %#x does not round-trip", k)
		}
		prev = v
	}
}

// reference computes the kept set by brute force: adjusted logits of the
// whole vocabulary, a full sort, then top_k, softmax(T), top_p, min_p. Like
// the sampler, it ignores tokens more than sampleCutoff·T below the best.
func reference(adj []float32, p Params) []int32 {
	c := make([]cand, len(adj))
	for i, v := range adj {
		c[i] = cand{int32(i), v}
	}
	slices.SortFunc(c, func(a, b cand) int {
		if better(a, b) {
			return -1
		}
		if better(b, a) {
			return 1
		}
		return 0
	})
	t := float64(p.Temperature)
	m := float64(c[0].v)
	n := 0
	for n < len(c) && (float64(c[n].v)-m)/t >= -sampleCutoff {
		n++
	}
	c = c[:n]
	if p.TopK > 0 && p.TopK < len(c) {
		c = c[:p.TopK]
	}
	w := make([]float64, len(c))
	var z float64
	for i, x := range c {
		w[i] = math.Exp((float64(x.v) - m) / t)
		z += w[i]
	}
	if p.TopP > 0 && p.TopP < 1 {
		cum := 0.0
		for i := range c {
			cum += w[i] / z
			if cum >= float64(p.TopP) {
				c, w = c[:i+1], w[:i+1]
				break
			}
		}
	}
	var ids []int32
	for i, x := range c {
		if p.MinP == 0 || w[i] >= float64(p.MinP)*w[0] {
			ids = append(ids, x.id)
		}
	}
	slices.Sort(ids)
	return ids
}

func TestFilterMatchesReference(t *testing.T) {
	const V = 4000
	cases := []struct {
		name string
		p    Params
	}{
		{"temperature", Params{Temperature: 1}},
		{"top_k", Params{Temperature: 0.8, TopK: 40}},
		{"top_k=1", Params{Temperature: 0.8, TopK: 1}},
		{"top_p", Params{Temperature: 0.7, TopP: 0.9}},
		{"top_p small", Params{Temperature: 1.3, TopP: 0.1}},
		{"min_p", Params{Temperature: 1, MinP: 0.05}},
		{"all", Params{Temperature: 0.9, TopK: 200, TopP: 0.8, MinP: 0.02}},
		{"top_k+min_p", Params{Temperature: 0.5, TopK: 1000, MinP: 0.3}},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range cases {
		for _, hist := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/hist=%v", tc.name, hist), func(t *testing.T) {
				s := newSampler(V) // reused: no state may leak between steps
				if hist {
					s.bigMin = 0
				}
				for trial := range 20 {
					x := randLogits(r, V, 1+float64(trial%4))
					s.Reset(tc.p, nil, 1)
					s.StartChoice()
					s.prepare(f32(x), false)
					if want := hist && s.histOK(f32(x), false); s.big != want {
						t.Fatalf("histogram path %v, want %v", s.big, want)
					}
					got := keptIDs(s)
					want := reference(x, tc.p)
					if !slices.Equal(got, want) {
						t.Fatalf("trial %d: kept %d tokens, reference %d", trial, len(got), len(want))
					}
				}
			})
		}
	}
}

func TestGreedyArgmax(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	s := newSampler(1000)
	s.Reset(Params{}, nil, 0)
	s.StartChoice()
	for range 50 {
		x := randLogits(r, 1000, 3)
		want := 0
		for i, v := range x {
			if v > x[want] {
				want = i
			}
		}
		if got, _ := s.sample(f32(x), false, 0); int(got) != want {
			t.Fatalf("greedy = %d, argmax %d", got, want)
		}
	}
	for range 50 { // U16: many ties after quantisation
		l := toU16(randLogits(r, 1000, 0.003))
		want := 0
		for i, q := range l.Raw16 {
			if q > l.Raw16[want] {
				want = i
			}
		}
		if got, _ := s.sample(l, false, 0); int(got) != want {
			t.Fatalf("U16 greedy = %d, argmax %d", got, want)
		}
	}
	x := make([]float32, 1000)
	x[7], x[3], x[900] = 5, 5, 5
	if got, _ := s.sample(f32(x), false, 0); got != 3 {
		t.Fatalf("tie: got %d, want the lowest id 3", got)
	}
	h := make([]uint16, 1000) // +0 and -0 everywhere, 1.5 at 5 and 600
	for i := range h {
		h[i] = uint16(i%2) << 15
	}
	q := make([]uint16, 1000)
	for _, l := range []Logits{{Type: F16, Raw16: h}, {Type: U16, Raw16: q, Scale: 0.5, Offset: -3}} {
		if got, _ := s.sample(l, false, 0); got != 0 {
			t.Fatalf("%v all equal: got %d, want 0", l.Type, got)
		}
	}
	h[600], h[5], q[600], q[5] = 0x3e00, 0x3e00, 9, 9
	for _, l := range []Logits{{Type: F16, Raw16: h}, {Type: U16, Raw16: q, Scale: 0.5, Offset: -3}} {
		if got, _ := s.sample(l, false, 0); got != 5 {
			t.Fatalf("%v tie: got %d, want 5", l.Type, got)
		}
	}
}

func TestSeededReproducible(t *testing.T) {
	const V = 3000
	r := rand.New(rand.NewPCG(5, 6))
	steps := make([][]float32, 40)
	for i := range steps {
		steps[i] = randLogits(r, V, 2)
	}
	p := Params{Temperature: 1, TopP: 0.95, PresencePenalty: 0.5}
	for _, typ := range []DType{F32, U16} { // U16 on the code-histogram path
		run := func(seed uint64) []int32 {
			s := newSampler(V)
			if typ == U16 {
				s.bigMin = 0
			}
			s.Reset(p, []int32{1, 2, 3}, seed)
			s.StartChoice()
			var out []int32
			for _, x := range steps {
				l := f32(x)
				if typ == U16 {
					l = toU16(x)
				}
				id, _ := s.sample(l, false, 0)
				if typ == U16 && !s.code {
					t.Fatal("U16: code-histogram path not taken")
				}
				s.Accept(id)
				out = append(out, id)
			}
			return out
		}
		a, b, c := run(42), run(42), run(43)
		if !slices.Equal(a, b) {
			t.Fatalf("%v: same seed, different tokens", typ)
		}
		if slices.Equal(a, c) {
			t.Fatalf("%v: different seeds, same 40 tokens", typ)
		}
	}
}

func TestPenaltiesAndBias(t *testing.T) {
	x := make([]float32, 100)
	x[1], x[2], x[3], x[4], x[5] = 2, -2, 4, 1, 3
	p := Params{Temperature: 1, PresencePenalty: 0.5, FrequencyPenalty: 0.25, RepetitionPenalty: 2,
		LogitBias: map[int32]float32{5: -100, 6: 10}}
	s := newSampler(100)
	s.Reset(p, []int32{1, 2}, 0) // prompt: repetition penalty only
	s.StartChoice()
	s.Accept(3)
	s.Accept(3)
	s.Accept(4)
	s.prepare(f32(x), false)
	got := map[int32]float32{}
	for _, c := range s.tv {
		got[c.id] = c.v
	}
	want := map[int32]float32{
		1: 2.0 / 2,              // positive: divided
		2: -2 * 2,               // negative: multiplied
		3: 4.0/2 - 2*0.25 - 0.5, // repetition, then 2·frequency + presence
		4: 1.0/2 - 0.25 - 0.5,
		5: 3 - 100,
		6: 0 + 10,
	}
	for id, w := range want {
		if math.Abs(float64(got[id]-w)) > 1e-6 {
			t.Errorf("token %d: %v, want %v", id, got[id], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("touched %v", got)
	}
	// Greedy sees the overrides: the bias makes 6 the best.
	s.p.Temperature = 0
	if id, _ := s.sample(f32(x), false, 0); id != 6 {
		t.Errorf("greedy with bias = %d, want 6", id)
	}
	// A banned best token: the next untouched one wins even far below.
	y := make([]float32, 100)
	for i := range y {
		y[i] = -50
	}
	y[10], y[11] = 40, -45
	s.Reset(Params{LogitBias: map[int32]float32{10: -100}}, nil, 0)
	s.StartChoice()
	if id, _ := s.sample(f32(y), false, 0); id != 11 {
		t.Errorf("banned best: got %d, want 11", id)
	}
}

func TestLogprobs(t *testing.T) {
	const V = 2000
	r := rand.New(rand.NewPCG(7, 8))
	raw := randLogits(r, V, 3)
	for _, l := range []Logits{f32(raw), toU16(raw)} {
		x := values(l, V)
		s := newSampler(V)
		// Penalties must not change the raw log-probabilities.
		s.Reset(Params{Temperature: 0.7, FrequencyPenalty: 1, LogitBias: map[int32]float32{9: 5}}, nil, 1)
		s.StartChoice()
		s.Accept(9)
		var sum float64
		for id := range int32(V) {
			s.prepare(l, true)
			sum += math.Exp(float64(s.logprobs(l, id, 0).Logprob))
		}
		if math.Abs(sum-1) > 1e-4 {
			t.Fatalf("%v: probabilities sum to %v", l.Type, sum)
		}
		s.prepare(l, true)
		lp := s.logprobs(l, 0, maxTop)
		var z float64
		for _, v := range x {
			z += math.Exp(float64(v))
		}
		order := make([]int32, V)
		for i := range order {
			order[i] = int32(i)
		}
		slices.SortFunc(order, func(a, b int32) int {
			if x[a] != x[b] {
				if x[a] > x[b] {
					return -1
				}
				return 1
			}
			return int(a - b)
		})
		if len(lp.Top) != maxTop {
			t.Fatalf("%v: %d alternatives", l.Type, len(lp.Top))
		}
		for i, a := range lp.Top {
			want := float64(x[order[i]]) - math.Log(z)
			if a.ID != order[i] || math.Abs(float64(a.Logprob)-want) > 1e-4 {
				t.Fatalf("%v top %d: %d %v, want %d %v", l.Type, i, a.ID, a.Logprob, order[i], want)
			}
		}
		if want := float64(x[0]) - math.Log(z); math.Abs(float64(lp.Logprob)-want) > 1e-4 {
			t.Fatalf("%v: chosen logprob %v, want %v", l.Type, lp.Logprob, want)
		}
	}
}

// F16 and U16 logits give the same choices as their F32 conversion.
func TestNativeTypes(t *testing.T) {
	const V = 5000
	r := rand.New(rand.NewPCG(9, 10))
	params := []Params{{}, {Temperature: 0.7, TopP: 0.9, PresencePenalty: 0.3, RepetitionPenalty: 1.1}, {Temperature: 1, TopK: 20}}
	for _, p := range params {
		for trial := range 10 {
			x := randLogits(r, V, 2)
			h := make([]uint16, V)
			q := make([]uint16, V)
			xh := make([]float32, V)
			xq := make([]float32, V)
			u16 := Logits{Type: U16, Raw16: q, Scale: 0.001, Offset: -30000}
			for i, v := range x {
				h[i] = half.FromFloat32(v)
				xh[i] = half.ToFloat32(h[i])
				q[i] = uint16(min(max(math.Round(float64(v)/0.001+30000), 0), 65535))
				xq[i] = u16.At(i)
			}
			pairs := []struct {
				name   string
				native Logits
				ref    []float32
			}{{"F16", Logits{Type: F16, Raw16: h}, xh}, {"U16", u16, xq}}
			for _, pr := range pairs {
				a, b := newSampler(V), newSampler(V)
				prompt := []int32{1, 2, 3, 100}
				a.Reset(p, prompt, uint64(trial))
				b.Reset(p, prompt, uint64(trial))
				a.StartChoice()
				b.StartChoice()
				for step := range 5 {
					ia, la := a.sample(pr.native, true, 5)
					ib, lb := b.sample(f32(pr.ref), true, 5)
					if ia != ib || la.Logprob != lb.Logprob || len(la.Top) != len(lb.Top) {
						t.Fatalf("%s %+v trial %d step %d: %d %v vs F32 %d %v", pr.name, p, trial, step, ia, la.Logprob, ib, lb.Logprob)
					}
					a.Accept(ia)
					b.Accept(ib)
				}
			}
		}
	}
}

func TestExpNeg(t *testing.T) {
	for x := float32(-90); x <= 0; x += 0.0137 {
		got, want := float64(expNeg(x)), math.Exp(float64(x))
		if x < -87 {
			want = 0
		}
		if math.Abs(got-want) > 3e-7*want {
			t.Fatalf("expNeg(%v) = %v, want %v", x, got, want)
		}
	}
}

// adjustAll applies the penalties and bias to every id, the brute-force way.
func adjustAll(x []float32, p Params, prompt, gen []int32) []float32 {
	prev := map[int32]bool{}
	count := map[int32]int{}
	seq := append(slices.Clone(prompt), gen...)
	if n := p.RepeatLastN; n > 0 && len(seq) > n {
		seq = seq[len(seq)-n:]
	}
	for _, id := range seq {
		prev[id] = true
	}
	for _, id := range gen {
		count[id]++
	}
	out := make([]float32, len(x))
	for i, v := range x {
		id := int32(i)
		if r := p.RepetitionPenalty; r > 0 && r != 1 && prev[id] {
			if v > 0 {
				v /= r
			} else {
				v *= r
			}
		}
		if c := count[id]; c > 0 {
			v -= float32(c)*p.FrequencyPenalty + p.PresencePenalty
		}
		out[i] = v + p.LogitBias[id]
	}
	return out
}

func TestFilterWithPenaltiesMatchesReference(t *testing.T) {
	const V = 4000
	r := rand.New(rand.NewPCG(11, 12))
	cases := []Params{
		{Temperature: 0.7, TopP: 0.9, PresencePenalty: 0.5, FrequencyPenalty: 0.5, RepetitionPenalty: 1.3},
		{Temperature: 1, TopK: 30, RepetitionPenalty: 0.8, LogitBias: map[int32]float32{5: 40, 6: -100}},
		{Temperature: 0.5, MinP: 0.1, LogitBias: map[int32]float32{7: 100}}, // one token dominates
		{Temperature: 1.2, TopP: 0.5, FrequencyPenalty: -1},
		{Temperature: 0.9, RepetitionPenalty: 1.5, RepeatLastN: 7}, // the window slides over prompt and output
	}
	s := newSampler(V) // reused across cases and steps
	for ci := range 2 * len(cases) {
		p := cases[ci%len(cases)]
		s.bigMin = bigMin
		if ci >= len(cases) { // the histogram path where it applies
			s.bigMin = 0
		}
		for trial := range 10 {
			x := randLogits(r, V, 1+float64(trial%3))
			prompt := make([]int32, 50)
			for i := range prompt {
				prompt[i] = int32(r.IntN(V))
			}
			var gen []int32
			s.Reset(p, prompt, 1)
			s.StartChoice()
			for range 30 {
				id := int32(r.IntN(V))
				if r.IntN(3) == 0 { // repeats
					id = int32(r.IntN(10))
				}
				gen = append(gen, id)
				s.Accept(id)
			}
			// the best raw tokens are often penalised: put them in the sequence
			best, _ := argmax(f32(x), nil)
			gen = append(gen, int32(best))
			s.Accept(int32(best))
			for _, l := range []Logits{f32(x), toF16(x), toU16(x)} {
				ref := x
				if l.Type != F32 {
					ref = make([]float32, V)
					for i := range ref {
						ref[i] = l.At(i)
					}
				}
				s.prepare(l, false)
				got := keptIDs(s)
				want := reference(adjustAll(ref, p, prompt, gen), p)
				if !slices.Equal(got, want) {
					var diff []string
					for _, id := range want {
						if !slices.Contains(got, id) {
							diff = append(diff, fmt.Sprintf("-%d(%v touched=%v)", id, l.At(int(id)), bit(s.touched, id)))
						}
					}
					for _, id := range got {
						if !slices.Contains(want, id) {
							diff = append(diff, fmt.Sprintf("+%d(%v)", id, l.At(int(id))))
						}
					}
					t.Fatalf("case %d trial %d %v: kept %d, reference %d: %v", ci, trial, l.Type, len(got), len(want), diff)
				}
			}
		}
	}
}

// The sampled frequencies follow the softmax of the kept tokens, within 4
// standard deviations (0.5/√n at most). -short (make test's -race run, where
// the histogram path's n draws take minutes) draws a tenth as many; make test
// draws them all without -race.
func TestSampleFrequencies(t *testing.T) {
	n := 40000
	if testing.Short() {
		n = 4000
	}
	tol := 4 * 0.5 / math.Sqrt(float64(n))
	x := []float32{1, 2, 0.5, 3, -1, 2.5, 0, 1.5}
	for i, p := range []Params{{Temperature: 1}, {Temperature: 0.5, TopK: 3}, {Temperature: 1.5, TopP: 0.8}, {Temperature: 1}, {Temperature: 1.5, TopP: 0.8}} {
		s := newSampler(len(x))
		if i >= 3 { // the histogram path
			s.bigMin = 0
		}
		s.Reset(p, nil, 99)
		s.StartChoice()
		s.prepare(f32(x), false)
		kept, ws := s.filter()
		var z float64
		for _, w := range ws {
			z += w
		}
		want := map[int32]float64{}
		for i, c := range kept {
			want[c.id] = ws[i] / z
		}
		got := map[int32]float64{}
		for range n {
			id, _ := s.sample(f32(x), false, 0)
			got[id] += 1 / float64(n)
		}
		for id, f := range got {
			if math.Abs(f-want[id]) > tol {
				t.Errorf("%+v: token %d sampled %.3f, want %.3f", p, id, f, want[id])
			}
		}
	}
}

// TestHistogramPath checks the path for nearly flat logits over the full
// Llama-3 vocabulary against the brute-force reference, and that it
// allocates nothing per step.
func TestHistogramPath(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	s := newSampler(llamaVocab)
	for trial, p := range []Params{
		{Temperature: 0.7, TopP: 0.9, PresencePenalty: 0.5, FrequencyPenalty: 0.5, RepetitionPenalty: 1.1},
		{Temperature: 1, TopP: 0.3, LogitBias: map[int32]float32{9: 3, 10: -100}},
		{Temperature: 2, PresencePenalty: 1},
		{Temperature: 0.3, TopP: 0.99, RepetitionPenalty: 1.3},
	} {
		x := randLogits(r, llamaVocab, 1+float64(trial%2))
		prompt := make([]int32, 200)
		for i := range prompt {
			prompt[i] = int32(r.IntN(llamaVocab))
		}
		gen := []int32{int32(trial), 5, 5, 9}
		startAfter(s, p, prompt, uint64(trial), gen)
		for _, l := range []Logits{f32(x), toF16(x), toU16(x)} {
			ref := values(l, llamaVocab)
			s.prepare(l, false)
			if !s.big || s.code != (l.Type != F32) {
				t.Fatalf("trial %d %v: %d candidates, histogram path %v, code path %v", trial, l.Type, s.inRange, s.big, s.code)
			}
			got := keptIDs(s)
			if want := reference(adjustAll(ref, p, prompt, gen), p); !slices.Equal(got, want) {
				t.Fatalf("trial %d %v: kept %d tokens, reference %d", trial, l.Type, len(got), len(want))
			}
			sampleKept(t, s, l, got, 20, fmt.Sprintf("trial %d %v", trial, l.Type))
			if n := testing.AllocsPerRun(5, func() { s.sample(l, false, 0) }); n != 0 {
				t.Fatalf("trial %d %v: %v allocations per step", trial, l.Type, n)
			}
		}
	}
}

// tiedLogits returns V logits on a grid of 0.5 from lo to lo+4 as F16 (+0
// and -0 among the zeros) and as U16 codes around 0x8000 (0x7fff and 0x8000
// among them, which F16 keys treat specially).
func tiedLogits(r *rand.Rand, V int, lo float32) []Logits {
	h, q := make([]uint16, V), make([]uint16, V)
	for i := range h {
		v := lo + float32(r.IntN(9))*0.5
		h[i] = half.FromFloat32(v)
		if v == 0 && r.IntN(2) == 0 {
			h[i] = 0x8000 // -0
		}
		q[i] = uint16(0x8000 + 2*v)
	}
	return []Logits{{Type: F16, Raw16: h}, {Type: U16, Raw16: q, Scale: 0.5, Offset: -0x8000}}
}

// TestHistogramTies: logits with few distinct values and touched ids that
// tie with untouched ones, so top_p and the draw split groups of equal
// logits, which go to the lowest ids.
func TestHistogramTies(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	const V = 20000
	s := newSampler(V)
	s.bigMin = 0
	for trial := range 20 { // each on F16 and U16
		p := Params{Temperature: 0.3 + 0.1*float32(trial%8), TopP: 0.05 + 0.9*r.Float32(),
			LogitBias: map[int32]float32{}}
		for range 30 { // touched ids moved onto other values, or left where they are
			p.LogitBias[int32(r.IntN(V))] = float32(r.IntN(5)-2) * 0.5
		}
		if trial%2 == 1 {
			p.PresencePenalty = 0.5
		}
		gen := []int32{int32(r.IntN(V)), int32(r.IntN(V))}
		for _, l := range tiedLogits(r, V, -2-float32(trial%3)) {
			startAfter(s, p, nil, uint64(trial), gen)
			ref := values(l, V)
			s.prepare(l, false)
			if !s.big || !s.code {
				t.Fatalf("trial %d %v: code-histogram path not taken", trial, l.Type)
			}
			got := keptIDs(s)
			if want := reference(adjustAll(ref, p, nil, gen), p); !slices.Equal(got, want) {
				t.Fatalf("trial %d %v (%+v): kept %d tokens, reference %d", trial, l.Type, p, len(got), len(want))
			}
			sampleKept(t, s, l, got, 50, fmt.Sprintf("trial %d %v", trial, l.Type))
		}
	}
}

// TestCodeFrequencies: on the code-histogram path, the sampled frequencies
// of every id follow the brute-force reference's kept set and softmax, with
// groups of tied logits split by top_p and by the draw.
func TestCodeFrequencies(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	const V, n = 24, 40000
	for trial, p := range []Params{
		{Temperature: 1},
		{Temperature: 0.8, TopP: 0.6, LogitBias: map[int32]float32{3: 0.5, 20: -0.5, 21: 1}},
		{Temperature: 1.5, TopP: 0.3, PresencePenalty: 0.5},
	} {
		gen := []int32{int32(r.IntN(V)), int32(r.IntN(V))}
		for _, l := range tiedLogits(r, V, -2) {
			s := newSampler(V)
			s.bigMin = 0
			startAfter(s, p, nil, uint64(trial), gen)
			ref := values(l, V)
			adj := adjustAll(ref, p, nil, gen)
			want := map[int32]float64{}
			var z float64
			for _, id := range reference(adj, p) {
				want[id] = math.Exp(float64(adj[id]) / float64(p.Temperature))
				z += want[id]
			}
			s.prepare(l, false)
			if !s.code {
				t.Fatalf("trial %d %v: code-histogram path not taken", trial, l.Type)
			}
			got := map[int32]float64{}
			for range n { // the draws of sample, on one prepared step
				got[s.sampleCodes()] += 1.0 / n
			}
			for id := range int32(V) {
				// 5σ of the binomial (seeded: no flakes); never outside the kept set
				if w := want[id] / z; math.Abs(got[id]-w) > 5*math.Sqrt(w*(1-w)/n) {
					t.Errorf("trial %d %v: token %d sampled %.3f, want %.3f", trial, l.Type, id, got[id], w)
				}
			}
		}
	}
}

// TestHistogramU16Fallback: U16 logits outside the weight table's range, or
// a touched token above every code, take the bucket path, still matching
// the reference.
func TestHistogramU16Fallback(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	const V = 20000
	s := newSampler(V)
	s.bigMin = 0
	x := randLogits(r, V, 1)
	for _, tc := range []struct {
		name string
		l    Logits
		p    Params
	}{
		{"|logit|/T > 700", Logits{Type: U16, Scale: 0.001, Offset: 700000}, Params{Temperature: 0.9, TopP: 0.8}},
		{"biased above every code", Logits{Type: U16, Scale: 0.001, Offset: -60000},
			Params{Temperature: 1, TopP: 0.9, LogitBias: map[int32]float32{7: 3}}},
	} {
		l := tc.l
		l.Raw16 = make([]uint16, V)
		for i, v := range x { // 60,000 codes above the lowest: the best is near the top
			l.Raw16[i] = uint16(min(max(math.Round(float64(v)/0.001+60000), 0), 65535))
		}
		l.Raw16[7] = 65535
		s.Reset(tc.p, nil, 1)
		s.StartChoice()
		ref := values(l, V)
		s.prepare(l, false)
		if !s.big || s.code {
			t.Fatalf("%s: histogram path %v, code path %v; want the bucket path", tc.name, s.big, s.code)
		}
		got := keptIDs(s)
		if want := reference(adjustAll(ref, tc.p, nil, nil), tc.p); !slices.Equal(got, want) {
			t.Fatalf("%s: kept %d tokens, reference %d", tc.name, len(got), len(want))
		}
		sampleKept(t, s, l, got, 50, tc.name)
	}
}

// TestCodeCountsReused: one sampler over a sequence of steps whose best
// code rises and falls (the counts of a step end at its best U16 code, and
// the next step clears no further) and changes type: each step's counts
// within the cutoff are those of the untouched ids.
func TestCodeCountsReused(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 30))
	const V = 20000
	x := randLogits(r, V, 2)
	u16 := func(shift float32) Logits {
		l := Logits{Type: U16, Raw16: make([]uint16, V), Scale: 0.001, Offset: -30000}
		for i, v := range x {
			l.Raw16[i] = uint16(min(max(math.Round(float64(v+shift)/0.001+30000), 0), 65535))
		}
		return l
	}
	s := newSampler(V)
	s.bigMin = 0
	s.Reset(Params{Temperature: 0.8, TopP: 0.9, PresencePenalty: 0.5, LogitBias: map[int32]float32{3: -2}},
		[]int32{1, 2}, 1)
	s.StartChoice()
	s.Accept(7)
	for _, step := range []struct {
		name string
		l    Logits
	}{
		{"U16", u16(0)},
		{"U16, best code higher", u16(12)},
		{"U16, best code below the last cutoff", u16(-20)},
		{"F16", toF16(x)},
		{"U16 after F16", u16(-5)},
		{"U16, many ids on the top code", u16(33)},
		{"U16 again", u16(3)},
	} {
		s.prepare(step.l, false)
		if !s.code {
			t.Fatalf("%s: code-histogram path not taken", step.name)
		}
		want := make([]uint32, 1<<16)
		for i, c := range step.l.Raw16 {
			if !skipped(s.touched, i) {
				want[c]++
			}
		}
		for c := range 1 << 16 {
			// every count from the cutoff up (F16: by key; -0 and +0 in
			// one group)
			if k := s.codeKey(uint16(c)); k < s.cd.kBot {
				continue
			}
			if s.cd.cnt[c] != want[c] {
				t.Fatalf("%s: code %d counted %d, want %d", step.name, c, s.cd.cnt[c], want[c])
			}
		}
	}
}

// TestU16MatchesF32: U16 logits sample as F32 logits holding their
// dequantised values. Where both take the collector (greedy, peaked logits,
// top_k) the tokens are the same for the same seed; on the histogram paths,
// whose weights differ (buckets for F32, exact per-code weights for U16),
// each step keeps the same tokens, those of the reference.
func TestU16MatchesF32(t *testing.T) {
	const V = 20000
	r := rand.New(rand.NewPCG(31, 32))
	nucleus := Params{Temperature: 0.7, TopP: 0.9, PresencePenalty: 0.5, FrequencyPenalty: 0.5, RepetitionPenalty: 1.1}
	peaked := func() []float32 {
		x := randLogits(r, V, 2.5)
		for k := range 40 {
			x[r.IntN(V)] = 22 - 0.4*float32(k) + float32(r.NormFloat64())
		}
		return x
	}
	for _, tc := range []struct {
		name   string
		x      []float32
		p      Params
		bigMin int  // candidates from which a step takes the histogram path
		hist   bool // it does: compare kept sets, not tokens
	}{
		{"greedy, peaked", peaked(), Params{}, bigMin, false},
		{"greedy, mid", randLogits(r, V, 4.5), Params{}, bigMin, false},
		{"greedy, flat", randLogits(r, V, 1), Params{}, bigMin, false},
		{"nucleus+penalties, peaked", peaked(), nucleus, bigMin, false},
		{"nucleus+penalties, mid", randLogits(r, V, 4.5), nucleus, bigMin, false},
		{"nucleus+penalties, mid, histogram", randLogits(r, V, 4.5), nucleus, 0, true},
		{"nucleus+penalties, flat, histogram", randLogits(r, V, 1), nucleus, 0, true},
		{"top_k, min_p, bias", randLogits(r, V, 3), Params{Temperature: 1, TopK: 40, MinP: 0.05,
			LogitBias: map[int32]float32{5: 4, 6: -100}}, 0, false},
	} {
		// real = (q − 30000)·0.001, as the .pte logits of BenchmarkSample
		u := Logits{Type: U16, Raw16: make([]uint16, V), Scale: 0.001, Offset: -30000}
		deq := make([]float32, V)
		for i, v := range tc.x {
			u.Raw16[i] = uint16(min(max(math.Round(float64(v)/0.001+30000), 0), 65535))
			deq[i] = u.At(i)
		}
		prompt := make([]int32, 200)
		for i := range prompt {
			prompt[i] = int32(r.IntN(V))
		}
		a, b := newSampler(V), newSampler(V)
		a.bigMin, b.bigMin = tc.bigMin, tc.bigMin
		a.Reset(tc.p, prompt, 7)
		b.Reset(tc.p, prompt, 7)
		a.StartChoice()
		b.StartChoice()
		var gen []int32
		for step := range 8 {
			if tc.hist {
				want := reference(adjustAll(deq, tc.p, prompt, gen), tc.p)
				for _, pr := range []struct {
					s *Sampler
					l Logits
				}{{a, u}, {b, f32(deq)}} {
					pr.s.prepare(pr.l, false)
					if !pr.s.big {
						t.Fatalf("%s, %v: histogram path not taken", tc.name, pr.l.Type)
					}
					got := keptIDs(pr.s)
					if !slices.Equal(got, want) {
						t.Fatalf("%s, %v, step %d: kept %d tokens, reference %d", tc.name, pr.l.Type, step, len(got), len(want))
					}
				}
			}
			ia, _ := a.sample(u, false, 0)
			ib, _ := b.sample(f32(deq), false, 0)
			if !tc.hist && ia != ib {
				t.Fatalf("%s, step %d: U16 sampled %d, F32 %d", tc.name, step, ia, ib)
			}
			a.Accept(ia)
			b.Accept(ia) // the same history for both
			gen = append(gen, ia)
		}
	}
}

// TestRepeatLastNWindow slides a short window over a long output (past the
// point where the history is compacted) and checks that exactly the ids in
// the window are penalised.
func TestRepeatLastNWindow(t *testing.T) {
	const V, n = 64, 3
	r := rand.New(rand.NewPCG(3, 4))
	s := newSampler(V)
	prompt := []int32{1, 2, 3, 4, 5}
	s.Reset(Params{RepetitionPenalty: 2, RepeatLastN: n}, prompt, 1)
	s.StartChoice()
	seq := slices.Clone(prompt)
	for step := range 300 {
		id := int32(r.IntN(8))
		s.Accept(id)
		seq = append(seq, id)
		win := seq[len(seq)-n:]
		for id := range int32(V) {
			if got, want := s.repeated(id), slices.Contains(win, id); got != want {
				t.Fatalf("step %d: token %d penalised %v, want %v (window %v)", step, id, got, want, win)
			}
		}
	}
}

// maxTop is inference.MaxTopLogprobs, the most alternatives a request asks for.
const maxTop = 20

// newSampler is New with a Scratch of its own, for the tests that call the
// step's parts (prepare, filter) directly.
// keptIDs returns the ids s's filter keeps, in order.
func keptIDs(s *Sampler) []int32 {
	kept, _ := s.filter()
	got := make([]int32, 0, len(kept))
	for _, c := range kept {
		got = append(got, c.id)
	}
	slices.Sort(got)
	return got
}

// sampleKept draws n tokens from l with s and fails, after what names the
// case, on one that is not in kept (sorted, as keptIDs returns it).
func sampleKept(t *testing.T, s *Sampler, l Logits, kept []int32, n int, what string) {
	t.Helper()
	for range n {
		if id, _ := s.sample(l, false, 0); !slices.Contains(kept, id) {
			t.Fatalf("%s: sampled %d, not a kept token", what, id)
		}
	}
}

// values returns l's first n values as float32s.
func values(l Logits, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = l.At(i)
	}
	return x
}

// startAfter resets s for a choice of a request with p, prompt and seed
// that has generated gen so far.
func startAfter(s *Sampler, p Params, prompt []int32, seed uint64, gen []int32) {
	s.Reset(p, prompt, seed)
	s.StartChoice()
	for _, id := range gen {
		s.Accept(id)
	}
}

func newSampler(vocab int) *Sampler {
	s := New(vocab)
	s.scratch = new(scratch)
	return s
}
