// Package geniesim writes Qualcomm AI Hub Genie bundles for hostsim (hexserve mkmodel --format
// genie) from the deterministic test models of internal/tinyllama: AI Hub's file names
// (<name>_part_<k>_of_<N>.bin, each with the weight-shared graphs prompt_ar<A>_cl<C>_<k>_of_<N> and
// token_ar1_cl<C>_<k>_of_<N>, simfile.GeniePart), genie_config.json with every key of the published
// schema, htp_backend_ext_config.json, tokenizer.json, config.json, metadata.yaml and
// tool-versions.yaml (docs/genie.md).
package geniesim

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/internal/rope"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// Precisions: AI Hub's w4a16 (uint16 activations and logits, uint8 KV) and w4 (float16 I/O and
// KV), and f32 (float32 I/O and KV: golden logits).
var Precisions = map[string]struct{ Act, KV simfile.DType }{
	"w4a16": {simfile.UFixed16, simfile.UFixed8},
	"w4":    {simfile.F16, simfile.F16},
	"f32":   {simfile.F32, simfile.F32},
}

// Options describe a bundle.
type Options struct {
	Config    tinyllama.Config
	Name      string // file name stem: <Name>_part_<k>_of_<N>.bin
	Precision string // w4a16, w4 or f32
	Weights   simfile.WeightFormat
	Parts     int // ≥ 2 (part 1 is the embedding)
	PromptAR  int // rows of the prompt graphs
	Ctx       int // CL
	// Progress, if set, is called after each part with its size.
	Progress func(part, parts int, size int64)
}

// Hyper is the whole model's hostsim header. A LongRoPE model's says so (the host's cos/sin
// then reach ± the attention factor); the others' leave the RoPE fields zero, as the host
// computes RoPE.
func Hyper(c tinyllama.Config, ctx int) simfile.Hyper {
	h := simfile.Hyper{Hidden: c.HiddenSize, Layers: c.NumHiddenLayers, Heads: c.NumAttentionHeads,
		KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim, FFN: c.IntermediateSize, Vocab: c.VocabSize, Ctx: ctx,
		RMSEps: float32(c.RMSNormEps), TiedLMHead: c.TieWordEmbeddings, QKNorm: c.QKNorm(), QKVBias: c.QKVBias(),
		Scales: Scales(c)}
	if s := c.Rope(); s.Kind() == rope.TypeLongRoPE {
		h.Rope = simfile.Rope{Theta: float32(c.RopeTheta), Scaling: s}
	}
	return h
}

// Scales are the graphs' Granite multipliers from c (none for another family).
func Scales(c tinyllama.Config) simfile.Scales {
	if !c.Granite() {
		return simfile.Scales{}
	}
	return simfile.Scales{Embedding: float32(c.EmbeddingMultiplier), Attention: float32(c.AttentionMultiplier),
		Residual: float32(c.ResidualMultiplier), Logits: float32(c.LogitsScaling)}
}

// Spec derives the graphs' spec; fixed-point ranges are calibrated on a sample prompt
// (tinyllama.SampleRanges) with 25% headroom.
func Spec(o Options) (simfile.GenieSpec, error) {
	p, ok := Precisions[o.Precision]
	if !ok {
		return simfile.GenieSpec{}, fmt.Errorf("precision %q: want w4a16, w4 or f32", o.Precision)
	}
	c := o.Config
	switch {
	case o.Parts < 2 || o.Parts > c.NumHiddenLayers+2:
		return simfile.GenieSpec{}, fmt.Errorf("%d parts: want 2 to %d (the embedding, then the %d layers)", o.Parts, c.NumHiddenLayers+2, c.NumHiddenLayers)
	case o.PromptAR < 2 || o.PromptAR >= o.Ctx:
		return simfile.GenieSpec{}, fmt.Errorf("need 1 < prefill chunk (%d) < context (%d)", o.PromptAR, o.Ctx)
	case c.MaxPositionEmbeddings > 0 && o.Ctx > c.MaxPositionEmbeddings:
		return simfile.GenieSpec{}, fmt.Errorf("context %d exceeds the model's max_position_embeddings %d", o.Ctx, c.MaxPositionEmbeddings)
	}
	s := simfile.GenieSpec{PromptAR: o.PromptAR, Parts: o.Parts, Act: p.Act, KV: p.KV}
	if p.Act.Fixed() || p.KV.Fixed() {
		r, err := tinyllama.SampleRanges(c)
		if err != nil {
			return s, err
		}
		for l := range r.K {
			s.KRange, s.VRange = append(s.KRange, float32(1.25*r.K[l])), append(s.VRange, float32(1.25*r.V[l]))
		}
		s.LogitsRange, s.HiddenRange = float32(1.25*r.Logits), float32(1.25*r.Hidden)
	}
	return s, nil
}

