// Package tinyllama builds the deterministic Llama-3.2-architecture models of
// testdata/tinyllama/SPEC.md: configs, tensor names and shapes in Hugging Face
// order, bit-exact float16 weights generated from a seed, and the Llama-3
// scaled RoPE frequencies.
package tinyllama

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/hexserve/hexserve/internal/rope"
)

// Config is a Hugging Face Llama `config.json` plus the SPEC's `init_seed`.
type Config struct {
	Architectures         []string      `json:"architectures,omitempty"`
	ModelType             string        `json:"model_type,omitempty"`
	VocabSize             int           `json:"vocab_size"`
	RMSNormEps            float64       `json:"rms_norm_eps"`
	RopeTheta             float64       `json:"rope_theta"`
	RopeScaling           *rope.Scaling `json:"rope_scaling,omitempty"`
	MaxPositionEmbeddings int           `json:"max_position_embeddings"`
	// OriginalMaxPositionEmbeddings is Phi-3's pretraining context, beside rope_scaling: LongRoPE's
	// factor is max_position_embeddings over it (Rope).
	OriginalMaxPositionEmbeddings int      `json:"original_max_position_embeddings,omitempty"`
	TieWordEmbeddings             bool     `json:"tie_word_embeddings"`
	BOSTokenID                    int      `json:"bos_token_id"`
	EOSTokenIDs                   TokenIDs `json:"eos_token_id"`
	HiddenAct                     string   `json:"hidden_act,omitempty"`
	HiddenSize                    int      `json:"hidden_size"`
	IntermediateSize              int      `json:"intermediate_size"`
	NumHiddenLayers               int      `json:"num_hidden_layers"`
	NumAttentionHeads             int      `json:"num_attention_heads"`
	NumKeyValueHeads              int      `json:"num_key_value_heads"`
	HeadDim                       int      `json:"head_dim"`
	// AttentionBias is Qwen2's q/k/v projection bias (o_proj has none).
	AttentionBias bool `json:"attention_bias,omitempty"`
	// Granite's multipliers (model_type granite): the embedding rows are multiplied by
	// EmbeddingMultiplier, the attention scores by AttentionMultiplier (in place of 1/√head_dim),
	// each residual branch by ResidualMultiplier, and the logits divided by LogitsScaling.
	EmbeddingMultiplier float64 `json:"embedding_multiplier,omitempty"`
	AttentionMultiplier float64 `json:"attention_multiplier,omitempty"`
	ResidualMultiplier  float64 `json:"residual_multiplier,omitempty"`
	LogitsScaling       float64 `json:"logits_scaling,omitempty"`
	InitSeed            uint64  `json:"init_seed"`
}

// Families lists the families of test models: the model_type values whose graphs these models
// cover, and falcon3 (model_type llama with Falcon3's shape and tokenizer).
var Families = []string{"llama", "qwen2", "qwen3", "phi3", "granite", "falcon3"}

// ModelType is family's config.json model_type (Falcon3 is a llama).
func ModelType(family string) string {
	if family == "falcon3" {
		return "llama"
	}
	return family
}

// Granite reports Granite's multipliers (GraniteForCausalLM).
func (c Config) Granite() bool { return c.ModelType == "granite" }

// QKNorm reports Qwen3's per-head RMSNorm of q and k (q_norm, k_norm over head_dim) before RoPE.
func (c Config) QKNorm() bool { return c.ModelType == "qwen3" }

// Fused reports Phi-3's fused checkpoint tensors: self_attn.qkv_proj (q, k, v rows in that order)
// and mlp.gate_up_proj (gate rows, then up rows), which the graphs see split.
func (c Config) Fused() bool { return c.ModelType == "phi3" }

// QKVBias reports biases on the q, k and v projections (Qwen2).
func (c Config) QKVBias() bool { return c.AttentionBias }

// TokenIDs is a token id list that also decodes from a single JSON number,
// as `eos_token_id` may be either in Hugging Face configs.
type TokenIDs []int

