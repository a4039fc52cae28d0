package genie

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/hexserve/hexserve/internal/modelfile"
	"github.com/hexserve/hexserve/internal/rope"
)

// ConfigFile is the file that makes a folder a Genie bundle.
const ConfigFile = "genie_config.json"

// Bounds of a bundle's own settings, checked at load so that a bad value is
// refused naming its field instead of reaching QNN, an allocation or every
// request. They are far beyond what AI Hub exports (context 4096, 3–5
// parts, spill-fill 320 MB, rope-theta 500000, llama3 factor 8 or 32).
const (
	MaxParts        = 64      // dialog.engine.model.binary.ctx-bins entries
	MaxSpillFill    = 8 << 30 // dialog.engine.backend.QnnHtp.spill-fill-bufsize, bytes
	MaxMmapBudgetMB = 64 << 10
	MinRopeTheta    = 1.0 // rope-theta, genie_config.json's and config.json's
	MaxRopeTheta    = 1e9
	MaxRopeFactor   = 1024 // rope-scaling factor, low- and high-freq-factor
)

// BundleConfig is what hexserve reads from a Genie bundle's genie_config.json (and config.json),
// checked: every error names the file and the field.
type BundleConfig struct {
	Dir       string
	Size      int     // dialog.context.size: CL
	NVocab    int     // dialog.context.n-vocab
	BOS       int32   // dialog.context.bos-token (−1: none)
	EOS       []int32 // dialog.context.eos-token
	Sampler   Sampler // dialog.sampler: the model's defaults
	Tokenizer string  // dialog.tokenizer.path, absolute
	UseMmap   bool    // engine.backend.QnnHtp.use-mmap
	MmapMB    int     // mmap-budget (MB, 0 off)
	SpillFill int64   // spill-fill-bufsize (bytes, 0 off)
	KVDim     int     // kv-dim: checked against the binaries
	Bins      []string
	BinBytes  int64  // the parts' sizes together
	Outside   int64  // bytes of the files named outside the folder (model.allow_outside_paths)
	Rope      Rope   // from config.json when it has rope scaling (AI Hub's genie_config says factor 8), else genie_config
	RopeNote  string // set when genie_config and config.json disagree
	HTP       HTPConfig
	Family    string // config.json model_type
	// From config.json when it has them (0: not given), checked against the binaries at load.
	HFHeadDim, HFKVHeads, HFVocab int
	HFHidden, HFHeads             int
	HFTied                        *bool
	HFLayers, HFFFN               int // num_hidden_layers, intermediate_size: for the listings only
	// Generated is config.json's hexserve_generated_weights: hexserve mkmodel's note that the
	// weights are generated ("" for real ones).
	Generated    string
	MaxPositions int // config.json max_position_embeddings (0: not given)
	// Granite's multipliers from config.json (inside the graphs; shown by inspect).
	HFMultipliers *Multipliers
}

// Multipliers are Granite's config.json multipliers.
type Multipliers struct {
	Embedding float64 `json:"embedding_multiplier"`
	Attention float64 `json:"attention_multiplier"`
	Residual  float64 `json:"residual_multiplier"`
	Logits    float64 `json:"logits_scaling"`
}

// FamilySettings describes the family's graph settings from config.json, for inspect.
func (c *BundleConfig) FamilySettings() string {
	parts := []string{Families[cmp.Or(c.Family, "llama")]}
	if c.HFHeadDim > 0 && c.HFHeads > 0 {
		parts = append(parts, fmt.Sprintf("head_dim %d (q width %d, hidden %d)", c.HFHeadDim, c.HFHeadDim*c.HFHeads, c.HFHidden))
	}
	if c.HFKVHeads > 0 {
		parts = append(parts, fmt.Sprintf("%d KV heads", c.HFKVHeads))
	}
	if m := c.HFMultipliers; m != nil {
		parts = append(parts, fmt.Sprintf("multipliers: embedding %g, attention %g (in place of 1/√head_dim), residual %g, logits divided by %g",
			m.Embedding, m.Attention, m.Residual, m.Logits))
	}
	if c.HFTied != nil && *c.HFTied {
		parts = append(parts, "tied embeddings (the lm-head is the embedding table)")
	} else if c.HFTied != nil {
		parts = append(parts, "untied lm-head")
	}
	return strings.Join(parts, "; ")
}

