//go:build !nomkmodel

package main

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hexserve/hexserve/hexagon/bundle"
	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// runMkmodel implements `hexserve mkmodel`: it writes a bundle for a
// deterministic tiny Llama (testdata/tinyllama/SPEC.md) as hostsim context
// binaries, the f16 embedding table, the tokenizer and the manifest.
func runMkmodel(args []string) int {
	return mkmodel(args, os.Stdout, os.Stderr)
}

// mkmodelOptions are the parsed mkmodel flags.
type mkmodelOptions struct {
	config, preset, out, name, tokenizer, arch string
	weights, contract, io, kv, mask, layout    string
	format, logits, tensors                    string
	prefillChunk, ctx, shards                  int
}

// Flags that only one --format takes.
var (
	bundleOnly = []string{"contract", "io", "mask", "tensors", "layout", "arch"}
	pteOnly    = []string{"logits", "shards"}
)

func mkmodel(args []string, stdout, stderr io.Writer) int {
	var o mkmodelOptions
	fs := flag.NewFlagSet("mkmodel", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.config, "config", "", "Hugging Face config.json with init_seed (or a golden file: its \"config\" key is used)")
	fs.StringVar(&o.format, "format", "bundle", "output: bundle (QHexRT bundle, OUT/ARCH/) or pte (ExecuTorch static-llama OUT/NAME.pte)")
	fs.StringVar(&o.preset, "preset", "", "built-in model: tiny (the public golden model), llama-3.2-1b or llama-3.2-3b (full shapes)")
	fs.StringVar(&o.out, "out", "", "directory to write (required); a bundle goes to OUT/ARCH/, a .pte to OUT/NAME.pte")
	fs.StringVar(&o.name, "name", "", "model name: the manifest's model.name, or the .pte file name (default from the preset or config)")
	fs.StringVar(&o.weights, "weights", "int8", "weight storage: f16 or int8 (per-row, like W8A16 bundles)")
	fs.IntVar(&o.prefillChunk, "prefill-chunk", 128, "rows per prefill call (AR)")
	fs.IntVar(&o.ctx, "ctx", 0, "context length (KV slots, max_ctx; the .pte mask width) (default 512 for bundle, 2048 for pte)")
	fs.StringVar(&o.contract, "contract", "qhexrt", "bundle only: graph contract, qhexrt or chunked")
	fs.StringVar(&o.io, "io", "f16", "bundle only: graph I/O data type for x, cos, sin, y and logits, f32, f16 or u16 (16-bit fixed point)")
	fs.StringVar(&o.kv, "kv", "", "KV cache data type: bundle f32 or f16 (default f16); pte u8, u16 or f32 (default u8)")
	fs.StringVar(&o.logits, "logits", "u16", "pte only: logits data type, u16 (16-bit fixed point) or f32")
	fs.IntVar(&o.shards, "shards", 1, "pte only: contexts the layers are split over (as evenly as possible, earlier shards take the remainder)")
	fs.StringVar(&o.mask, "mask", "additive", "bundle only: attention mask encoding, additive or u16")
	fs.StringVar(&o.tensors, "tensors", "", "bundle only: graph tensor names, as KEY=NAME,... with the manifest's hexserve.tensors keys (x, cos, sin, cmask, y, past_k, past_v, new_k, new_v; {i} = layer); unset keys keep the defaults")
	fs.StringVar(&o.layout, "layout", "split", "bundle only: context binaries, split (prefill.bin, decode.bin, lmhead.bin) or shared (model.bin with prefill and decode, lmhead.bin)")
	fs.StringVar(&o.tokenizer, "tokenizer", "testdata/tokenizer/llama3.2/tokenizer.json", "tokenizer.json to copy (LICENSE and NOTICE are copied from its folder)")
	fs.StringVar(&o.arch, "arch", "v79", "bundle only: DSP architecture folder (hostsim emulates v79)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: hexserve mkmodel (--preset tiny|llama-3.2-1b|llama-3.2-3b | --config FILE) --out DIR [--format bundle|pte] [flags]")
		fmt.Fprintln(stderr, "Writes a model with deterministic generated weights (testdata/tinyllama/SPEC.md), runnable on hostsim:")
		fmt.Fprintln(stderr, "  --format bundle: DIR/ARCH/{manifest.json, context binaries, embed_f16.bin, tokenizer.json, LICENSE, NOTICE}")
		fmt.Fprintln(stderr, "  --format pte:    DIR/{NAME.pte, tokenizer.json, LICENSE, NOTICE}, an ExecuTorch static-llama export")
		fmt.Fprintln(stderr, "                   (prefill_forward with --prefill-chunk rows, kv_forward, --shards contexts)")
		fs.PrintDefaults()
	}
	rest, err := parseFlags(fs, args)
	if err != nil {
		return exitCode(err)
	}
	if len(rest) != 0 {
		fmt.Fprintf(stderr, "hexserve mkmodel: unexpected argument %q\n", rest[0])
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	wrong := pteOnly
	switch o.format {
	case "bundle":
		o.ctx, o.kv = cmp.Or(o.ctx, 512), cmp.Or(o.kv, "f16")
	case "pte":
		o.ctx, o.kv, wrong = cmp.Or(o.ctx, 2048), cmp.Or(o.kv, "u8"), bundleOnly
	default:
		fmt.Fprintf(stderr, "hexserve mkmodel: --format %q: want bundle or pte\n", o.format)
		return 2
	}
	for _, f := range wrong {
		if set[f] {
			fmt.Fprintf(stderr, "hexserve mkmodel: --%s does not apply to --format %s\n", f, o.format)
			return 2
		}
	}
	start := time.Now()
	write := writeBundle
	if o.format == "pte" {
		write = writePTE
	}
	dir, err := write(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "hexserve mkmodel:", err)
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

// ioTypes maps the --io and --kv values to QNN data types.
var ioTypes = map[string]simfile.DType{"f32": simfile.F32, "f16": simfile.F16, "u16": simfile.UFixed16}

// Fixed-point (--io u16) ranges: real = (q + offset)·scale with offset −32768
// covers ±range. x, cos and sin use ±1 (embedding rows and cos/sin lie
// within it), y and the lm-head input ±128 (the final norm's ×16 weights put
// y at tens), logits ±128 (the 1B shape's logits reach ~100).
const (
	rangeX      = 1
	rangeY      = 128
	rangeLogits = 128
)

func fixed16(t *simfile.Tensor, r float32) {
	if t.DType == simfile.UFixed16 {
		t.Scale, t.Offset = 2*r/65535, -32768
	}
}

// bundlePlan is everything writeBundle derives from the options.
type bundlePlan struct {
	cfg                     tinyllama.Config
	hyper                   simfile.Hyper
	prefill, decode, lmhead simfile.Graph
	weights                 simfile.WeightFormat
	tensors                 bundle.Tensors
	tokDir                  string
	manifest                *bundle.Manifest
}

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
		if cfg, err = tinyllama.Preset(o.preset); err != nil {
			return cfg, "", err
		}
		source = "preset " + o.preset
		if o.name == "" {
			o.name = map[string]string{"tiny": "tinyllama-public", "llama-3.2-1b": "tinyllama-llama-3.2-1b",
				"llama-3.2-3b": "tinyllama-llama-3.2-3b"}[o.preset]
		}
	default:
		return cfg, "", errors.New("one of --preset or --config is required")
	}
	if o.out == "" {
		return cfg, "", errors.New("--out is required")
	}
	return cfg, source, nil
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

