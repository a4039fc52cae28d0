package tinyllama

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/hexserve/hexserve/internal/half"
	"github.com/hexserve/hexserve/internal/rope"
)

// Tensor is one weight tensor's Hugging Face name and shape.
type Tensor struct {
	Name  string
	Shape []int
}

// Len is the number of elements.
func (t Tensor) Len() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Tensors lists every weight tensor of the checkpoint in Hugging Face order (embedding, then
// per layer input norm, q, k, v, [q/k/v biases (Qwen2), q_norm, k_norm (Qwen3)], o,
// post-attention norm, gate, up, down, then the final norm, then lm_head.weight when embeddings
// are not tied). Phi-3's are fused: qkv_proj in place of q, k, v and gate_up_proj in place of
// gate, up (GraphTensors lists them split).
func Tensors(c Config) []Tensor {
	if !c.Fused() {
		return GraphTensors(c)
	}
	h, q, kv, f := c.HiddenSize, c.QDim(), c.KVDim(), c.IntermediateSize
	var ts []Tensor
	for _, t := range GraphTensors(c) {
		switch _, part, _ := strings.Cut(t.Name, ".self_attn."); {
		case part == "q_proj.weight":
			t = Tensor{strings.TrimSuffix(t.Name, "q_proj.weight") + "qkv_proj.weight", []int{q + 2*kv, h}}
		case part == "k_proj.weight" || part == "v_proj.weight":
			continue
		case strings.HasSuffix(t.Name, ".mlp.gate_proj.weight"):
			t = Tensor{strings.TrimSuffix(t.Name, "gate_proj.weight") + "gate_up_proj.weight", []int{2 * f, h}}
		case strings.HasSuffix(t.Name, ".mlp.up_proj.weight"):
			continue
		}
		ts = append(ts, t)
	}
	return ts
}

// fusedPart maps a split tensor name of a fused config (Phi-3's q/k/v_proj, gate/up_proj) to the
// checkpoint tensor holding it and the element its rows start at.
func fusedPart(c Config, name string) (fused string, start int, ok bool) {
	if !c.Fused() {
		return "", 0, false
	}
	h, q, kv, f := c.HiddenSize, c.QDim(), c.KVDim(), c.IntermediateSize
	for _, p := range []struct {
		suffix, fused string
		row           int
	}{{"self_attn.q_proj.weight", "self_attn.qkv_proj.weight", 0}, {"self_attn.k_proj.weight", "self_attn.qkv_proj.weight", q},
		{"self_attn.v_proj.weight", "self_attn.qkv_proj.weight", q + kv}, {"mlp.gate_proj.weight", "mlp.gate_up_proj.weight", 0},
		{"mlp.up_proj.weight", "mlp.gate_up_proj.weight", f}} {
		if pre, found := strings.CutSuffix(name, p.suffix); found && strings.HasPrefix(pre, "model.layers.") {
			return pre + p.fused, p.row * h, true
		}
	}
	return "", 0, false
}

// GraphTensors lists the weight tensors the graphs take, fused checkpoint tensors split (as AI
// Hub's export splits Phi-3's), in the order of Tensors.
func GraphTensors(c Config) []Tensor {
	h, q, kv, f := c.HiddenSize, c.QDim(), c.KVDim(), c.IntermediateSize
	ts := []Tensor{{"model.embed_tokens.weight", []int{c.VocabSize, h}}}
	for i := range c.NumHiddenLayers {
		p := "model.layers." + strconv.Itoa(i) + "."
		ts = append(ts,
			Tensor{p + "input_layernorm.weight", []int{h}},
			Tensor{p + "self_attn.q_proj.weight", []int{q, h}},
			Tensor{p + "self_attn.k_proj.weight", []int{kv, h}},
			Tensor{p + "self_attn.v_proj.weight", []int{kv, h}},
		)
		if c.QKVBias() {
			ts = append(ts, Tensor{p + "self_attn.q_proj.bias", []int{q}}, Tensor{p + "self_attn.k_proj.bias", []int{kv}},
				Tensor{p + "self_attn.v_proj.bias", []int{kv}})
		}
		if c.QKNorm() {
			ts = append(ts, Tensor{p + "self_attn.q_norm.weight", []int{c.HeadDim}}, Tensor{p + "self_attn.k_norm.weight", []int{c.HeadDim}})
		}
		ts = append(ts,
			Tensor{p + "self_attn.o_proj.weight", []int{h, q}},
			Tensor{p + "post_attention_layernorm.weight", []int{h}},
			Tensor{p + "mlp.gate_proj.weight", []int{f, h}},
			Tensor{p + "mlp.up_proj.weight", []int{f, h}},
			Tensor{p + "mlp.down_proj.weight", []int{h, f}},
		)
	}
	ts = append(ts, Tensor{"model.norm.weight", []int{h}})
	if !c.TieWordEmbeddings {
		ts = append(ts, Tensor{"lm_head.weight", []int{c.VocabSize, h}})
	}
	return ts
}

// TensorNames lists the tensor names of Tensors.
func TensorNames(c Config) []string {
	ts := Tensors(c)
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return names
}

// Lookup returns the named tensor of c, a checkpoint tensor or a graph tensor.
func Lookup(c Config, name string) (Tensor, error) {
	for _, t := range append(Tensors(c), GraphTensors(c)...) {
		if t.Name == name {
			return t, nil
		}
	}
	return Tensor{}, fmt.Errorf("tinyllama: no tensor %q in this config", name)
}

// kind is how a tensor maps a draw m in [-1024, 1023] to its value.
type kind int

const (
	kindEmbed kind = iota
	kindProj
	kindNorm
	kindFinalNorm
	kindBias
)

func classify(t Tensor) (kind, int) {
	switch {
	case t.Name == "model.embed_tokens.weight":
		return kindEmbed, 0
	case t.Name == "model.norm.weight":
		return kindFinalNorm, 0
	case strings.HasSuffix(t.Name, "norm.weight"): // the layer norms and Qwen3's q_norm, k_norm
		return kindNorm, 0
	case strings.HasSuffix(t.Name, ".bias"):
		return kindBias, 0
	}
	// Projections (and an untied lm_head): m × 2^-(9+s), 4^s ≥ in_features.
	in := t.Shape[len(t.Shape)-1]
	s := 0
	for p := 1; p < in; p *= 4 {
		s++
	}
	return kindProj, 9 + s
}

// value is the SPEC's element value for draw m.
func value(k kind, shift int, m int) float64 {
	switch k {
	case kindEmbed:
		return math.Ldexp(float64(m), -14)
	case kindProj:
		return math.Ldexp(float64(m), -shift)
	case kindNorm:
		return 1 + math.Ldexp(float64(floorDiv4(m)), -10)
	case kindBias:
		return math.Ldexp(float64(m), -12)
	default:
		return 16 * (1 + math.Ldexp(float64(floorDiv4(m)), -10))
	}
}

func floorDiv4(m int) int { return m >> 2 } // arithmetic shift floors negatives

const (
	fnvOffset = 0xcbf29ce484222325
	fnvPrime  = 0x100000001b3
	gamma     = 0x9E3779B97F4A7C15
)

func fnv1a64(s string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Draws is the SPEC's SplitMix64 token stream started at state = seed:
// it returns n tokens, each draw mod 128000.
func Draws(seed uint64, n int) []int {
	out := make([]int, n)
	s := seed
	for i := range out {
		s += gamma
		out[i] = int(mix(s) % 128000)
	}
	return out
}

// stream returns the SplitMix64 state just before element start of t and
// the table mapping a draw m (index m + 1024) to its value. SplitMix64's
// state after i draws is seed + i·gamma, so any range can be generated
// without walking the stream from the beginning.
func stream(c Config, name string, start, n int) (uint64, *[2048]float64, error) {
	t, err := Lookup(c, name)
	if err != nil {
		return 0, nil, err
	}
	if start < 0 || n < 0 || start+n > t.Len() {
		return 0, nil, fmt.Errorf("tinyllama: range [%d, %d) outside %s (%d elements)", start, start+n, t.Name, t.Len())
	}
	if fused, at, ok := fusedPart(c, name); ok { // a split part is a row range of the fused stream
		if t, err = Lookup(c, fused); err != nil {
			return 0, nil, err
		}
		start += at
	}
	k, shift := classify(t)
	var table [2048]float64
	for i := range table {
		table[i] = value(k, shift, i-1024)
	}
	return (c.InitSeed ^ fnv1a64(t.Name)) + uint64(start)*gamma, &table, nil
}

// Fill writes elements [start, start+len(dst)) (row-major) of the named
// tensor as float16 bits. Use it to stream large tensors in pieces.
func Fill(c Config, name string, start int, dst []uint16) error {
	return fill(c, name, start, dst, func(v float64) uint16 { return half.FromFloat32(float32(v)) })
}

// FillFloat32 is Fill with float32 values (identical numbers: every value is
// exact in float16 and float32).
func FillFloat32(c Config, name string, start int, dst []float32) error {
	return fill(c, name, start, dst, func(v float64) float32 { return float32(v) })
}

// fill is Fill with the values converted by conv.
func fill[T any](c Config, name string, start int, dst []T, conv func(float64) T) error {
	state, values, err := stream(c, name, start, len(dst))
	if err != nil {
		return err
	}
	var table [2048]T
	for i, v := range values {
		table[i] = conv(v)
	}
	for i := range dst {
		state += gamma
		dst[i] = table[mix(state)>>53] // the draw's top 11 bits are m + 1024
	}
	return nil
}

// Generate returns the whole named tensor as float16 bits. Do not use it for
// the 1B model's embedding (262M values); use Fill.
func Generate(c Config, name string) ([]uint16, error) {
	t, err := Lookup(c, name)
	if err != nil {
		return nil, err
	}
	out := make([]uint16, t.Len())
	return out, Fill(c, name, 0, out)
}

// InvFreq returns the head_dim/2 RoPE inverse frequencies of c.Rope() for a sequence within
// the original context (LongRoPE's short factors, as Hugging Face's until a sequence passes
// original_max_position_embeddings).
func InvFreq(c Config) []float64 {
	s := c.Rope()
	ctx := c.MaxPositionEmbeddings
	if s.Kind() == rope.TypeLongRoPE {
		ctx = s.OriginalMaxPositions
	}
	return s.InvFreq(c.HeadDim, c.RopeTheta, ctx)
}