// Sampler is dialog.sampler; a key the config leaves out is nil.
type Sampler struct {
	Seed *float64 `json:"seed,omitempty"`
	Temp *float64 `json:"temp,omitempty"`
	TopK *int     `json:"top-k,omitempty"`
	TopP *float64 `json:"top-p,omitempty"`
}

// Rope is the positional encoding: rope-dim frequencies, theta, and the scaling (nil: none).
type Rope struct {
	Dim     int
	Theta   float64
	Scaling *rope.Scaling
}

// equal reports whether r and o compute the same tables.
func (r Rope) equal(o Rope) bool {
	return r.Dim == o.Dim && r.Theta == o.Theta && reflect.DeepEqual(r.Scaling, o.Scaling)
}

// String describes r for inspect and the log.
func (r Rope) String() string {
	s := fmt.Sprintf("dim %d, theta %g", r.Dim, r.Theta)
	switch sc := r.Scaling; sc.Kind() {
	case rope.TypeLlama3:
		s += fmt.Sprintf(", llama3 factor %g (low %g, high %g, original %d)", sc.Factor, sc.LowFreqFactor, sc.HighFreqFactor, sc.OriginalMaxPositions)
	case rope.TypeLongRoPE:
		s += fmt.Sprintf(", longrope factor %g over original %d (attention factor %.6g, %d short/long factors)",
			sc.Factor, sc.OriginalMaxPositions, sc.Attention(), len(sc.ShortFactor))
	}
	return s
}

// HTPConfig is the part of htp_backend_ext_config.json hexserve maps onto its QNN calls.
type HTPConfig struct {
	PerfProfile   string // devices[0].cores[0].perf_profile
	RPCLatencyUS  int    // rpc_control_latency
	WeightSharing bool   // context.weight_sharing_enabled
	MemType       string // memory.mem_type
	SocModel      int
	DSPArch       string
}

type rawGenie struct {
	Dialog *rawDialog `json:"dialog"`
}

type rawDialog struct {
	Version *int    `json:"version"`
	Type    *string `json:"type"`
	Context *struct {
		Version *int            `json:"version"`
		Size    *int            `json:"size"`
		NVocab  *int            `json:"n-vocab"`
		BOS     *int            `json:"bos-token"`
		EOS     json.RawMessage `json:"eos-token"`
		EOT     *int            `json:"eot-token"` // AI Hub's Qwen configs: a second end token
	} `json:"context"`
	Sampler *struct {
		Version *int `json:"version"`
		Sampler
	} `json:"sampler"`
	Tokenizer *struct {
		Version *int    `json:"version"`
		Path    *string `json:"path"`
	} `json:"tokenizer"`
	Engine *struct {
		Version  *int `json:"version"`
		NThreads int  `json:"n-threads"`
		Backend  *struct {
			Version *int    `json:"version"`
			Type    *string `json:"type"`
			QnnHtp  *struct {
				Version        *int    `json:"version"`
				UseMmap        *bool   `json:"use-mmap"`
				SpillFill      int64   `json:"spill-fill-bufsize"`
				MmapBudget     int     `json:"mmap-budget"`
				Poll           bool    `json:"poll"`
				CPUMask        string  `json:"cpu-mask"`
				KVDim          *int    `json:"kv-dim"`
				AllowAsyncInit bool    `json:"allow-async-init"`
				PosIDDim       int     `json:"pos-id-dim"`
				RopeTheta      float64 `json:"rope-theta"`
			} `json:"QnnHtp"`
			Extensions string `json:"extensions"`
		} `json:"backend"`
		Model *struct {
			Version *int    `json:"version"`
			Type    *string `json:"type"`
			Binary  *struct {
				Version *int     `json:"version"`
				CtxBins []string `json:"ctx-bins"`
			} `json:"binary"`
			PosEnc *struct {
				Type    string        `json:"type"`
				RopeDim int           `json:"rope-dim"`
				Theta   float64       `json:"rope-theta"`
				Scaling *rope.Scaling `json:"rope-scaling"`
			} `json:"positional-encoding"`
		} `json:"model"`
	} `json:"engine"`
}