// tokenizerDir checks that --tokenizer and the LICENSE and NOTICE beside it exist.
func tokenizerDir(o mkmodelOptions) (string, error) {
	dir := filepath.Dir(o.tokenizer)
	for _, f := range []string{o.tokenizer, filepath.Join(dir, "LICENSE"), filepath.Join(dir, "NOTICE")} {
		if _, err := os.Stat(f); err != nil {
			return "", fmt.Errorf("tokenizer files: %w (run from the repository root or pass --tokenizer)", err)
		}
	}
	return dir, nil
}

// copyTokenizer copies tokenizer.json, LICENSE and NOTICE into dir.
func copyTokenizer(o mkmodelOptions, tokDir, dir string, cfg tinyllama.Config, stderr io.Writer) error {
	for _, c := range [][2]string{{o.tokenizer, "tokenizer.json"}, {filepath.Join(tokDir, "LICENSE"), "LICENSE"}, {filepath.Join(tokDir, "NOTICE"), "NOTICE"}} {
		if err := copyFile(c[0], filepath.Join(dir, c[1])); err != nil {
			return err
		}
	}
	if n, err := tokenizerVocab(o.tokenizer); err == nil && n > cfg.VocabSize {
		fmt.Fprintf(stderr, "hexserve mkmodel: warning: the tokenizer has %d tokens but the model's vocab_size is %d\n", n, cfg.VocabSize)
	}
	return nil
}

