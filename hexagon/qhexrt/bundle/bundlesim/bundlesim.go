// Package bundlesim writes QHexRT bundles (hexagon/qhexrt/bundle's layout) whose
// context binaries are hostsim's (hexagon/hostsim/simfile), for the
// deterministic tiny-Llama models of testdata/tinyllama/SPEC.md: the graphs
// of either contract, the f16 embedding table, the tokenizer files and the
// manifest. It is `hexserve mkmodel --format bundle`'s writer, as
// hexagon/pte/ptesim is the .pte one.
package bundlesim

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/qhexrt/bundle"
	"github.com/hexserve/hexserve/internal/rope"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// Options describe one bundle.
type Options struct {
	Config tinyllama.Config
	Source string // where Config came from ("preset tiny"), for the manifest
	Name   string // model.name
	Arch   string // model.dsp_arch ("v79")

	Contract     string // bundle.ContractQHexRT or bundle.ContractChunked
	Mask         string // bundle.MaskAdditive or bundle.MaskU16
	Ctx          int    // KV slots (max_ctx)
	PrefillChunk int    // rows per prefill call
	Weights      simfile.WeightFormat
	IO, KV       simfile.DType // graph I/O (x, cos, sin, y, logits) and KV cache types
	Shared       bool          // one model.bin with prefill and decode, instead of prefill.bin and decode.bin
	Tensors      bundle.Tensors

	// Tokenizer is the tokenizer.json to copy; the LICENSE and NOTICE
	// beside it are copied too.
	Tokenizer string
	// Note is recorded in the manifest under "mkmodel", with the generator,
	// the source, the seed and the FFN size.
	Note map[string]any
	// Progress, when set, shows a `\r`-updated line while a large bundle
	// is written.
	Progress io.Writer
}

// Fixed-point (16-bit I/O) ranges: real = (q + offset)·scale with offset
// −32768 covers ±range. x, cos and sin use ±1 (embedding rows and cos/sin
// lie within it), y and the lm-head input ±128 (the final norm's ×16
// weights put y at tens), logits ±128 (the 1B shape's logits reach ~100).
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

// plan is what Write derives from the options.
type plan struct {
	o                       Options
	hyper                   simfile.Hyper
	prefill, decode, lmhead simfile.Graph
}