// dialogTypes names the dialog types Genie has and hexserve does not run.
var dialogTypes = map[string]string{
	"ssd":         "self-speculative decoding",
	"spd":         "speculative decoding with a draft model",
	"lade":        "lookahead decoding",
	"multistream": "multistream",
	"kv-share":    "KV sharing between two engines",
	"eaglet":      "EAGLE speculative decoding",
}

// LoadConfig reads and checks f's genie_config.json, its tokenizer, extensions and the
// checkpoint's config.json (family, rope scaling); the files it names follow f's path rule.
func LoadConfig(f modelfile.Folder) (*BundleConfig, error) {
	path := filepath.Join(f.Dir, ConfigFile)
	var raw rawGenie
	if err := modelfile.ReadJSON(path, &raw); err != nil {
		return nil, fmt.Errorf("genie: %w", err)
	}
	k := configCheck{path: path, f: f, c: &BundleConfig{Dir: f.Dir}}
	d := raw.Dialog
	for _, step := range []func(*rawDialog) error{k.dialog, k.context, k.sampler, k.tokenizer, k.backend, k.model, k.rope} {
		if err := step(d); err != nil {
			return nil, err
		}
	}
	if err := k.c.readHF(); err != nil {
		return nil, err
	}
	return k.c, nil
}

// configCheck reads a decoded genie_config.json into c, one section per method, in order:
// each may rely on the ones before.
type configCheck struct {
	path string
	f    modelfile.Folder
	c    *BundleConfig
}

// bad is an error naming the file and the field.
func (k configCheck) bad(field, format string, a ...any) error {
	return fmt.Errorf("genie: %s: %s: %s", k.path, field, fmt.Sprintf(format, a...))
}

// version checks a section's version: hexserve reads version 1.
func (k configCheck) version(field string, v *int) error {
	if v == nil {
		return k.bad(field+".version", "missing")
	}
	if *v != 1 {
		return k.bad(field+".version", "unknown config version %d (hexserve reads version 1)", *v)
	}
	return nil
}

// dialog: a version-1 "basic" dialog.
func (k configCheck) dialog(d *rawDialog) error {
	if d == nil {
		return k.bad("dialog", "missing")
	}
	if err := k.version("dialog", d.Version); err != nil {
		return err
	}
	if d.Type == nil {
		return k.bad("dialog.type", "missing")
	}
	if *d.Type != "basic" {
		if what, ok := dialogTypes[*d.Type]; ok {
			return k.bad("dialog.type", "%q (%s) is not supported: hexserve runs \"basic\" dialogs (it has its own speculative decoding)", *d.Type, what)
		}
		return k.bad("dialog.type", "%q is not supported: hexserve runs \"basic\" dialogs", *d.Type)
	}
	return nil
}

// context: CL, the vocabulary, BOS and EOS tokens, and the sampler's defaults.
func (k configCheck) context(d *rawDialog) error {
	c, ctx := k.c, d.Context
	switch {
	case ctx == nil:
		return k.bad("dialog.context", "missing")
	case k.version("dialog.context", ctx.Version) != nil:
		return k.version("dialog.context", ctx.Version)
	case ctx.Size == nil || *ctx.Size < 2:
		return k.bad("dialog.context.size", "missing or below 2")
	case *ctx.Size > modelfile.MaxContext:
		return k.bad("dialog.context.size", "%d is more than hexserve supports (%d)", *ctx.Size, modelfile.MaxContext)
	case ctx.NVocab == nil || *ctx.NVocab < 1:
		return k.bad("dialog.context.n-vocab", "missing or below 1")
	case *ctx.NVocab > modelfile.MaxVocab:
		return k.bad("dialog.context.n-vocab", "%d is more than hexserve supports (%d)", *ctx.NVocab, modelfile.MaxVocab)
	}
	c.Size, c.NVocab, c.BOS = *ctx.Size, *ctx.NVocab, -1
	if ctx.BOS != nil && *ctx.BOS >= 0 {
		if *ctx.BOS >= modelfile.MaxVocab {
			return k.bad("dialog.context.bos-token", "%d is past hexserve's largest vocabulary (%d)", *ctx.BOS, modelfile.MaxVocab)
		}
		c.BOS = int32(*ctx.BOS)
	}
	if len(ctx.EOS) > 0 {
		var one int
		var many []int
		if json.Unmarshal(ctx.EOS, &one) == nil {
			many = []int{one}
		} else if err := json.Unmarshal(ctx.EOS, &many); err != nil {
			return k.bad("dialog.context.eos-token", "want a token id or a list of them")
		}
		for _, t := range many {
			if t < 0 || t >= modelfile.MaxVocab {
				return k.bad("dialog.context.eos-token", "%d is outside [0, %d)", t, modelfile.MaxVocab)
			}
			c.EOS = append(c.EOS, int32(t))
		}
	}
	if t := ctx.EOT; t != nil && *t >= 0 {
		if *t >= modelfile.MaxVocab {
			return k.bad("dialog.context.eot-token", "%d is past hexserve's largest vocabulary (%d)", *t, modelfile.MaxVocab)
		}
		if !slices.Contains(c.EOS, int32(*t)) {
			c.EOS = append(c.EOS, int32(*t))
		}
	}
	return nil
}

