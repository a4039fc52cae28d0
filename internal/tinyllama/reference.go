package tinyllama

import (
	"fmt"
	"math"
	"runtime"
	"strconv"
	"sync"
)

// Model is a config with all its generated weights, for the exact float64
// reference forward pass. Weights are kept as float32 (every SPEC value is
// exact in float32); all arithmetic is float64. It is meant for small shapes.
type Model struct {
	Config  Config
	embed   []float32 // [V, H]
	lmHead  []float32 // [V, H]; the embedding when tied
	norm    []float32 // [H]
	layers  []refLayer
	invFreq []float64
}

type refLayer struct {
	inNorm, postNorm          []float32
	q, k, v, o, gate, up, dwn []float32
	qb, kb, vb                []float32 // Qwen2's projection biases; nil without
	qn, kn                    []float32 // Qwen3's q_norm, k_norm [head_dim]; nil without
}

// NewModel generates c's weights.
func NewModel(c Config) (*Model, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	get := func(name string) ([]float32, error) {
		t, err := Lookup(c, name)
		if err != nil {
			return nil, err
		}
		out := make([]float32, t.Len())
		return out, FillFloat32(c, name, 0, out)
	}
	m := &Model{Config: c, invFreq: InvFreq(c)}
	var err error
	if m.embed, err = get("model.embed_tokens.weight"); err != nil {
		return nil, err
	}
	m.lmHead = m.embed
	if !c.TieWordEmbeddings {
		if m.lmHead, err = get("lm_head.weight"); err != nil {
			return nil, err
		}
	}
	if m.norm, err = get("model.norm.weight"); err != nil {
		return nil, err
	}
	for i := range c.NumHiddenLayers {
		p := "model.layers." + strconv.Itoa(i) + "."
		var l refLayer
		for _, w := range []struct {
			dst  *[]float32
			name string
		}{
			{&l.inNorm, "input_layernorm.weight"}, {&l.postNorm, "post_attention_layernorm.weight"},
			{&l.q, "self_attn.q_proj.weight"}, {&l.k, "self_attn.k_proj.weight"}, {&l.v, "self_attn.v_proj.weight"},
			{&l.o, "self_attn.o_proj.weight"}, {&l.gate, "mlp.gate_proj.weight"}, {&l.up, "mlp.up_proj.weight"},
			{&l.dwn, "mlp.down_proj.weight"},
		} {
			if *w.dst, err = get(p + w.name); err != nil {
				return nil, err
			}
		}
		if err := l.optional(c, get, p); err != nil {
			return nil, err
		}
		m.layers = append(m.layers, l)
	}
	return m, nil
}

// optional loads the family's extra tensors of layer prefix p: biases and q/k norms.
func (l *refLayer) optional(c Config, get func(string) ([]float32, error), p string) error {
	var ws []struct {
		dst  *[]float32
		name string
	}
	add := func(dst *[]float32, name string) {
		ws = append(ws, struct {
			dst  *[]float32
			name string
		}{dst, name})
	}
	if c.QKVBias() {
		add(&l.qb, "self_attn.q_proj.bias")
		add(&l.kb, "self_attn.k_proj.bias")
		add(&l.vb, "self_attn.v_proj.bias")
	}
	if c.QKNorm() {
		add(&l.qn, "self_attn.q_norm.weight")
		add(&l.kn, "self_attn.k_norm.weight")
	}
	for _, w := range ws {
		var err error
		if *w.dst, err = get(p + w.name); err != nil {
			return err
		}
	}
	return nil
}

// project computes q, k, v of layer l from the normed input xn: the projections, their biases,
// then the per-head q/k norms, then RoPE (rope applies it to one head).
func (l *refLayer) project(q, k, v, xn []float64, hd int, eps float64, rope func([]float64)) {
	matVec(q, l.q, xn)
	matVec(k, l.k, xn)
	matVec(v, l.v, xn)
	for _, b := range []struct {
		dst  []float64
		bias []float32
	}{{q, l.qb}, {k, l.kb}, {v, l.vb}} {
		for i, w := range b.bias {
			b.dst[i] += float64(w)
		}
	}
	for _, h := range []struct {
		dst  []float64
		norm []float32
	}{{q, l.qn}, {k, l.kn}} {
		for o := 0; o < len(h.dst); o += hd {
			if h.norm != nil {
				rmsNorm(h.dst[o:o+hd], h.dst[o:o+hd], h.norm, eps)
			}
			rope(h.dst[o : o+hd])
		}
	}
}

// Session is one sequence's state: the float64 KV cache of every layer.
type Session struct {
	// Observe, if set, is called after each layer with this token's post-RoPE key, its value
	// and the residual stream after the layer (read-only; used to calibrate fixed-point I/O).
	Observe func(layer int, k, v, x []float64)

	m    *Model
	k, v [][]float64 // per layer, [pos, kv_dim] appended row by row
	pos  int
}