// UnmarshalJSON accepts a number or an array of numbers.
func (t *TokenIDs) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*t = nil
		return nil
	}
	if len(b) > 0 && b[0] != '[' {
		var one int
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*t = TokenIDs{one}
		return nil
	}
	var many []int
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*t = many
	return nil
}

// base is the shared part of the Llama 3.2 configs: the 128256-token vocabulary, RoPE θ 5e5 with
// Llama 3.2 scaling, tied embeddings.
func base() Config {
	return Config{
		Architectures:         []string{"LlamaForCausalLM"},
		ModelType:             "llama",
		VocabSize:             128256,
		RMSNormEps:            1e-5,
		RopeTheta:             500000,
		RopeScaling:           rope.Llama32(),
		MaxPositionEmbeddings: 131072,
		TieWordEmbeddings:     true,
		BOSTokenID:            128000,
		EOSTokenIDs:           TokenIDs{128001, 128008, 128009},
		HiddenAct:             "silu",
	}
}

// Tiny returns the public golden model's config (golden_tiny_public.json).
func Tiny() Config { return base().shape(64, 256, 2, 4, 2, 16, 20261129) }

// Llama32_1B returns the full Llama-3.2-1B shape with generated weights.
func Llama32_1B() Config { return base().shape(2048, 8192, 16, 32, 8, 64, 3_2_1) }

// Llama32_3B returns the full Llama-3.2-3B shape with generated weights.
func Llama32_3B() Config { return base().shape(3072, 8192, 28, 24, 8, 128, 3_2_3) }

// qwen is the shared part of the Qwen2 / Qwen3 configs: their 151936-token vocabulary, RoPE θ 1e6
// without scaling, RMSNorm ε 1e-6, tied embeddings, and <|endoftext|> as BOS.
func qwen(modelType, arch string) Config {
	return Config{
		Architectures:         []string{arch},
		ModelType:             modelType,
		VocabSize:             151936,
		RMSNormEps:            1e-6,
		RopeTheta:             1000000,
		MaxPositionEmbeddings: 40960,
		TieWordEmbeddings:     true,
		BOSTokenID:            151643,
		EOSTokenIDs:           TokenIDs{151645, 151643},
		HiddenAct:             "silu",
	}
}

// shape sets the sizes of c.
func (c Config) shape(hidden, ffn, layers, heads, kvHeads, headDim int, seed uint64) Config {
	c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = hidden, ffn, layers
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.InitSeed = heads, kvHeads, headDim, seed
	return c
}

// Qwen3 returns the Qwen3 config of the given sizes: q_norm/k_norm, head_dim on its own.
func Qwen3(hidden, ffn, layers, heads, kvHeads, headDim int, seed uint64) Config {
	return qwen("qwen3", "Qwen3ForCausalLM").shape(hidden, ffn, layers, heads, kvHeads, headDim, seed)
}

// Qwen2 returns the Qwen2 / Qwen2.5 config of the given sizes: q/k/v biases.
func Qwen2(hidden, ffn, layers, heads, kvHeads, headDim int, seed uint64) Config {
	c := qwen("qwen2", "Qwen2ForCausalLM").shape(hidden, ffn, layers, heads, kvHeads, headDim, seed)
	c.AttentionBias, c.MaxPositionEmbeddings = true, 32768
	return c
}