// sampler: the model's sampling defaults, in the ranges a request's own values must keep
// (a bad default would make every request that leaves the field out fail).
func (k configCheck) sampler(d *rawDialog) error {
	s := d.Sampler
	if s == nil {
		return nil
	}
	if err := k.version("dialog.sampler", s.Version); err != nil {
		return err
	}
	in := func(v *float64, lo, hi float64) bool { return v == nil || *v >= lo && *v <= hi }
	switch {
	case !in(s.Temp, 0, 2):
		return k.bad("dialog.sampler.temp", "%g is outside 0…2", *s.Temp)
	case !in(s.TopP, 0, 1):
		return k.bad("dialog.sampler.top-p", "%g is outside 0…1", *s.TopP)
	case s.TopK != nil && (*s.TopK < 0 || *s.TopK > modelfile.MaxVocab):
		return k.bad("dialog.sampler.top-k", "%d is outside 0…%d", *s.TopK, modelfile.MaxVocab)
	case !in(s.Seed, 0, 1<<53):
		return k.bad("dialog.sampler.seed", "%g is outside 0…2^53", *s.Seed)
	}
	k.c.Sampler = s.Sampler
	return nil
}

// tokenizer: the tokenizer file, which must exist.
func (k configCheck) tokenizer(d *rawDialog) error {
	if d.Tokenizer == nil || d.Tokenizer.Path == nil || *d.Tokenizer.Path == "" {
		return k.bad("dialog.tokenizer.path", "missing")
	}
	var err error
	k.c.Tokenizer, _, err = k.file("dialog.tokenizer.path", *d.Tokenizer.Path, modelfile.MaxTokenizer)
	return err
}

// file resolves a path the config names by field (relative ones are in the bundle folder; one
// outside it only with model.allow_outside_paths, counted in Outside) and checks it is a
// regular file of at most max bytes (<= 0: any).
func (k configCheck) file(field, p string, max int64) (string, int64, error) {
	path, outside, err := k.f.Resolve(field, p)
	if err != nil {
		return "", 0, fmt.Errorf("genie: %s: %w", k.path, err)
	}
	size, err := modelfile.Stat(path, max)
	if err != nil {
		return "", 0, k.bad(field, "%v", err)
	}
	if outside {
		k.c.Outside += size
	}
	return path, size, nil
}