func planBundle(o mkmodelOptions) (*bundlePlan, error) {
	var p bundlePlan
	var err error
	var source string
	if p.cfg, source, err = modelConfig(&o); err != nil {
		return nil, err
	}
	cfg := p.cfg
	if p.weights, err = weightFormat(o.weights); err != nil {
		return nil, err
	}
	iot, ok := ioTypes[o.io]
	if !ok {
		return nil, fmt.Errorf("--io %q: want f32, f16 or u16", o.io)
	}
	kvt, ok := ioTypes[o.kv]
	if !ok || kvt.Fixed() {
		return nil, fmt.Errorf("--kv %q: want f32 or f16", o.kv)
	}
	var contract simfile.Contract
	switch o.contract {
	case bundle.ContractQHexRT:
		contract = simfile.QHexRT
	case bundle.ContractChunked:
		contract = simfile.Chunked
	default:
		return nil, fmt.Errorf("--contract %q: want qhexrt or chunked", o.contract)
	}
	var mask simfile.MaskKind
	switch o.mask {
	case bundle.MaskAdditive:
		mask = simfile.MaskAdditive
	case bundle.MaskU16:
		mask = simfile.MaskU16
	default:
		return nil, fmt.Errorf("--mask %q: want additive or u16", o.mask)
	}
	if o.layout != "split" && o.layout != "shared" {
		return nil, fmt.Errorf("--layout %q: want split or shared", o.layout)
	}
	if p.tensors, err = parseTensorNames(o.tensors); err != nil {
		return nil, err
	}
	if o.ctx <= 0 || o.prefillChunk <= 0 || o.prefillChunk > o.ctx {
		return nil, fmt.Errorf("need 0 < --prefill-chunk (%d) <= --ctx (%d)", o.prefillChunk, o.ctx)
	}
	if cfg.MaxPositionEmbeddings > 0 && o.ctx > cfg.MaxPositionEmbeddings {
		return nil, fmt.Errorf("--ctx %d exceeds the model's max_position_embeddings %d", o.ctx, cfg.MaxPositionEmbeddings)
	}
	if o.arch == "" || o.arch[0] != 'v' {
		return nil, fmt.Errorf("--arch %q: want vNN, e.g. v79", o.arch)
	}
	if p.tokDir, err = tokenizerDir(o); err != nil {
		return nil, err
	}

	p.hyper = simfile.Hyper{Hidden: cfg.HiddenSize, Layers: cfg.NumHiddenLayers, Heads: cfg.NumAttentionHeads,
		KVHeads: cfg.NumKeyValueHeads, HeadDim: cfg.HeadDim, FFN: cfg.IntermediateSize, Vocab: cfg.VocabSize,
		Ctx: o.ctx, RMSEps: float32(cfg.RMSNormEps), TiedLMHead: cfg.TieWordEmbeddings}
	p.prefill, p.decode, p.lmhead = simfile.DefaultGraphs(p.hyper, contract, o.prefillChunk, iot, kvt, mask)
	ranges := map[simfile.Role]float32{simfile.RoleX: rangeX, simfile.RoleCos: 1, simfile.RoleSin: 1, simfile.RoleY: rangeY}
	for _, g := range []*simfile.Graph{&p.prefill, &p.decode} {
		for _, ts := range [][]simfile.Tensor{g.Inputs, g.Outputs} {
			for i := range ts {
				if r, ok := ranges[ts[i].Role]; ok {
					fixed16(&ts[i], r)
				}
			}
		}
	}
	fixed16(&p.lmhead.Inputs[0], rangeY) // the lm-head reads y
	fixed16(&p.lmhead.Outputs[0], rangeLogits)
	nameTensors(&p.prefill, p.tensors)
	nameTensors(&p.decode, p.tensors)

	p.manifest = manifestFor(o, cfg, source, p.tensors)
	return &p, nil
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

// nameTensors names g's tensors by role from t.
func nameTensors(g *simfile.Graph, t bundle.Tensors) {
	names := map[simfile.Role]string{simfile.RoleX: t.X, simfile.RoleCos: t.Cos, simfile.RoleSin: t.Sin,
		simfile.RoleCMask: t.CMask, simfile.RoleY: t.Y, simfile.RolePastK: t.PastK, simfile.RolePastV: t.PastV,
		simfile.RoleNewK: t.NewK, simfile.RoleNewV: t.NewV}
	for _, ts := range [][]simfile.Tensor{g.Inputs, g.Outputs} {
		for i := range ts {
			ts[i].Name = bundle.Layer(names[ts[i].Role], ts[i].Layer)
		}
	}
}

// manifestFor builds the manifest mkmodel writes.
func manifestFor(o mkmodelOptions, cfg tinyllama.Config, source string, tensors bundle.Tensors) *bundle.Manifest {
	contexts := map[string]bundle.Context{"prefill": {Bin: "prefill.bin"}, "decode": {Bin: "decode.bin"}, "lmhead": {Bin: "lmhead.bin"}}
	if o.layout == "shared" {
		contexts = map[string]bundle.Context{"shared": {Bin: "model.bin"}, "lmhead": {Bin: "lmhead.bin"}}
	}
	eos := 128009
	if len(cfg.EOSTokenIDs) > 0 && !contains(cfg.EOSTokenIDs, eos) {
		eos = cfg.EOSTokenIDs[0]
	}
	bos := cfg.BOSTokenID
	rs := bundle.RopeScaling{RopeType: "default"}
	if s := cfg.RopeScaling; s != nil {
		rs = bundle.RopeScaling{RopeType: s.RopeType, Factor: s.Factor, LowFreqFactor: s.LowFreqFactor,
			HighFreqFactor: s.HighFreqFactor, OriginalMaxPositionEmbeddings: s.OriginalMaxPositionEmbeddings}
	}
	nh, nkv, window, eps := cfg.NumAttentionHeads, cfg.NumKeyValueHeads, o.prefillChunk, cfg.RMSNormEps
	info, _ := json.Marshal(map[string]any{
		"generator": "hexserve mkmodel", "source": source, "init_seed": cfg.InitSeed, "intermediate_size": cfg.IntermediateSize,
		"weights": o.weights, "io": o.io, "kv": o.kv, "layout": o.layout,
	})
	return &bundle.Manifest{
		SchemaVersion: bundle.SchemaVersion,
		Model:         bundle.Model{Name: o.name, Family: "llama", DSPArch: o.arch},
		Params: bundle.Params{Hidden: cfg.HiddenSize, Vocab: cfg.VocabSize, NLayers: cfg.NumHiddenLayers, MaxCtx: o.ctx,
			KVDim: cfg.KVDim(), HeadDim: cfg.HeadDim, RopeTheta: cfg.RopeTheta, EOSTokenID: bundle.IDs{eos}},
		Artifacts: bundle.Artifacts{Contexts: contexts, Embed: "embed_f16.bin", Tokenizer: "tokenizer.json"},
		Plan:      bundle.Plan{Params: bundle.PlanParams{Prefill: "prefill", Decode: "decode", LMHead: "lmhead"}},
		Chat:      bundle.Chat{BOS: &bos},
		Hexserve: &bundle.Hexserve{Contract: &o.contract, NHeads: &nh, NKVHeads: &nkv, PrefillWindow: &window,
			RMSEps: &eps, RopeScaling: &rs, EOSTokenIDs: append([]int(nil), cfg.EOSTokenIDs...), Mask: &o.mask, Tensors: &tensors},
		Extra: map[string]json.RawMessage{"mkmodel": info},
	}
}

func contains(ids []int, id int) bool {
	for _, v := range ids {
		if v == id {
			return true
		}
	}
	return false
}

// writeBundle writes the bundle and returns its arch folder. The manifest is
// removed first and written last, so an interrupted run leaves no loadable
// half-bundle.
func writeBundle(o mkmodelOptions, stderr io.Writer) (string, error) {
	p, err := planBundle(o)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(o.out, o.arch)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.Remove(filepath.Join(dir, bundle.ManifestName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	pr := newProgress(stderr, p)
	defer pr.finish()

	body := simfile.WeightSpecs(p.hyper, true, false)
	head := simfile.WeightSpecs(p.hyper, false, true)
	files := []struct {
		name    string
		graphs  []simfile.Graph
		weights []simfile.Weight
	}{
		{"prefill.bin", []simfile.Graph{p.prefill}, body},
		{"decode.bin", []simfile.Graph{p.decode}, body},
		{"lmhead.bin", []simfile.Graph{p.lmhead}, head},
	}
	if o.layout == "shared" {
		files = files[1:]
		files[0].name, files[0].graphs = "model.bin", []simfile.Graph{p.prefill, p.decode}
	}
	for _, f := range files {
		if err := writeContext(filepath.Join(dir, f.name), p, f.graphs, f.weights, pr); err != nil {
			return "", err
		}
	}
	if err := writeEmbed(filepath.Join(dir, "embed_f16.bin"), p.cfg, pr); err != nil {
		return "", err
	}
	if err := copyTokenizer(o, p.tokDir, dir, p.cfg, stderr); err != nil {
		return "", err
	}
	if err := bundle.Write(dir, p.manifest); err != nil {
		return "", err
	}
	return dir, nil
}

func writeContext(path string, p *bundlePlan, graphs []simfile.Graph, weights []simfile.Weight, pr *progress) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	name := filepath.Base(path)
	err = simfile.WriteWith(f, p.hyper, graphs, weights, simfile.Options{
		Format: p.weights,
		Source: func(_ int, w simfile.Weight) ([]uint16, error) { return tinyllama.Generate(p.cfg, w.Name) },
		Progress: func(done, total int64) {
			pr.update(name, done, total)
		},
	})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// writeEmbed streams the f16 embedding table [vocab, hidden] to path.
func writeEmbed(path string, cfg tinyllama.Config, pr *progress) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	const chunk = 1 << 20
	total := cfg.VocabSize * cfg.HiddenSize
	vals := make([]uint16, chunk)
	buf := make([]byte, 2*chunk)
	for start := 0; start < total && err == nil; start += chunk {
		n := min(chunk, total-start)
		if err = tinyllama.Fill(cfg, "model.embed_tokens.weight", start, vals[:n]); err != nil {
			break
		}
		for i, v := range vals[:n] {
			binary.LittleEndian.PutUint16(buf[2*i:], v)
		}
		_, err = w.Write(buf[:2*n])
		pr.update("embed_f16.bin", 2*int64(start+n), 2*int64(total))
	}
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("%s: %w", dst, err)
	}
	return out.Close()
}

// tokenizerVocab returns 1 + the largest token id in a tokenizer.json.
func tokenizerVocab(path string) (int, error) {
	data, err := os.ReadFile(path)
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

// progress prints a `\r`-updated line on stderr while a large bundle is
// written: the current file's percentage and the megabytes written so far.
type progress struct {
	w        io.Writer
	enabled  bool
	finished int64 // bytes of completed files
	last     time.Time
	printed  bool
}

// progressMin is the estimated bundle size above which progress is shown.
const progressMin = 64 << 20

func newProgress(w io.Writer, p *bundlePlan) *progress {
	est := 2 * int64(p.cfg.VocabSize) * int64(p.cfg.HiddenSize) // embedding table
	for _, t := range tinyllama.Tensors(p.cfg) {
		est += int64(t.Len())
	}
	return &progress{w: w, enabled: est > progressMin}
}

func (p *progress) update(name string, done, total int64) {
	if !p.enabled || time.Since(p.last) < 200*time.Millisecond && done < total {
		return
	}
	p.last = time.Now()
	pct := 100.0
	if total > 0 {
		pct = 100 * float64(done) / float64(total)
	}
	fmt.Fprintf(p.w, "\rmkmodel: %-14s %5.1f%%  %8.1f MB written", name, pct, float64(p.finished+done)/1e6)
	p.printed = true
	if done >= total {
		p.finished += total
		p.last = time.Time{}
	}
}

func (p *progress) finish() {
	if p.printed {
		fmt.Fprintln(p.w)
	}
}