// NewSession starts an empty sequence.
func (m *Model) NewSession() *Session {
	n := m.Config.NumHiddenLayers
	return &Session{m: m, k: make([][]float64, n), v: make([][]float64, n)}
}

// Len is the number of tokens appended so far: the next token's position.
func (s *Session) Len() int { return s.pos }

// Rows is the number of K/V rows the session attends (Len less the evicted).
func (s *Session) Rows() int { return len(s.k[0]) / s.m.Config.KVDim() }

// Evict drops the K/V rows [from, from+n) of the ones kept, as a ring at the original positions
// does (inference.ContextShifter): later tokens attend the others and keep counting positions.
func (s *Session) Evict(from, n int) error {
	if from < 0 || n < 0 || from+n > s.Rows() {
		return fmt.Errorf("tinyllama: evict rows [%d, %d) of %d", from, from+n, s.Rows())
	}
	kvd := s.m.Config.KVDim()
	for li := range s.k {
		s.k[li] = append(s.k[li][:from*kvd], s.k[li][(from+n)*kvd:]...)
		s.v[li] = append(s.v[li][:from*kvd], s.v[li][(from+n)*kvd:]...)
	}
	return nil
}

// rotation returns RoPE at position pos for one head (rotate-half), cos and sin times LongRoPE's
// attention factor (1 for the other scalings).
func (m *Model) rotation(pos int) func([]float64) {
	half := len(m.invFreq)
	cos, sin := make([]float64, half), make([]float64, half)
	af := m.Config.Rope().Attention()
	for i, fr := range m.invFreq {
		sin[i], cos[i] = math.Sincos(float64(pos) * fr)
		sin[i], cos[i] = sin[i]*af, cos[i]*af
	}
	return func(vec []float64) {
		for i := range half {
			a, b := vec[i], vec[i+half]
			vec[i] = a*cos[i] - b*sin[i]
			vec[i+half] = b*cos[i] + a*sin[i]
		}
	}
}

// Append runs token tok at the next position and returns the final normed
// hidden state (the lm-head input), length hidden_size.
func (s *Session) Append(tok int) ([]float64, error) {
	m, c := s.m, s.m.Config
	if tok < 0 || tok >= c.VocabSize {
		return nil, fmt.Errorf("tinyllama: token %d outside the vocabulary (%d)", tok, c.VocabSize)
	}
	h, hd := c.HiddenSize, c.HeadDim
	kvd, qd, f := c.KVDim(), c.QDim(), c.IntermediateSize
	eps := c.RMSNormEps
	emb, scale, res := c.multipliers()
	x := make([]float64, h)
	for i := range x {
		x[i] = float64(m.embed[tok*h+i]) * emb
	}
	xn := make([]float64, h)
	q, k, v := make([]float64, qd), make([]float64, kvd), make([]float64, kvd)
	att := make([]float64, qd)
	g, u := make([]float64, f), make([]float64, f)
	tmp := make([]float64, h)
	scores := make([]float64, s.Rows()+1)
	rope := m.rotation(s.pos)
	for li := range m.layers {
		l := &m.layers[li]
		rmsNorm(xn, x, l.inNorm, eps)
		l.project(q, k, v, xn, hd, eps, rope)
		s.k[li] = append(s.k[li], k...)
		s.v[li] = append(s.v[li], v...)
		s.attend(li, q, att, scores, scale)
		matVec(tmp, l.o, att)
		for i := range x {
			x[i] += tmp[i] * res
		}
		rmsNorm(xn, x, l.postNorm, eps)
		matVec(g, l.gate, xn)
		matVec(u, l.up, xn)
		for i := range g {
			g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
		}
		matVec(tmp, l.dwn, g)
		for i := range x {
			x[i] += tmp[i] * res
		}
		if s.Observe != nil {
			s.Observe(li, k, v, x)
		}
	}
	s.pos++
	out := make([]float64, h)
	rmsNorm(out, x, m.norm, eps)
	return out, nil
}

// multipliers are Granite's embedding, attention and residual multipliers, else 1, 1/√head_dim, 1.
func (c Config) multipliers() (emb, att, res float64) {
	if c.Granite() {
		return c.EmbeddingMultiplier, c.AttentionMultiplier, c.ResidualMultiplier
	}
	return 1, 1 / math.Sqrt(float64(c.HeadDim)), 1
}