// backend: the engine on the HTP backend, its KV dimension, memory settings and extensions.
func (k configCheck) backend(d *rawDialog) error {
	e := d.Engine
	if e == nil {
		return k.bad("dialog.engine", "missing")
	}
	if err := k.version("dialog.engine", e.Version); err != nil {
		return err
	}
	be := e.Backend
	switch {
	case be == nil:
		return k.bad("dialog.engine.backend", "missing")
	case k.version("dialog.engine.backend", be.Version) != nil:
		return k.version("dialog.engine.backend", be.Version)
	case be.Type == nil || *be.Type != "QnnHtp":
		return k.bad("dialog.engine.backend.type", "want \"QnnHtp\" (hexserve runs the HTP backend)")
	case be.QnnHtp == nil:
		return k.bad("dialog.engine.backend.QnnHtp", "missing")
	case k.version("dialog.engine.backend.QnnHtp", be.QnnHtp.Version) != nil:
		return k.version("dialog.engine.backend.QnnHtp", be.QnnHtp.Version)
	case be.QnnHtp.KVDim == nil || *be.QnnHtp.KVDim < 2:
		return k.bad("dialog.engine.backend.QnnHtp.kv-dim", "missing or below 2")
	case *be.QnnHtp.KVDim > modelfile.MaxHeadDim:
		return k.bad("dialog.engine.backend.QnnHtp.kv-dim", "%d is more than hexserve supports (%d)", *be.QnnHtp.KVDim, modelfile.MaxHeadDim)
	case be.QnnHtp.MmapBudget < 0 || be.QnnHtp.MmapBudget > MaxMmapBudgetMB:
		return k.bad("dialog.engine.backend.QnnHtp.mmap-budget", "%d MB is outside 0…%d", be.QnnHtp.MmapBudget, MaxMmapBudgetMB)
	case be.QnnHtp.SpillFill < 0 || be.QnnHtp.SpillFill > MaxSpillFill:
		return k.bad("dialog.engine.backend.QnnHtp.spill-fill-bufsize", "%d bytes is outside 0…%d", be.QnnHtp.SpillFill, int64(MaxSpillFill))
	}
	c, q := k.c, be.QnnHtp
	c.UseMmap = q.UseMmap == nil || *q.UseMmap
	c.MmapMB, c.SpillFill, c.KVDim = q.MmapBudget, q.SpillFill, *q.KVDim
	if be.Extensions != "" {
		path, _, err := k.file("dialog.engine.backend.extensions", be.Extensions, modelfile.MaxConfig)
		if err != nil {
			return err
		}
		if c.HTP, err = loadHTP(path); err != nil {
			return err
		}
	}
	return nil
}

// model: the context binaries, which must exist.
func (k configCheck) model(d *rawDialog) error {
	m := d.Engine.Model
	switch {
	case m == nil:
		return k.bad("dialog.engine.model", "missing")
	case k.version("dialog.engine.model", m.Version) != nil:
		return k.version("dialog.engine.model", m.Version)
	case m.Type == nil || *m.Type != "binary":
		return k.bad("dialog.engine.model.type", "want \"binary\" (QNN context binaries)")
	case m.Binary == nil || len(m.Binary.CtxBins) == 0:
		return k.bad("dialog.engine.model.binary.ctx-bins", "missing or empty")
	case k.version("dialog.engine.model.binary", m.Binary.Version) != nil:
		return k.version("dialog.engine.model.binary", m.Binary.Version)
	}
	if n := len(m.Binary.CtxBins); n > MaxParts {
		return k.bad("dialog.engine.model.binary.ctx-bins", "%d entries, more than hexserve supports (%d)", n, MaxParts)
	}
	// Every entry is checked (inside the folder, a regular file, not named twice) before any
	// part is loaded; the sizes count against engine.model_memory.
	for i, bin := range m.Binary.CtxBins {
		field := fmt.Sprintf("dialog.engine.model.binary.ctx-bins[%d]", i)
		path, size, err := k.file(field, bin, 0)
		if err != nil {
			return err
		}
		if j := slices.Index(k.c.Bins, path); j >= 0 {
			return k.bad(field, "%q is ctx-bins[%d] too: each part is listed once", bin, j)
		}
		k.c.Bins = append(k.c.Bins, path)
		k.c.BinBytes += size
	}
	return nil
}

// rope: the positional encoding (RoPE, llama3 scaling), or QnnHtp's pos-id-dim and rope-theta
// without one.
func (k configCheck) rope(d *rawDialog) error {
	c, q := k.c, d.Engine.Backend.QnnHtp
	pe := d.Engine.Model.PosEnc
	if pe == nil {
		if q.RopeTheta <= 0 || q.PosIDDim <= 0 {
			return k.bad("dialog.engine.model.positional-encoding", "missing (and no QnnHtp pos-id-dim/rope-theta)")
		}
		c.Rope = Rope{Dim: q.PosIDDim, Theta: q.RopeTheta}
		return k.ropeRange("dialog.engine.backend.QnnHtp", c.Rope)
	}
	if pe.Type != "rope" {
		return k.bad("dialog.engine.model.positional-encoding.type", "%q: hexserve runs \"rope\"", pe.Type)
	}
	if pe.RopeDim < 1 || pe.Theta <= 0 {
		return k.bad("dialog.engine.model.positional-encoding", "rope-dim and rope-theta must be positive")
	}
	const field = "dialog.engine.model.positional-encoding"
	c.Rope = Rope{Dim: pe.RopeDim, Theta: pe.Theta}
	if s := pe.Scaling; s != nil {
		if s.Type != rope.TypeLlama3 && s.Type != rope.TypeLongRoPE {
			return k.bad("dialog.engine.model.positional-encoding.rope-scaling.rope-type", "%q: hexserve runs \"llama3\" or \"longrope\"", s.Type)
		}
		c.Rope.Scaling = s
		if err := c.Rope.Scaling.Check(2 * pe.RopeDim); err != nil {
			return k.bad("dialog.engine.model.positional-encoding.rope-scaling", "%v", err)
		}
	}
	return k.ropeRange(field, c.Rope)
}

