package qhexrt

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/qhexrt/bundle"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// variant is one way to build the public tiny model as a bundle.
type variant struct {
	contract simfile.Contract
	window   int
	io, kv   simfile.DType
	mask     simfile.MaskKind
	shared   bool          // one context binary holding all three graphs
	lmIO     simfile.DType // lm-head I/O type when it differs from io (0: io)
}

func (v variant) String() string {
	c := "qhexrt"
	if v.contract == simfile.Chunked {
		c = "chunked"
	}
	m := "additive"
	if v.mask == simfile.MaskU16 {
		m = "u16"
	}
	s := fmt.Sprintf("%s-ar%d-%s-io%04x-kv%04x", c, v.window, m, uint32(v.io), uint32(v.kv))
	if v.shared {
		s += "-shared"
	}
	if v.lmIO != 0 {
		s += fmt.Sprintf("-lm%04x", uint32(v.lmIO))
	}
	return s
}

// tinyWorld holds the generated tiny model files shared by all bundles.
var tinyWorld struct {
	once  sync.Once
	err   error
	dir   string
	cfg   tinyllama.Config
	embed []uint16 // [vocab, hidden] f16
	mu    sync.Mutex
	built map[variant]string
}

// TestMain removes the generated bundles.
func TestMain(m *testing.M) {
	code := m.Run()
	if tinyWorld.dir != "" {
		os.RemoveAll(tinyWorld.dir)
	}
	os.Exit(code)
}

func tinyHyper(c tinyllama.Config) simfile.Hyper {
	return simfile.Hyper{Hidden: c.HiddenSize, Layers: c.NumHiddenLayers, Heads: c.NumAttentionHeads,
		KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim, FFN: c.IntermediateSize, Vocab: c.VocabSize,
		Ctx: 512, RMSEps: float32(c.RMSNormEps), TiedLMHead: c.TieWordEmbeddings}
}

// tinyBundle builds (once per variant) the public tiny model as a bundle with
// f16 weights and returns the arch folder.
func tinyBundle(t testing.TB, v variant) string {
	t.Helper()
	tinyWorld.once.Do(func() {
		tinyWorld.cfg = tinyllama.Tiny()
		tinyWorld.built = map[variant]string{}
		if tinyWorld.dir, tinyWorld.err = os.MkdirTemp("", "hexagon-tiny-"); tinyWorld.err != nil {
			return
		}
		if tinyWorld.embed, tinyWorld.err = tinyllama.Generate(tinyWorld.cfg, "model.embed_tokens.weight"); tinyWorld.err != nil {
			return
		}
		f, err := os.Create(filepath.Join(tinyWorld.dir, "embed_f16.bin"))
		if err != nil {
			tinyWorld.err = err
			return
		}
		defer f.Close()
		tinyWorld.err = writeU16(f, tinyWorld.embed)
	})
	if tinyWorld.err != nil {
		t.Fatal(tinyWorld.err)
	}
	tinyWorld.mu.Lock()
	defer tinyWorld.mu.Unlock()
	if dir, ok := tinyWorld.built[v]; ok {
		return dir
	}
	dir, err := buildTiny(v)
	if err != nil {
		t.Fatal(err)
	}
	tinyWorld.built[v] = dir
	return dir
}

func buildTiny(v variant) (string, error) {
	c := tinyWorld.cfg
	h := tinyHyper(c)
	dir := filepath.Join(tinyWorld.dir, v.String(), "v79")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	pre, dec, lm := simfile.DefaultGraphs(h, v.contract, v.window, v.io, v.kv, v.mask)
	lmType := v.io
	if v.lmIO != 0 {
		_, _, lm = simfile.DefaultGraphs(h, v.contract, v.window, v.lmIO, v.kv, v.mask)
		lmType = v.lmIO
	}
	weight := func(i int, w simfile.Weight) ([]uint16, error) {
		if w.Name == "model.embed_tokens.weight" {
			return tinyWorld.embed, nil
		}
		return tinyllama.Generate(c, w.Name)
	}
	write := func(name string, graphs []simfile.Graph, layers, lmhead bool) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		defer f.Close()
		return simfile.WriteWith(f, h, graphs, simfile.WeightSpecs(h, layers, lmhead), simfile.Options{Format: simfile.WeightF16, Source: weight})
	}
	contexts := map[string]bundle.Context{}
	if v.shared {
		if err := write("model.bin", []simfile.Graph{pre, dec, lm}, true, true); err != nil {
			return "", err
		}
		contexts["shared"] = bundle.Context{Bin: "model.bin"}
	} else {
		if err := write("model.bin", []simfile.Graph{pre, dec}, true, false); err != nil {
			return "", err
		}
		// One lm-head binary per I/O type, shared by the bundles.
		lmName := fmt.Sprintf("lmhead-%04x.bin", uint32(lmType))
		lmPath := filepath.Join(tinyWorld.dir, lmName)
		if _, err := os.Stat(lmPath); err != nil {
			if err := write(filepath.Join("..", "..", lmName), []simfile.Graph{lm}, false, true); err != nil {
				return "", err
			}
		}
		contexts["shared"] = bundle.Context{Bin: "model.bin"}
		lm, err := linkInto(dir, lmPath)
		if err != nil {
			return "", err
		}
		contexts["lmhead"] = bundle.Context{Bin: lm}
	}
	tok, err := linkInto(dir, filepath.Join("..", "..", "testdata", "tokenizer", "llama3.2", "tokenizer.json"))
	if err != nil {
		return "", err
	}
	embed, err := linkInto(dir, filepath.Join(tinyWorld.dir, "embed_f16.bin"))
	if err != nil {
		return "", err
	}
	contract, mask := ContractQHexRT, string(graphio.MaskAdditive)
	if v.contract == simfile.Chunked {
		contract = ContractChunked
	}
	if v.mask == simfile.MaskU16 {
		mask = string(graphio.MaskU16)
	}
	bos := c.BOSTokenID
	m := &bundle.Manifest{
		SchemaVersion: 1,
		Model:         bundle.Model{Name: "tinyllama-public", Family: "llama", DSPArch: "v79"},
		Params: bundle.Params{Hidden: c.HiddenSize, Vocab: c.VocabSize, NLayers: c.NumHiddenLayers, MaxCtx: h.Ctx,
			KVDim: c.KVDim(), HeadDim: c.HeadDim, RopeTheta: c.RopeTheta, EOSTokenID: bundle.IDs{128009},
			MaxPositions: c.MaxPositionEmbeddings},
		Artifacts: bundle.Artifacts{Contexts: contexts, Embed: embed, Tokenizer: tok},
		Plan:      bundle.Plan{Params: bundle.PlanParams{Prefill: "prefill", Decode: "decode", LMHead: "lmhead"}},
		Chat:      bundle.Chat{BOS: &bos},
		Hexserve:  &bundle.Hexserve{Contract: &contract, Mask: &mask},
	}
	return dir, bundle.Write(dir, m)
}

func writeU16(f *os.File, v []uint16) error {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		b[2*i], b[2*i+1] = byte(x), byte(x>>8)
	}
	_, err := f.Write(b)
	return err
}

// linkInto makes a symbolic link to target inside dir and returns its name:
// manifests name files inside their folder only, and the test bundles share
// the large files they have in common.
func linkInto(dir, target string) (string, error) {
	abs, err := filepath.Abs(target)
	if err != nil {
		return "", err
	}
	name := filepath.Base(abs)
	if err := os.Symlink(abs, filepath.Join(dir, name)); err != nil && !os.IsExist(err) {
		return "", err
	}
	return name, nil
}