// PartFile is AI Hub's file name of part k (1-based) of n.
func PartFile(name string, k, n int) string { return fmt.Sprintf("%s_part_%d_of_%d.bin", name, k, n) }

// partFile is c's part file name: AI Hub names Phi-3.5's parts weight_sharing_model_k_of_N.serialized.bin.
func partFile(c tinyllama.Config, name string, k, n int) string {
	if c.ModelType == "phi3" {
		return fmt.Sprintf("weight_sharing_model_%d_of_%d.serialized.bin", k, n)
	}
	return PartFile(name, k, n)
}

// Write writes the bundle's model files into dir: the parts, genie_config.json,
// htp_backend_ext_config.json, config.json, metadata.yaml and tool-versions.yaml (the caller
// copies tokenizer.json and its licence files).
func Write(dir string, o Options) error {
	s, err := Spec(o)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	h := Hyper(o.Config, o.Ctx)
	var bins []string
	for k := range o.Parts {
		name := partFile(o.Config, o.Name, k+1, o.Parts)
		bins = append(bins, name)
		path := filepath.Join(dir, name)
		f, err := os.Create(path + ".tmp")
		if err != nil {
			return err
		}
		err = simfile.WriteGeniePart(f, h, s, k, o.Weights, func(name string, start int, dst []uint16) error {
			return tinyllama.Fill(o.Config, name, start, dst)
		})
		var size int64
		if st, serr := f.Stat(); serr == nil {
			size = st.Size()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(path+".tmp", path)
		}
		if err != nil {
			os.Remove(path + ".tmp")
			return fmt.Errorf("%s: %w", path, err)
		}
		if o.Progress != nil {
			o.Progress(k+1, o.Parts, size)
		}
	}
	files := map[string][]byte{
		"genie_config.json":           jsonBytes(GenieConfig(o.Config, o.Ctx, bins)),
		"htp_backend_ext_config.json": jsonBytes(HTPConfig()),
		"config.json":                 jsonBytes(HFConfig(o.Config)),
		"metadata.yaml":               Metadata(h, s, o),
		"tool-versions.yaml":          []byte("tool_versions:\n  qairt: 2.42.0 (hostsim stand-in: hexserve mkmodel --format genie)\n"),
	}
	if mt := o.Config.ModelType; mt != "" && mt != "llama" { // Llama's bundles stay as they were
		files["generation_config.json"] = jsonBytes(GenerationConfig(o.Config))
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func jsonBytes(v any) []byte {
	b, _ := json.MarshalIndent(v, "", "    ")
	return append(b, '\n')
}

// kv is an ordered JSON object (the published files' key order).
type kv []struct {
	K string
	V any
}

func (o kv) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(e.K)
		v, err := json.Marshal(e.V)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func obj(pairs ...any) kv {
	o := make(kv, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		o = append(o, struct {
			K string
			V any
		}{pairs[i].(string), pairs[i+1]})
	}
	return o
}

// GenieConfig is genie_config.json with every key of AI Hub's published
// llama_v3_2_1b_instruct config (llm_helpers.py create_genie_config) and this model's values:
// kv-dim = head_dim, rope-dim = head_dim/2, the rope-scaling factor hard-coded to 8.0 as AI Hub
// writes it (config.json keeps the checkpoint's). A Qwen model's is in the form of AI Hub's
// qwen2_5_7b_instruct: RoPE as QnnHtp's pos-id-dim and rope-theta (no positional-encoding),
// bos-token <|im_start|>, eos-token <|im_end|> and eot-token <|endoftext|>. A Phi-3 model's is
// in the form of AI Hub's phi_3_5_mini_instruct: the eos-token list, LongRoPE in rope-scaling. A
// Falcon3 model's (model_type llama without rope scaling) is in the form of falcon_v3_7b_instruct:
// RoPE in QnnHtp, bos-token = eos-token; a Granite model's as ibm_granite_v3_1_8b_instruct: a
// pad-token.
func GenieConfig(c tinyllama.Config, ctx int, bins []string) any {
	eos := []int(c.EOSTokenIDs)
	if eos == nil {
		eos = []int{}
	}
	qwen := c.ModelType == "qwen2" || c.ModelType == "qwen3"
	context := obj("version", 1, "size", ctx, "n-vocab", c.VocabSize, "bos-token", c.BOSTokenID, "eos-token", eos)
	htp := obj("version", 1, "use-mmap", true, "spill-fill-bufsize", 0, "mmap-budget", 0, "poll", true,
		"cpu-mask", "0xe0", "kv-dim", c.HeadDim, "allow-async-init", false)
	model := obj("version", 1, "type", "binary", "binary", obj("version", 1, "ctx-bins", bins))
	if c.Granite() && len(eos) == 1 {
		context = obj("version", 1, "size", ctx, "n-vocab", c.VocabSize, "bos-token", c.BOSTokenID, "eos-token", eos[0], "pad-token", eos[0])
	}
	if falcon := cmp.Or(c.ModelType, "llama") == "llama" && c.RopeScaling == nil; falcon && len(eos) == 1 {
		context = obj("version", 1, "size", ctx, "n-vocab", c.VocabSize, "bos-token", c.BOSTokenID, "eos-token", eos[0])
		htp = obj("version", 1, "use-mmap", true, "spill-fill-bufsize", 0, "mmap-budget", 0, "poll", true,
			"cpu-mask", "0xe0", "kv-dim", c.HeadDim, "pos-id-dim", c.HeadDim/2, "allow-async-init", false, "rope-theta", int(c.RopeTheta))
	} else if qwen && len(eos) == 2 {
		context = obj("version", 1, "size", ctx, "n-vocab", c.VocabSize, "bos-token", 151644, "eos-token", eos[0], "eot-token", eos[1])
		htp = obj("version", 1, "use-mmap", true, "spill-fill-bufsize", 0, "mmap-budget", 0, "poll", false,
			"pos-id-dim", c.HeadDim/2, "cpu-mask", "0xe0", "kv-dim", c.HeadDim, "rope-theta", int(c.RopeTheta), "allow-async-init", false)
	} else {
		model = append(model, obj("positional-encoding", positionalEncoding(c))...)
	}
	return obj("dialog", obj(
		"version", 1,
		"type", "basic",
		"context", context,
		"sampler", obj("version", 1, "seed", 42, "temp", 0.8, "top-k", 40, "top-p", 0.95),
		"tokenizer", obj("version", 1, "path", "tokenizer.json"),
		"engine", obj("version", 1, "n-threads", 3,
			"backend", obj("version", 1, "type", "QnnHtp", "QnnHtp", htp, "extensions", "htp_backend_ext_config.json"),
			"model", model)))
}

// HTPConfig is htp_backend_ext_config.json for the Snapdragon 8 Elite (soc_model 69, v79).
func HTPConfig() any {
	return obj("devices", []any{obj("soc_model", 69, "dsp_arch", "v79",
		"cores", []any{obj("core_id", 0, "perf_profile", "burst", "rpc_control_latency", 100)})},
		"memory", obj("mem_type", "shared_buffer"),
		"context", obj("weight_sharing_enabled", true))
}

// HFConfig is the checkpoint's config.json (model_type llama, LlamaForCausalLM, its own rope
// scaling), with tinyllama.GeneratedKey saying the weights are generated.
func HFConfig(c tinyllama.Config) map[string]any {
	if c.ModelType == "" {
		c.ModelType = "llama"
	}
	if len(c.Architectures) == 0 {
		c.Architectures = []string{"LlamaForCausalLM"}
	}
	var m map[string]any
	b, _ := json.Marshal(c)
	json.Unmarshal(b, &m)
	m[tinyllama.GeneratedKey] = tinyllama.GeneratedNote(c)
	return m
}

// GenerationConfig is the checkpoint's generation_config.json: its BOS and end tokens.
func GenerationConfig(c tinyllama.Config) any {
	return obj("bos_token_id", c.BOSTokenID, "eos_token_id", []int(c.EOSTokenIDs), "do_sample", true)
}

// positionalEncoding is genie_config's positional-encoding block: rope-dim = head_dim/2, theta,
// and llama3 scaling (factor 8 as AI Hub writes it) or LongRoPE (Phi-3.5's factor, original
// context and long/short factors).
func positionalEncoding(c tinyllama.Config) kv {
	pe := obj("type", "rope", "rope-dim", c.HeadDim/2, "rope-theta", int(c.RopeTheta))
	switch rs := c.Rope(); rs.Kind() {
	case rope.TypeLlama3:
		pe = append(pe, obj("rope-scaling", obj("rope-type", rs.Type, "factor", 8.0, "low-freq-factor", rs.LowFreqFactor,
			"high-freq-factor", rs.HighFreqFactor, "original-max-position-embeddings", rs.OriginalMaxPositions))...)
	case rope.TypeLongRoPE:
		pe = append(pe, obj("rope-scaling", obj("rope-type", rs.Type, "factor", rs.Factor,
			"original-max-position-embeddings", rs.OriginalMaxPositions, "long-factor", rs.LongFactor, "short-factor", rs.ShortFactor))...)
	}
	return pe
}

// dtypeName is metadata.yaml's dtype of a QNN data type.
func dtypeName(d simfile.DType) string {
	switch d {
	case simfile.UFixed16:
		return "uint16"
	case simfile.UFixed8:
		return "uint8"
	case simfile.F16:
		return "float16"
	case simfile.Int32:
		return "int32"
	}
	return "float32"
}

// Metadata is metadata.yaml in AI Hub's LLMMetadata schema: per component (prompt_1_of_3 …
// token_3_of_3), every input's and output's shape, dtype and, for quantised tensors,
// quantization_parameters {scale, zero_point} (zero_point = −QNN offset).
func Metadata(h simfile.Hyper, s simfile.GenieSpec, o Options) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "model_name: %s\nprecision: %s\ncontext_length: %d\nprompt_sequence_length: %d\nnum_splits: %d\ncomponents:\n",
		o.Name, o.Precision, o.Ctx, o.PromptAR, o.Parts)
	for _, prompt := range []bool{true, false} {
		for k := range s.Parts {
			_, gs, err := simfile.GeniePart(h, s, k)
			if err != nil {
				continue
			}
			g := gs[1]
			kind := "token"
			if prompt {
				g, kind = gs[0], "prompt"
			}
			fmt.Fprintf(&b, "  %s_%d_of_%d:\n    graph_name: %s\n", kind, k+1, s.Parts, g.Name)
			for _, side := range []struct {
				name string
				ts   []simfile.Tensor
			}{{"inputs", g.Inputs}, {"outputs", g.Outputs}} {
				fmt.Fprintf(&b, "    %s:\n", side.name)
				for _, t := range side.ts {
					dims := make([]string, len(t.Dims))
					for i, d := range t.Dims {
						dims[i] = fmt.Sprint(d)
					}
					fmt.Fprintf(&b, "      %s:\n        shape: [%s]\n        dtype: %s\n", t.Name, strings.Join(dims, ", "), dtypeName(t.DType))
					if t.DType.Fixed() {
						fmt.Fprintf(&b, "        quantization_parameters:\n          scale: %v\n          zero_point: %d\n", t.Scale, -t.Offset)
					}
				}
			}
		}
	}
	return []byte(b.String())
}