// ropeRange refuses rope settings outside the documented bounds, naming the field under prefix.
func (k configCheck) ropeRange(prefix string, r Rope) error {
	if err := ropeBounds(r); err != nil {
		return k.bad(prefix+"."+err.field, "%s", err.msg)
	}
	return nil
}

// ropeError is a rope setting out of bounds: its genie_config.json field and why.
type ropeError struct{ field, msg string }

// ropeBounds checks the rope settings genie_config.json and config.json share.
func ropeBounds(r Rope) *ropeError {
	switch {
	case r.Dim > modelfile.MaxHeadDim:
		return &ropeError{"rope-dim", fmt.Sprintf("%d is more than hexserve supports (%d)", r.Dim, modelfile.MaxHeadDim)}
	case !(r.Theta >= MinRopeTheta && r.Theta <= MaxRopeTheta):
		return &ropeError{"rope-theta", fmt.Sprintf("%g is outside %g…%g", r.Theta, MinRopeTheta, MaxRopeTheta)}
	}
	s := r.Scaling
	if s == nil {
		return nil
	}
	switch {
	case s.Factor != 0 && !(s.Factor <= MaxRopeFactor && s.LowFreqFactor <= MaxRopeFactor && s.HighFreqFactor <= MaxRopeFactor):
		return &ropeError{"rope-scaling.factor", fmt.Sprintf("factor %g, low-freq-factor %g, high-freq-factor %g: each must be at most %d",
			s.Factor, s.LowFreqFactor, s.HighFreqFactor, MaxRopeFactor)}
	case s.OriginalMaxPositions > modelfile.MaxContext:
		return &ropeError{"rope-scaling.original-max-position-embeddings", fmt.Sprintf("%d is more than hexserve supports (%d)", s.OriginalMaxPositions, modelfile.MaxContext)}
	case slices.ContainsFunc(append(slices.Clone(s.ShortFactor), s.LongFactor...), func(f float64) bool { return f > MaxRopeFactor }):
		return &ropeError{"rope-scaling.short-factor", fmt.Sprintf("a short- or long-factor is more than %d", MaxRopeFactor)}
	}
	return nil
}

// Families are the config.json model_type values the Genie runner serves, with what their graphs
// compute differently from Llama (docs/genie.md).
var Families = map[string]string{
	"llama":   "Llama 3.x (llama3-scaled RoPE) or Falcon3 (model_type llama: head_dim 256, plain RoPE θ 1000042)",
	"granite": "Granite 3.1: embedding, attention and residual multipliers and logits scaling inside the graphs, RoPE θ 1e7",
	"qwen2":   "Qwen2 / Qwen2.5: q/k/v biases, RoPE θ 1e6",
	"qwen3":   "Qwen3: per-head q/k RMSNorm before RoPE, head_dim of its own, RoPE θ 1e6",
	"phi3":    "Phi-3 / Phi-3.5: fused qkv_proj and gate_up_proj (split in the graphs), no GQA, LongRoPE with its attention factor",
}

// refusedFamilies says why a known family is not served.
var refusedFamilies = map[string]string{
	"gemma3":      "Gemma 3's interleaved sliding-window attention is not supported",
	"gemma3_text": "Gemma 3's interleaved sliding-window attention is not supported",
	"gemma2":      "Gemma 2's sliding-window attention and logit soft-capping are not supported",
	"gemma":       "Gemma's GeGLU MLP and scaled embedding are not supported",
	"baichuan":    "Baichuan's ALiBi / W_pack attention is not supported",
	"jais":        "JAIS's ALiBi positions and SwiGLU-GPT2 blocks are not supported",
	"mistral":     "Mistral's SentencePiece v3 vocabulary and [INST] template (model_type mistral) are not served yet",
}