// attend writes to att the attention of every query head of q over the layer li's cached keys
// and values (the current token's included, the evicted left out), with scores scaled by scale; scores is scratch.
func (s *Session) attend(li int, q, att, scores []float64, scale float64) {
	c := s.m.Config
	hd, nh, kvd := c.HeadDim, c.NumAttentionHeads, c.KVDim()
	group := nh / c.NumKeyValueHeads
	n := len(s.k[li]) / kvd
	for hh := range nh {
		kvh := hh / group
		qh := q[hh*hd : (hh+1)*hd]
		best := math.Inf(-1)
		for t := range n {
			kt := s.k[li][t*kvd+kvh*hd : t*kvd+(kvh+1)*hd]
			var d float64
			for i := range qh {
				d += qh[i] * kt[i]
			}
			scores[t] = d * scale
			best = max(best, scores[t])
		}
		var sum float64
		for t := range n {
			scores[t] = math.Exp(scores[t] - best)
			sum += scores[t]
		}
		out := att[hh*hd : (hh+1)*hd]
		clear(out)
		for t := range n {
			w := scores[t] / sum
			vt := s.v[li][t*kvd+kvh*hd : t*kvd+(kvh+1)*hd]
			for i := range out {
				out[i] += w * vt[i]
			}
		}
	}
}

// Logits applies the lm-head (the embedding when tied) to a final hidden state.
func (m *Model) Logits(hidden []float64) []float64 {
	out := make([]float64, m.Config.VocabSize)
	// Rows split over the CPUs: the lm-head is most of the work.
	n := min(runtime.GOMAXPROCS(0), max(1, len(out)/4096))
	var wg sync.WaitGroup
	h := len(hidden)
	for i := range n {
		a, b := i*len(out)/n, (i+1)*len(out)/n
		wg.Go(func() { matVec(out[a:b], m.lmHead[a*h:b*h], hidden) })
	}
	wg.Wait()
	if m.Config.Granite() {
		for i := range out {
			out[i] /= m.Config.LogitsScaling
		}
	}
	return out
}

// Forward evaluates tokens from position 0 and returns the logits at every
// position.
func (m *Model) Forward(tokens []int) ([][]float64, error) {
	s := m.NewSession()
	out := make([][]float64, 0, len(tokens))
	for _, t := range tokens {
		h, err := s.Append(t)
		if err != nil {
			return nil, err
		}
		out = append(out, m.Logits(h))
	}
	return out, nil
}

// Greedy evaluates prompt and then appends n argmax tokens, reusing the KV
// cache; it returns the generated tokens.
func (m *Model) Greedy(prompt []int, n int) ([]int, error) {
	if len(prompt) == 0 {
		return nil, fmt.Errorf("tinyllama: empty prompt")
	}
	s := m.NewSession()
	var h []float64
	var err error
	for _, t := range prompt {
		if h, err = s.Append(t); err != nil {
			return nil, err
		}
	}
	var out []int
	for range n {
		tok := Argmax(m.Logits(h))
		out = append(out, tok)
		if len(out) == n {
			break
		}
		if h, err = s.Append(tok); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Argmax is the index of the largest value (the first on ties).
func Argmax[T float32 | float64](v []T) int {
	bi := 0
	for i, x := range v {
		if x > v[bi] {
			bi = i
		}
	}
	return bi
}

// rmsNorm writes x / sqrt(mean(x²) + eps) · w to dst.
func rmsNorm(dst, x []float64, w []float32, eps float64) {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	r := 1 / math.Sqrt(ss/float64(len(x))+eps)
	for i, v := range x {
		dst[i] = v * r * float64(w[i])
	}
}

// matVec writes W·x to dst, W row-major [len(dst), len(x)].
func matVec(dst []float64, w []float32, x []float64) {
	n := len(x)
	for r := range dst {
		row := w[r*n : (r+1)*n]
		var s float64
		for i, v := range row {
			s += float64(v) * x[i]
		}
		dst[r] = s
	}
}

// QuantizeInt8 replaces every matrix the graphs multiply by (projections and
// the lm-head, not the embedding lookup) with its per-row symmetric int8
// quantisation, as hostsim's int8 weight storage holds it: scale =
// max|row|/127 and value = round(w/scale)·scale, in float32. The reference
// then models an int8-weight bundle exactly (up to float32 arithmetic).
func (m *Model) QuantizeInt8() {
	q := func(w []float32, cols int) []float32 {
		out := make([]float32, len(w))
		for r := 0; r < len(w); r += cols {
			row := w[r : r+cols]
			mx := float32(0)
			for _, v := range row {
				mx = max(mx, float32(math.Abs(float64(v))))
			}
			if mx == 0 {
				continue
			}
			s := mx / 127
			for i, v := range row {
				out[r+i] = float32(max(-127, min(127, math.Round(float64(v/s))))) * s
			}
		}
		return out
	}
	c := m.Config
	h, qd, f := c.HiddenSize, c.QDim(), c.IntermediateSize
	for i := range m.layers {
		l := &m.layers[i]
		l.q, l.k, l.v, l.gate, l.up = q(l.q, h), q(l.k, h), q(l.v, h), q(l.gate, h), q(l.up, h)
		l.o, l.dwn = q(l.o, qd), q(l.dwn, f)
	}
	m.lmHead = q(m.lmHead, h)
}