// phi35Short and phi35Long are Phi-3.5-mini-instruct's LongRoPE factors (config.json
// rope_scaling short_factor / long_factor, 48 = head_dim/2 values).
var (
	phi35Short = []float64{1, 1.0199999809265137, 1.0299999713897705, 1.0299999713897705, 1.0499999523162842,
		1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0699999332427979,
		1.0999999046325684, 1.1099998950958252, 1.1599998474121094, 1.1599998474121094, 1.1699998378753662,
		1.2899998426437378, 1.339999794960022, 1.679999828338623, 1.7899998426437378, 1.8199998140335083,
		1.8499997854232788, 1.8799997568130493, 1.9099997282028198, 1.9399996995925903, 1.9899996519088745,
		2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346,
		2.0199997425079346, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
		2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
		2.0799996852874756, 2.0899996757507324, 2.189999580383301, 2.2199995517730713, 2.5899994373321533,
		2.729999542236328, 2.749999523162842, 2.8399994373321533}
	phi35Long = []float64{1.0800000429153442, 1.1100000143051147, 1.1399999856948853, 1.340000033378601,
		1.5899999141693115, 1.600000023841858, 1.6200000047683716, 2.620000123977661, 3.2300000190734863,
		3.2300000190734863, 4.789999961853027, 7.400000095367432, 7.700000286102295, 9.09000015258789,
		12.199999809265137, 17.670000076293945, 24.46000099182129, 28.57000160217285, 30.420001983642578,
		30.840002059936523, 32.590003967285156, 32.93000411987305, 42.320003509521484, 44.96000289916992,
		50.340003967285156, 50.45000457763672, 57.55000305175781, 57.93000411987305, 58.21000289916992,
		60.1400032043457, 62.61000442504883, 62.62000274658203, 62.71000289916992, 63.1400032043457,
		63.1400032043457, 63.77000427246094, 63.93000411987305, 63.96000289916992, 63.970001220703125,
		64.02999877929688, 64.06999969482422, 64.08000183105469, 64.12000274658203, 64.41000366210938,
		64.4800033569336, 64.51000213623047, 64.52999877929688, 64.83999633789062}
)

// Phi3 returns the Phi-3 / Phi-3.5 config of the given sizes: fused qkv_proj and gate_up_proj,
// LongRoPE over an original 4096-position context stretched to 131072 (attention factor
// sqrt(1 + ln 32 / ln 4096)), Phi-3.5's 32064-token vocabulary, untied lm-head. Its LongRoPE
// factors are Phi-3.5's, every (48/(headDim/2))-th of them for a smaller head.
func Phi3(hidden, ffn, layers, heads, kvHeads, headDim int, seed uint64) Config {
	step := len(phi35Short) / (headDim / 2)
	short, long := make([]float64, headDim/2), make([]float64, headDim/2)
	for i := range short {
		short[i], long[i] = phi35Short[i*step], phi35Long[i*step]
	}
	c := Config{
		Architectures:                 []string{"Phi3ForCausalLM"},
		ModelType:                     "phi3",
		VocabSize:                     32064,
		RMSNormEps:                    1e-5,
		RopeTheta:                     10000,
		RopeScaling:                   &rope.Scaling{Type: rope.TypeLongRoPE, ShortFactor: short, LongFactor: long},
		MaxPositionEmbeddings:         131072,
		OriginalMaxPositionEmbeddings: 4096,
		BOSTokenID:                    1,
		EOSTokenIDs:                   TokenIDs{32007, 32001, 32000},
		HiddenAct:                     "silu",
	}
	return c.shape(hidden, ffn, layers, heads, kvHeads, headDim, seed)
}

// Rope is c's RoPE scaling with what Hugging Face derives filled in: LongRoPE's factor
// (max_position_embeddings / original_max_position_embeddings) and original context when the
// config keeps them beside rope_scaling, as Phi-3's does. Nil for plain RoPE.
func (c Config) Rope() *rope.Scaling {
	if c.RopeScaling == nil {
		return nil
	}
	s := *c.RopeScaling
	if s.Kind() == rope.TypeLongRoPE && c.OriginalMaxPositionEmbeddings > 0 {
		s.OriginalMaxPositions = c.OriginalMaxPositionEmbeddings
		s.Factor = float64(c.MaxPositionEmbeddings) / float64(c.OriginalMaxPositionEmbeddings)
	}
	return &s
}

// Granite returns the Granite 3.1 config of the given sizes with its multipliers: 49155-token
// vocabulary, RoPE θ 1e7 without scaling, ε 1e-5, tied embeddings, token 0 as BOS, EOS and padding.
func Granite(hidden, ffn, layers, heads, kvHeads, headDim int, emb, att, res, logits float64, seed uint64) Config {
	c := Config{Architectures: []string{"GraniteForCausalLM"}, ModelType: "granite", VocabSize: 49155, RMSNormEps: 1e-5,
		RopeTheta: 10_000_000, MaxPositionEmbeddings: 131072, TieWordEmbeddings: true, EOSTokenIDs: TokenIDs{0},
		HiddenAct: "silu", EmbeddingMultiplier: emb, AttentionMultiplier: att, ResidualMultiplier: res, LogitsScaling: logits}
	return c.shape(hidden, ffn, layers, heads, kvHeads, headDim, seed)
}

