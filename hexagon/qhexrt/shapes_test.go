package qhexrt

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/qhexrt/bundle"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// shapeCase is a model shape other than the public tiny one.
type shapeCase struct {
	name string
	cfg  tinyllama.Config
}

func shapeConfig(hidden, ffn, layers, heads, kvHeads, headDim, vocab int, tied bool, seed uint64) tinyllama.Config {
	c := tinyllama.Tiny()
	c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = hidden, ffn, layers
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim = heads, kvHeads, headDim
	c.VocabSize, c.TieWordEmbeddings, c.InitSeed = vocab, tied, seed
	return c
}

// otherShapes are the shapes checked end to end: GQA with more layers, a
// head_dim unrelated to hidden/heads, no GQA with an untied lm-head, and an
// odd FFN with a 5:1 GQA group. One has the tokenizer's full vocabulary.
var otherShapes = []shapeCase{
	{"h96-l3-q6-kv2-d16", shapeConfig(96, 256, 3, 6, 2, 16, 128256, true, 11)},
	{"h64-l2-q2-kv1-d48", shapeConfig(64, 160, 2, 2, 1, 48, 8192, true, 12)},
	{"h128-l1-q4-kv4-d32-untied", shapeConfig(128, 192, 1, 4, 4, 32, 8192, false, 13)},
	{"h80-l2-q5-kv1-d16-ffn171", shapeConfig(80, 171, 2, 5, 1, 16, 4096, true, 14)},
}

// shapeRef is the float64 reference for one shape: the top-20 logits at
// checked positions of a prompt, and a greedy continuation with its margins.
type shapeRef struct {
	prompt  []int32
	top     map[int][][2]float64 // pos → 20 × [id, logit]
	greedy  []int32
	margins []float64
}

const shapeCtx = 256

// shapeChecked are the prompt positions compared: the start, both sides of
// the 16-row window boundaries, and both sides of the 128-row one.
var shapeChecked = []int{0, 1, 15, 16, 17, 31, 32, 127, 128, 129, 139}

func newShapeRef(t testing.TB, c tinyllama.Config, promptLen, steps int, int8 bool) *shapeRef {
	t.Helper()
	m, err := tinyllama.NewModel(c)
	if err != nil {
		t.Fatal(err)
	}
	if int8 {
		m.QuantizeInt8()
	}
	ref := &shapeRef{top: map[int][][2]float64{}}
	ids := tinyllama.Draws(c.InitSeed, promptLen)
	prompt := make([]int, len(ids))
	for i, id := range ids {
		prompt[i] = id % c.VocabSize
		ref.prompt = append(ref.prompt, int32(prompt[i]))
	}
	want := map[int]bool{}
	for _, p := range shapeChecked {
		want[p] = true
	}
	s := m.NewSession()
	var h []float64
	for pos, tok := range prompt {
		if h, err = s.Append(tok); err != nil {
			t.Fatal(err)
		}
		if want[pos] {
			ref.top[pos] = top20(m.Logits(h))
		}
	}
	for range steps {
		l := m.Logits(h)
		tp := top20(l)
		ref.greedy = append(ref.greedy, int32(tp[0][0]))
		ref.margins = append(ref.margins, tp[0][1]-tp[1][1])
		if h, err = s.Append(int(tp[0][0])); err != nil {
			t.Fatal(err)
		}
	}
	return ref
}

// top20 returns the 20 largest logits, descending (the lower id first on ties).
func top20(l []float64) [][2]float64 {
	out := make([][2]float64, 0, 21)
	for id, v := range l {
		if len(out) == 20 && v <= out[19][1] {
			continue
		}
		i := len(out)
		for i > 0 && v > out[i-1][1] {
			i--
		}
		out = append(out, [2]float64{})
		copy(out[i+1:], out[i:])
		out[i] = [2]float64{float64(id), v}
		out = out[:min(len(out), 20)]
	}
	return out
}

