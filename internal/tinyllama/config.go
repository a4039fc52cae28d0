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
	"os"
)

// RopeScaling is the Hugging Face `rope_scaling` object (Llama-3 style).
type RopeScaling struct {
	RopeType                      string  `json:"rope_type"`
	Factor                        float64 `json:"factor"`
	LowFreqFactor                 float64 `json:"low_freq_factor"`
	HighFreqFactor                float64 `json:"high_freq_factor"`
	OriginalMaxPositionEmbeddings int     `json:"original_max_position_embeddings"`
}

// Config is a Hugging Face Llama `config.json` plus the SPEC's `init_seed`.
type Config struct {
	Architectures         []string     `json:"architectures,omitempty"`
	ModelType             string       `json:"model_type,omitempty"`
	VocabSize             int          `json:"vocab_size"`
	RMSNormEps            float64      `json:"rms_norm_eps"`
	RopeTheta             float64      `json:"rope_theta"`
	RopeScaling           *RopeScaling `json:"rope_scaling,omitempty"`
	MaxPositionEmbeddings int          `json:"max_position_embeddings"`
	TieWordEmbeddings     bool         `json:"tie_word_embeddings"`
	BOSTokenID            int          `json:"bos_token_id"`
	EOSTokenIDs           TokenIDs     `json:"eos_token_id"`
	HiddenAct             string       `json:"hidden_act,omitempty"`
	HiddenSize            int          `json:"hidden_size"`
	IntermediateSize      int          `json:"intermediate_size"`
	NumHiddenLayers       int          `json:"num_hidden_layers"`
	NumAttentionHeads     int          `json:"num_attention_heads"`
	NumKeyValueHeads      int          `json:"num_key_value_heads"`
	HeadDim               int          `json:"head_dim"`
	InitSeed              uint64       `json:"init_seed"`
}

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

func llama3Scaling() *RopeScaling {
	return &RopeScaling{RopeType: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}
}

func base() Config {
	return Config{
		Architectures:         []string{"LlamaForCausalLM"},
		ModelType:             "llama",
		VocabSize:             128256,
		RMSNormEps:            1e-5,
		RopeTheta:             500000,
		RopeScaling:           llama3Scaling(),
		MaxPositionEmbeddings: 131072,
		TieWordEmbeddings:     true,
		BOSTokenID:            128000,
		EOSTokenIDs:           TokenIDs{128001, 128008, 128009},
		HiddenAct:             "silu",
	}
}

// Tiny returns the public golden model's config (golden_tiny_public.json).
func Tiny() Config {
	c := base()
	c.HiddenSize = 64
	c.IntermediateSize = 256
	c.NumHiddenLayers = 2
	c.NumAttentionHeads = 4
	c.NumKeyValueHeads = 2
	c.HeadDim = 16
	c.InitSeed = 20261129
	return c
}

// Llama32_1B returns the full Llama-3.2-1B shape with generated weights.
func Llama32_1B() Config {
	c := base()
	c.HiddenSize = 2048
	c.IntermediateSize = 8192
	c.NumHiddenLayers = 16
	c.NumAttentionHeads = 32
	c.NumKeyValueHeads = 8
	c.HeadDim = 64
	c.InitSeed = 3_2_1
	return c
}

// Llama32_3B returns the full Llama-3.2-3B shape with generated weights.
func Llama32_3B() Config {
	c := base()
	c.HiddenSize = 3072
	c.IntermediateSize = 8192
	c.NumHiddenLayers = 28
	c.NumAttentionHeads = 24
	c.NumKeyValueHeads = 8
	c.HeadDim = 128
	c.InitSeed = 3_2_3
	return c
}

// Preset returns a named preset: "tiny", "llama-3.2-1b" or "llama-3.2-3b".
func Preset(name string) (Config, error) {
	switch name {
	case "tiny":
		return Tiny(), nil
	case "llama-3.2-1b":
		return Llama32_1B(), nil
	case "llama-3.2-3b":
		return Llama32_3B(), nil
	}
	return Config{}, fmt.Errorf("tinyllama: unknown preset %q (want tiny, llama-3.2-1b or llama-3.2-3b)", name)
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
	if c.RopeTheta <= 0 {
		errs = append(errs, fmt.Errorf("rope_theta must be positive, got %g", c.RopeTheta))
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