func newPlan(o Options) (*plan, error) {
	var contract simfile.Contract
	switch o.Contract {
	case bundle.ContractQHexRT:
		contract = simfile.QHexRT
	case bundle.ContractChunked:
		contract = simfile.Chunked
	default:
		return nil, fmt.Errorf("bundlesim: contract %q: want qhexrt or chunked", o.Contract)
	}
	mask := simfile.MaskAdditive
	switch o.Mask {
	case bundle.MaskAdditive:
	case bundle.MaskU16:
		mask = simfile.MaskU16
	default:
		return nil, fmt.Errorf("bundlesim: mask %q: want additive or u16", o.Mask)
	}
	cfg := o.Config
	p := &plan{o: o, hyper: simfile.Hyper{Hidden: cfg.HiddenSize, Layers: cfg.NumHiddenLayers, Heads: cfg.NumAttentionHeads,
		KVHeads: cfg.NumKeyValueHeads, HeadDim: cfg.HeadDim, FFN: cfg.IntermediateSize, Vocab: cfg.VocabSize,
		Ctx: o.Ctx, RMSEps: float32(cfg.RMSNormEps), TiedLMHead: cfg.TieWordEmbeddings}}
	p.prefill, p.decode, p.lmhead = simfile.DefaultGraphs(p.hyper, contract, o.PrefillChunk, o.IO, o.KV, mask)
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
	nameTensors(&p.prefill, o.Tensors)
	nameTensors(&p.decode, o.Tensors)
	return p, nil
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

// manifest builds the bundle's manifest.
func (p *plan) manifest() *bundle.Manifest {
	o, cfg := p.o, p.o.Config
	contexts := map[string]bundle.Context{"prefill": {Bin: "prefill.bin"}, "decode": {Bin: "decode.bin"}, "lmhead": {Bin: "lmhead.bin"}}
	if o.Shared {
		contexts = map[string]bundle.Context{"shared": {Bin: "model.bin"}, "lmhead": {Bin: "lmhead.bin"}}
	}
	eos := 128009
	if len(cfg.EOSTokenIDs) > 0 && !slices.Contains(cfg.EOSTokenIDs, eos) {
		eos = cfg.EOSTokenIDs[0]
	}
	bos := cfg.BOSTokenID
	rs := rope.Scaling{Type: "default"}
	if s := cfg.RopeScaling; s != nil {
		rs = *s
	}
	nh, nkv, window, eps := cfg.NumAttentionHeads, cfg.NumKeyValueHeads, o.PrefillChunk, cfg.RMSNormEps
	contract, mask, tensors := o.Contract, o.Mask, o.Tensors
	note := map[string]any{"generator": "hexserve mkmodel", "source": o.Source, "init_seed": cfg.InitSeed,
		"intermediate_size": cfg.IntermediateSize, tinyllama.GeneratedKey: tinyllama.GeneratedNote(cfg)}
	for k, v := range o.Note {
		note[k] = v
	}
	info, _ := json.Marshal(note)
	return &bundle.Manifest{
		SchemaVersion: bundle.SchemaVersion,
		Model:         bundle.Model{Name: o.Name, Family: "llama", DSPArch: o.Arch},
		Params: bundle.Params{Hidden: cfg.HiddenSize, Vocab: cfg.VocabSize, NLayers: cfg.NumHiddenLayers, MaxCtx: o.Ctx,
			KVDim: cfg.KVDim(), HeadDim: cfg.HeadDim, RopeTheta: cfg.RopeTheta, EOSTokenID: bundle.IDs{eos},
			MaxPositions: cfg.MaxPositionEmbeddings},
		Artifacts: bundle.Artifacts{Contexts: contexts, Embed: "embed_f16.bin", Tokenizer: "tokenizer.json"},
		Plan:      bundle.Plan{Params: bundle.PlanParams{Prefill: "prefill", Decode: "decode", LMHead: "lmhead"}},
		Chat:      bundle.Chat{BOS: &bos},
		Hexserve: &bundle.Hexserve{Contract: &contract, NHeads: &nh, NKVHeads: &nkv, PrefillWindow: &window,
			RMSEps: &eps, RopeScaling: &rs, EOSTokenIDs: append([]int(nil), cfg.EOSTokenIDs...), Mask: &mask, Tensors: &tensors},
		Extra: map[string]json.RawMessage{"mkmodel": info},
	}
}

// Write writes the bundle into dir (the arch folder). The manifest is
// removed first and written last, so an interrupted run leaves no loadable
// half-bundle.
func Write(dir string, o Options) error {
	p, err := newPlan(o)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, bundle.ManifestName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	pr := newProgress(o.Progress, o.Config)
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
	if o.Shared {
		files = files[1:]
		files[0].name, files[0].graphs = "model.bin", []simfile.Graph{p.prefill, p.decode}
	}
	for _, f := range files {
		if err := p.writeContext(filepath.Join(dir, f.name), f.graphs, f.weights, pr); err != nil {
			return err
		}
	}
	if err := writeEmbed(filepath.Join(dir, "embed_f16.bin"), o.Config, pr); err != nil {
		return err
	}
	if err := CopyTokenizer(o.Tokenizer, dir); err != nil {
		return err
	}
	return bundle.Write(dir, p.manifest())
}

func (p *plan) writeContext(path string, graphs []simfile.Graph, weights []simfile.Weight, pr *progress) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	name := filepath.Base(path)
	err = simfile.WriteWith(f, p.hyper, graphs, weights, simfile.Options{
		Format: p.o.Weights,
		// Row blocks, not whole tensors: the 3B lm-head alone is 788 MB of float16.
		SourceRows: func(_ int, w simfile.Weight, row0 int, dst []uint16) error {
			return tinyllama.Fill(p.o.Config, w.Name, row0*w.Cols, dst)
		},
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

// CopyTokenizer copies tokenizer.json (from path) and the LICENSE and
// NOTICE beside it into dir: the tokenizer files of a bundle, or of a .pte
// model's folder.
func CopyTokenizer(path, dir string) error {
	src := filepath.Dir(path)
	for _, c := range [][2]string{{path, "tokenizer.json"}, {filepath.Join(src, "LICENSE"), "LICENSE"}, {filepath.Join(src, "NOTICE"), "NOTICE"}} {
		if err := copyFile(c[0], filepath.Join(dir, c[1])); err != nil {
			return err
		}
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