// writeShapeBundle writes c as a bundle the way `hexserve mkmodel` does
// (f16 weights, the manifest's hexserve block with head counts, window, eps
// and RoPE scaling), with prefill and decode in model.bin and the lm-head and
// embedding shared by every variant of the shape in root.
func writeShapeBundle(t testing.TB, root string, c tinyllama.Config, contract simfile.Contract, window int, wf simfile.WeightFormat) string {
	t.Helper()
	h := simfile.Hyper{Hidden: c.HiddenSize, Layers: c.NumHiddenLayers, Heads: c.NumAttentionHeads,
		KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim, FFN: c.IntermediateSize, Vocab: c.VocabSize,
		Ctx: shapeCtx, RMSEps: float32(c.RMSNormEps), TiedLMHead: c.TieWordEmbeddings}
	pre, dec, lm := simfile.DefaultGraphs(h, contract, window, simfile.F32, simfile.F32, simfile.MaskAdditive)
	source := simfile.Options{Format: wf,
		Source: func(_ int, w simfile.Weight) ([]uint16, error) { return tinyllama.Generate(c, w.Name) }}
	write := func(path string, graphs []simfile.Graph, ws []simfile.Weight) {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := simfile.WriteWith(f, h, graphs, ws, source); err != nil {
			t.Fatal(err)
		}
	}
	lmPath, embedPath := filepath.Join(root, fmt.Sprintf("lmhead-w%d.bin", wf)), filepath.Join(root, "embed_f16.bin")
	if _, err := os.Stat(lmPath); err != nil {
		write(lmPath, []simfile.Graph{lm}, simfile.WeightSpecs(h, false, true))
	}
	if _, err := os.Stat(embedPath); err != nil {
		e, err := tinyllama.Generate(c, "model.embed_tokens.weight")
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(embedPath)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeU16(f, e); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	cname := ContractQHexRT
	if contract == simfile.Chunked {
		cname = ContractChunked
	}
	dir := filepath.Join(root, fmt.Sprintf("%s-%d-w%d", cname, window, wf), "v79")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(dir, "model.bin"), []simfile.Graph{pre, dec}, simfile.WeightSpecs(h, true, false))
	var links [3]string
	for i, target := range []string{lmPath, embedPath, filepath.Join("..", "..", "testdata", "tokenizer", "llama3.2", "tokenizer.json")} {
		var err error
		if links[i], err = linkInto(dir, target); err != nil {
			t.Fatal(err)
		}
	}
	s := c.RopeScaling
	rs := *s
	tensors := bundle.DefaultTensors()
	nh, nkv, eps, mask, bos := c.NumAttentionHeads, c.NumKeyValueHeads, c.RMSNormEps, string(graphio.MaskAdditive), c.BOSTokenID
	m := &bundle.Manifest{
		SchemaVersion: bundle.SchemaVersion,
		Model:         bundle.Model{Name: "shape", Family: "llama", DSPArch: "v79"},
		Params: bundle.Params{Hidden: c.HiddenSize, Vocab: c.VocabSize, NLayers: c.NumHiddenLayers, MaxCtx: shapeCtx,
			KVDim: c.KVDim(), HeadDim: c.HeadDim, RopeTheta: c.RopeTheta, EOSTokenID: bundle.IDs{128009}},
		Artifacts: bundle.Artifacts{Contexts: map[string]bundle.Context{"shared": {Bin: "model.bin"}, "lmhead": {Bin: links[0]}},
			Embed: links[1], Tokenizer: links[2]},
		Plan: bundle.Plan{Params: bundle.PlanParams{Prefill: "prefill", Decode: "decode", LMHead: "lmhead"}},
		Chat: bundle.Chat{BOS: &bos},
		Hexserve: &bundle.Hexserve{Contract: &cname, NHeads: &nh, NKVHeads: &nkv, PrefillWindow: &window,
			RMSEps: &eps, RopeScaling: &rs, Mask: &mask, Tensors: &tensors},
	}
	if err := bundle.Write(dir, m); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestOtherShapes builds models of other shapes than the public one and
// checks the runner (Go → purego → hostsim, f16 weights, f32 I/O and KV)
// against the float64 reference in both contracts with windows 128 and 16:
// top-20 logits at positions on both sides of the window boundaries, through
// prefill windows and through decode steps, and a greedy continuation
// through Eval.
func TestOtherShapes(t *testing.T) {
	qcfg := hostsimConfig(t)
	steps := 20
	if testing.Short() {
		steps = 8 // -short (make test's -race run, arm64 under qemu): the float64 reference is slow there
	}
	for _, sc := range otherShapes {
		t.Run(sc.name, func(t *testing.T) {
			ref := newShapeRef(t, sc.cfg, shapeChecked[len(shapeChecked)-1]+1, steps, false)
			root := t.TempDir()
			for _, contract := range []simfile.Contract{simfile.QHexRT, simfile.Chunked} {
				for _, window := range []int{128, 16} {
					dir := writeShapeBundle(t, root, sc.cfg, contract, window, simfile.WeightF16)
					name := fmt.Sprintf("%s-%d", map[simfile.Contract]string{simfile.QHexRT: "qhexrt", simfile.Chunked: "chunked"}[contract], window)
					t.Run(name, func(t *testing.T) { checkShape(t, qcfg, dir, ref, steps) })
				}
			}
		})
	}
}

// minGreedySteps is the fewest greedy steps checkShape must compare (fewer
// only if it was asked for fewer): a reference whose early margins are within
// the error bound would otherwise let the greedy check pass by comparing
// nothing.
const minGreedySteps = 8

// checkShape compares the bundle in dir with ref: top-20 logits at the
// checked positions through prefill windows and decode steps, then at least
// minGreedySteps greedy steps through Eval.
func checkShape(t *testing.T, qcfg qnn.Config, dir string, ref *shapeRef, steps int) {
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	r, err := Open(Config{Bundle: dir, QNN: qcfg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	}()
	var worst float64
	var errs [2]float64 // prefill windows, decode steps
	for k, prefill := range []bool{true, false} {
		seen := 0
		want := func(pos int) bool { _, ok := ref.top[pos]; return ok }
		err := evalRows(context.Background(), r, ref.prompt, prefill, want, func(pos int, l sample.Logits) {
			seen++
			top := ref.top[pos]
			for _, e := range top {
				errs[k] = max(errs[k], math.Abs(float64(l.At(int(e[0])))-e[1]))
			}
			if got := argmax(l); got != int32(top[0][0]) && top[0][1]-top[1][1] > 1e-3 {
				t.Errorf("prefill=%v pos %d: argmax %d, reference %d (margin %.3g)", prefill, pos, got, int32(top[0][0]), top[0][1]-top[1][1])
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if seen != len(ref.top) {
			t.Fatalf("prefill=%v: %d of %d checked positions evaluated", prefill, seen, len(ref.top))
		}
	}
	worst = max(errs[0], errs[1])
	t.Logf("worst top-20 logit error: prefill windows %.3g, decode steps %.3g", errs[0], errs[1])
	if worst > 1e-4 {
		t.Errorf("worst top-20 logit error %.3g above 1e-4", worst)
	}
	// Greedy through Eval (KV cache reused), compared up to the first step
	// whose reference margin is within 2·error (either order is then right).
	n := steps
	for i, m := range ref.margins {
		if m < 2*max(worst, 1e-6) {
			n = i
			t.Logf("greedy compared for %d steps: step %d has margin %.3g", n, i, m)
			break
		}
	}
	if want := min(minGreedySteps, steps); n < want {
		t.Errorf("greedy compared for only %d steps (want at least %d): the reference margin at step %d is within 2x the logit error %.3g; choose a prompt or shape with clearer margins",
			n, want, n, worst)
	}
	seq := append([]int32(nil), ref.prompt...)
	valid := 0
	var got []int32
	for range n {
		l, _, err := evalOn(r).Eval(context.Background(), seq, valid)
		if err != nil {
			t.Fatal(err)
		}
		id := argmax(l)
		got = append(got, id)
		valid = len(seq)
		seq = append(seq, id)
	}
	if !slices.Equal(got, ref.greedy[:n]) {
		t.Errorf("greedy = %v\nwant %v", got, ref.greedy[:n])
	}
	t.Logf("greedy: %d of %d steps compared, all equal", n, len(ref.greedy))
}

// TestMkmodelBundle checks a bundle written by `hexserve mkmodel --config
// FILE --weights f16 --io f32 --kv f32` against the reference for FILE:
// set HEXSERVE_TEST_BUNDLE to the bundle (or arch folder) and
// HEXSERVE_TEST_CONFIG to the config.json it was made from (and
// HEXSERVE_TEST_INT8=1 for a --weights int8 bundle).
func TestMkmodelBundle(t *testing.T) {
	dir, cfgPath := os.Getenv("HEXSERVE_TEST_BUNDLE"), os.Getenv("HEXSERVE_TEST_CONFIG")
	if dir == "" || cfgPath == "" {
		t.Skip("set HEXSERVE_TEST_BUNDLE and HEXSERVE_TEST_CONFIG to check a mkmodel bundle")
	}
	qcfg := hostsimConfig(t)
	c, err := tinyllama.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	ref := newShapeRef(t, c, shapeChecked[len(shapeChecked)-1]+1, 20, os.Getenv("HEXSERVE_TEST_INT8") != "")
	checkShape(t, qcfg, dir, ref, 20)
}

// TestOtherShapesInt8 checks int8-weight bundles (per-row scales, as
// `mkmodel --weights int8` writes) against the reference with the same
// quantisation applied: the only difference left is float32 arithmetic.
func TestOtherShapesInt8(t *testing.T) {
	qcfg := hostsimConfig(t)
	steps := 20
	if testing.Short() {
		steps = 8
	}
	for _, sc := range otherShapes {
		t.Run(sc.name, func(t *testing.T) {
			ref := newShapeRef(t, sc.cfg, shapeChecked[len(shapeChecked)-1]+1, steps, true)
			dir := writeShapeBundle(t, t.TempDir(), sc.cfg, simfile.Chunked, 16, simfile.WeightInt8)
			checkShape(t, qcfg, dir, ref, steps)
		})
	}
}