// Falcon3 returns the Falcon3 config of the given sizes: Llama's architecture (model_type llama)
// with head_dim of its own, RoPE θ 1000042 without scaling, ε 1e-6, a 131072-token vocabulary,
// an untied lm-head, and token 11 (<|endoftext|>) as BOS and EOS.
func Falcon3(hidden, ffn, layers, heads, kvHeads, headDim int, seed uint64) Config {
	c := Config{Architectures: []string{"LlamaForCausalLM"}, ModelType: "llama", VocabSize: 131072, RMSNormEps: 1e-6,
		RopeTheta: 1000042, MaxPositionEmbeddings: 32768, BOSTokenID: 11, EOSTokenIDs: TokenIDs{11}, HiddenAct: "silu"}
	return c.shape(hidden, ffn, layers, heads, kvHeads, headDim, seed)
}

// presets maps each family to its presets; "tiny" is the family's golden model.
var presets = map[string]map[string]func() Config{
	"llama": {"tiny": Tiny, "llama-3.2-1b": Llama32_1B, "llama-3.2-3b": Llama32_3B},
	// Qwen3 tiny: q width 4·32 = 128 ≠ hidden 64, so head_dim is its own.
	"qwen3": {"tiny": func() Config { return Qwen3(64, 192, 2, 4, 2, 32, 20261207) },
		"qwen3-0.6b": func() Config { return Qwen3(1024, 3072, 28, 16, 8, 128, 3_0_6) },
		"qwen3-1.7b": func() Config { return Qwen3(2048, 6144, 28, 16, 8, 128, 3_1_7) },
		"qwen3-4b":   func() Config { return Qwen3(2560, 9728, 36, 32, 8, 128, 3_4) }},
	"qwen2": {"tiny": func() Config { return Qwen2(64, 192, 2, 4, 2, 16, 20261208) },
		"qwen2.5-0.5b": func() Config { return Qwen2(896, 4864, 24, 14, 2, 64, 2_5_05) },
		"qwen2.5-1.5b": func() Config { return Qwen2(1536, 8960, 28, 12, 2, 128, 2_5_15) }},
	// Phi-3 tiny: no GQA (as Phi-3.5's 32 KV heads), head_dim 16 (8 LongRoPE factors).
	"phi3": {"tiny": func() Config { return Phi3(64, 192, 2, 4, 4, 16, 20261209) },
		"phi-3.5-mini": func() Config { return Phi3(3072, 8192, 32, 32, 32, 96, 3_5) }},
	// Granite tiny: attention multiplier 0.125 where 1/√16 would be 0.25; embedding multiplier 1.25
	// (the real 12 against these weights makes the embedding drown the layers: a one-token loop).
	"granite": {"tiny": func() Config { return Granite(64, 192, 2, 4, 2, 16, 1.25, 0.125, 0.22, 8, 20261209) },
		"granite-3.1-2b": func() Config { return Granite(2048, 8192, 40, 32, 8, 64, 12, 0.015625, 0.22, 8, 3_1_2) },
		"granite-3.1-8b": func() Config { return Granite(4096, 12800, 40, 32, 8, 128, 12, 0.0078125, 0.22, 16, 3_1_8) }},
	// Falcon3 tiny: head_dim 256 (q width 8·256 = 2048 ≠ hidden 64), 4 KV heads.
	"falcon3": {"tiny": func() Config { return Falcon3(64, 192, 2, 8, 4, 256, 20261210) },
		"falcon3-1b": func() Config { return Falcon3(2048, 8192, 18, 8, 4, 256, 3_0_1) },
		"falcon3-7b": func() Config { return Falcon3(3072, 23040, 28, 12, 4, 256, 3_0_7) }},
}