// FamilyOf maps config.json's model_type (or its architectures) to a served family, or says why
// not (a .pte's family comes from the config.json beside it). Every architecture must be the
// family's causal LM, exactly: "Llama4ForConditionalGeneration" is not Llama 3.x.
func FamilyOf(modelType string, archs []string) (string, error) {
	archFamily := func(a string) string {
		if f, ok := strings.CutSuffix(a, "ForCausalLM"); ok {
			return strings.ToLower(f)
		}
		return strings.ToLower(a)
	}
	family, from := strings.ToLower(modelType), "model_type"
	if family == "" && len(archs) > 0 {
		family, from = archFamily(archs[0]), fmt.Sprintf("architectures[0] %q", archs[0])
	}
	if family == "" {
		return "llama", nil
	}
	if why, ok := refusedFamilies[family]; ok {
		return "", errors.New(why)
	}
	if _, ok := Families[family]; !ok {
		return "", fmt.Errorf("%s: the bundle is a %q model; hexserve serves %s", from, family, strings.Join(slices.Sorted(maps.Keys(Families)), ", "))
	}
	for i, a := range archs {
		if archFamily(a) != family {
			return "", fmt.Errorf("architectures[%d]: %q is not a %s causal LM", i, a, family)
		}
	}
	return family, nil
}

// hfConfig is what readHF reads of config.json.
type hfConfig struct {
	ModelType     string        `json:"model_type"`
	Architectures []string      `json:"architectures"`
	RopeTheta     float64       `json:"rope_theta"`
	HeadDim       int           `json:"head_dim"`
	Hidden        int           `json:"hidden_size"`
	Heads         int           `json:"num_attention_heads"`
	KVHeads       int           `json:"num_key_value_heads"`
	Vocab         int           `json:"vocab_size"`
	Tied          *bool         `json:"tie_word_embeddings"`
	Layers        int           `json:"num_hidden_layers"`
	FFN           int           `json:"intermediate_size"`
	Generated     string        `json:"hexserve_generated_weights"`
	RopeScaling   *rope.Scaling `json:"rope_scaling"`
	MaxPositions  int           `json:"max_position_embeddings"`
	OrigPositions int           `json:"original_max_position_embeddings"` // Phi-3's, beside rope_scaling
	Multipliers
}

// scaling is config.json's RoPE scaling with what Hugging Face derives filled in (as
// tinyllama.Config.Rope): LongRoPE's factor and original context from the top-level
// original_max_position_embeddings.
func (hf hfConfig) scaling() *rope.Scaling {
	s := hf.RopeScaling
	if s.Kind() == rope.TypeLongRoPE && hf.OrigPositions > 0 {
		c := *s
		c.OriginalMaxPositions, c.Factor = hf.OrigPositions, float64(hf.MaxPositions)/float64(hf.OrigPositions)
		return &c
	}
	return s
}