// Preset returns a named preset of the llama family.
func Preset(name string) (Config, error) { return FamilyPreset("llama", name) }

// FamilyPreset returns family's named preset ("tiny", or a real model's shape).
func FamilyPreset(family, name string) (Config, error) {
	ps, ok := presets[family]
	if !ok {
		return Config{}, fmt.Errorf("tinyllama: unknown family %q (want %s)", family, strings.Join(Families, ", "))
	}
	if p, ok := ps[name]; ok {
		return p(), nil
	}
	return Config{}, fmt.Errorf("tinyllama: unknown preset %q of family %s (want %s)", name, family, strings.Join(PresetNames(family), ", "))
}

// PresetNames lists family's presets, sorted.
func PresetNames(family string) []string {
	return slices.Sorted(maps.Keys(presets[family]))
}

// ParseConfig decodes a config.json. A document with a top-level `config`
// object (a golden file) is accepted too: its `config` is used. Missing
// head_dim defaults to hidden_size/num_attention_heads and missing
// num_key_value_heads to num_attention_heads.
func ParseConfig(data []byte) (Config, error) {
	var wrapper struct {
		Config json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(data, &wrapper); err != nil {
		return Config{}, fmt.Errorf("tinyllama: config: %w", err)
	}
	if len(wrapper.Config) > 0 && wrapper.Config[0] == '{' {
		data = wrapper.Config
	}
	c := Config{RMSNormEps: 1e-5, RopeTheta: 10000, TieWordEmbeddings: true}
	if err := json.Unmarshal(data, &c); err != nil {
		return Config{}, fmt.Errorf("tinyllama: config: %w", err)
	}
	if c.NumKeyValueHeads == 0 {
		c.NumKeyValueHeads = c.NumAttentionHeads
	}
	if c.HeadDim == 0 && c.NumAttentionHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumAttentionHeads
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// LoadConfig reads and parses a config.json (or golden) file.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("tinyllama: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("%w (file %s)", err, path)
	}
	return c, nil
}

// Validate reports the first inconsistency in c.
func (c Config) Validate() error {
	var errs []error
	pos := func(name string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %d", name, v))
		}
	}
	pos("hidden_size", c.HiddenSize)
	pos("intermediate_size", c.IntermediateSize)
	pos("num_hidden_layers", c.NumHiddenLayers)
	pos("num_attention_heads", c.NumAttentionHeads)
	pos("num_key_value_heads", c.NumKeyValueHeads)
	pos("head_dim", c.HeadDim)
	pos("vocab_size", c.VocabSize)
	if c.NumAttentionHeads > 0 && c.NumKeyValueHeads > 0 && c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		errs = append(errs, fmt.Errorf("num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NumAttentionHeads, c.NumKeyValueHeads))
	}
	if c.HeadDim%2 != 0 {
		errs = append(errs, fmt.Errorf("head_dim %d must be even", c.HeadDim))
	}
	if c.Granite() && !(c.EmbeddingMultiplier > 0 && c.AttentionMultiplier > 0 && c.ResidualMultiplier > 0 && c.LogitsScaling > 0) {
		errs = append(errs, fmt.Errorf("granite: embedding_multiplier %g, attention_multiplier %g, residual_multiplier %g and logits_scaling %g must be positive",
			c.EmbeddingMultiplier, c.AttentionMultiplier, c.ResidualMultiplier, c.LogitsScaling))
	}
	if c.RopeTheta <= 0 {
		errs = append(errs, fmt.Errorf("rope_theta must be positive, got %g", c.RopeTheta))
	}
	if err := c.Rope().Check(c.HeadDim); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tinyllama: config: %w", err)
	}
	return nil
}

// KVDim is num_key_value_heads × head_dim.
func (c Config) KVDim() int { return c.NumKeyValueHeads * c.HeadDim }

// QDim is num_attention_heads × head_dim.
func (c Config) QDim() int { return c.NumAttentionHeads * c.HeadDim }