// readHF reads config.json: the family (refused with its reason when not served), the sizes the
// binaries are checked against, and the checkpoint's RoPE, which wins over genie_config's (AI Hub
// writes factor 8 there; Llama 3.2's checkpoint says 32).
func (c *BundleConfig) readHF() error {
	path := filepath.Join(c.Dir, "config.json")
	var hf hfConfig
	err := modelfile.ReadJSON(path, &hf)
	if errors.Is(err, os.ErrNotExist) {
		return nil // the documented minimal bundle has none: genie_config's values stand
	}
	if err != nil {
		return fmt.Errorf("genie: %w", err)
	}
	if c.Family, err = FamilyOf(hf.ModelType, hf.Architectures); err != nil {
		return fmt.Errorf("genie: %s: model_type %q: %w", path, hf.ModelType, err)
	}
	c.HFHeadDim, c.HFKVHeads, c.HFVocab = hf.HeadDim, hf.KVHeads, hf.Vocab
	c.HFHidden, c.HFHeads, c.HFTied = hf.Hidden, hf.Heads, hf.Tied
	c.HFLayers, c.HFFFN, c.Generated = hf.Layers, hf.FFN, hf.Generated
	if hf.MaxPositions < 0 || (hf.MaxPositions > 0 && hf.MaxPositions < c.Size) {
		return fmt.Errorf("genie: %s: max_position_embeddings %d is below the context (%d, dialog.context.size)", path, hf.MaxPositions, c.Size)
	}
	c.MaxPositions = hf.MaxPositions
	if c.Family == "granite" {
		m := hf.Multipliers
		c.HFMultipliers = &m
	}
	if c.HFHeadDim == 0 && hf.Heads > 0 {
		c.HFHeadDim = hf.Hidden / hf.Heads
	}
	if hf.RopeTheta != 0 && !(hf.RopeTheta >= MinRopeTheta && hf.RopeTheta <= MaxRopeTheta) {
		return fmt.Errorf("genie: %s: rope_theta: %g is outside %g…%g", path, hf.RopeTheta, MinRopeTheta, MaxRopeTheta)
	}
	hfRope := c.Rope
	if hf.RopeTheta > 0 {
		hfRope.Theta = hf.RopeTheta
	}
	rs := hf.scaling()
	switch kind := rs.Kind(); {
	case kind == rope.TypeLlama3 || kind == rope.TypeLongRoPE:
		if err := rs.Check(2 * c.Rope.Dim); err != nil {
			return fmt.Errorf("genie: %s: rope_scaling: %v", path, err)
		}
		hfRope.Scaling = rs
	case kind != "":
		return fmt.Errorf("genie: %s: rope_scaling.rope_type %q is not supported (hexserve runs llama3, longrope or none)", path, rs.Type)
	case c.Family != "llama":
		hfRope.Scaling = nil
	default:
		return nil // a Llama config.json without llama3 scaling: genie_config's RoPE stands, as before
	}
	if e := ropeBounds(hfRope); e != nil {
		return fmt.Errorf("genie: %s: rope_scaling: %s", path, e.msg)
	}
	if !hfRope.equal(c.Rope) {
		c.RopeNote = fmt.Sprintf("config.json's rope scaling (%s) differs from genie_config.json's (%s): following config.json, as the checkpoint was calibrated with it",
			hfRope, c.Rope)
	}
	c.Rope = hfRope
	return nil
}

// loadHTP reads htp_backend_ext_config.json.
func loadHTP(path string) (HTPConfig, error) {
	var raw struct {
		Devices []struct {
			SocModel int    `json:"soc_model"`
			DSPArch  string `json:"dsp_arch"`
			Cores    []struct {
				PerfProfile string `json:"perf_profile"`
				RPCLatency  int    `json:"rpc_control_latency"`
			} `json:"cores"`
		} `json:"devices"`
		Memory struct {
			MemType string `json:"mem_type"`
		} `json:"memory"`
		Context struct {
			WeightSharing bool `json:"weight_sharing_enabled"`
		} `json:"context"`
	}
	if err := modelfile.ReadJSON(path, &raw); err != nil {
		return HTPConfig{}, fmt.Errorf("genie: dialog.engine.backend.extensions: %w", err)
	}
	h := HTPConfig{MemType: raw.Memory.MemType, WeightSharing: raw.Context.WeightSharing}
	if len(raw.Devices) > 0 {
		dv := raw.Devices[0]
		h.SocModel, h.DSPArch = dv.SocModel, dv.DSPArch
		if len(dv.Cores) > 0 {
			h.PerfProfile, h.RPCLatencyUS = dv.Cores[0].PerfProfile, dv.Cores[0].RPCLatency
		}
	}
	switch h.PerfProfile {
	case "", "burst", "sustained_high_performance", "high_performance", "balanced", "power_saver", "low_balanced",
		"high_power_saver", "low_power_saver", "extreme_power_saver", "default":
	default:
		return HTPConfig{}, fmt.Errorf("genie: %s: devices[0].cores[0].perf_profile: unknown profile %q", path, h.PerfProfile)
	}
	return h, nil
}

// IsBundle reports whether dir holds a genie_config.json (a FIFO or device named so too: the
// load says what it is).
func IsBundle(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, ConfigFile))
	return err == nil
}
