// Command gentiny writes the public tiny Llama model (testdata/tinyllama) as
// hostsim context binaries in several variants, plus the embedding table and
// the golden cases in a plain text form, for hostsim's C test harness
// (hexagon/hostsim/test/harness.c, run by `make test-hostsim`).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

type golden struct {
	Config json.RawMessage `json:"config"`
	Cases  []struct {
		Name      string `json:"name"`
		PromptIDs []int  `json:"prompt_ids"`
		Checks    []struct {
			Pos int         `json:"pos"`
			Top [][]float64 `json:"top"`
		} `json:"checks"`
		Greedy        []int     `json:"greedy"`
		GreedyMargins []float64 `json:"greedy_margins"`
	} `json:"cases"`
}

// variant is one body (prefill+decode) file paired with one lm-head file.
type variant struct {
	name     string
	contract simfile.Contract
	window   int
	weights  simfile.WeightFormat
	io, kv   simfile.DType
	mask     simfile.MaskKind
	lmhead   string
	exact    bool
}

func main() {
	goldenPath := flag.String("golden", "testdata/tinyllama/golden_tiny_public.json", "golden file")
	out := flag.String("out", "build/hostsim/test", "output directory")
	ctx := flag.Int("ctx", 512, "context length (KV slots)")
	preset := flag.String("preset", "", "instead of the golden variants, write one int8 chunked model of this tinyllama preset (e.g. llama-3.2-1b) as PRESET.hsim + PRESET_lmhead.hsim")
	flag.Parse()
	if *preset != "" {
		if err := runPreset(*preset, *out, *ctx); err != nil {
			log.Fatal(err)
		}
		return
	}
	if err := run(*goldenPath, *out, *ctx); err != nil {
		log.Fatal(err)
	}
}

func run(goldenPath, out string, ctx int) error {
	raw, err := os.ReadFile(goldenPath)
	if err != nil {
		return err
	}
	var g golden
	if err := json.Unmarshal(raw, &g); err != nil {
		return err
	}
	cfg, err := tinyllama.ParseConfig(g.Config)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	h := hyperOf(cfg, ctx)
	src := func(_ int, w simfile.Weight) ([]uint16, error) { return tinyllama.Generate(cfg, w.Name) }

	if err := writeVariants(out, h, src); err != nil {
		return err
	}
	if err := writeET(out, cfg); err != nil {
		return err
	}
	if err := writeEmbed(out, cfg); err != nil {
		return err
	}
	return writeCases(out, cfg, h, g)
}

// writeVariants writes the lm-heads and the prefill/decode variants, and
// variants.txt listing them for the harness.
func writeVariants(out string, h simfile.Hyper, src func(int, simfile.Weight) ([]uint16, error)) error {
	lmheads := []struct {
		name string
		wf   simfile.WeightFormat
		io   simfile.DType
	}{{"lmhead_f16w_f32io", simfile.WeightF16, simfile.F32}, {"lmhead_int8w_f32io", simfile.WeightInt8, simfile.F32},
		{"lmhead_f16w_f16io", simfile.WeightF16, simfile.F16}, {"lmhead_f16w_fx16io", simfile.WeightF16, simfile.UFixed16}}
	for _, l := range lmheads {
		_, _, lm := simfile.DefaultGraphs(h, simfile.QHexRT, 1, l.io, simfile.F32, simfile.MaskAdditive)
		if err := writeFile(filepath.Join(out, l.name+".hsim"), h, []simfile.Graph{lm}, simfile.WeightSpecs(h, false, true), l.wf, src); err != nil {
			return err
		}
	}
	variants := []variant{
		{"f16w_qhexrt_w128", simfile.QHexRT, 128, simfile.WeightF16, simfile.F32, simfile.F32, simfile.MaskAdditive, "lmhead_f16w_f32io", true},
		{"f16w_qhexrt_w16", simfile.QHexRT, 16, simfile.WeightF16, simfile.F32, simfile.F32, simfile.MaskAdditive, "lmhead_f16w_f32io", true},
		{"f16w_chunked_w128", simfile.Chunked, 128, simfile.WeightF16, simfile.F32, simfile.F32, simfile.MaskAdditive, "lmhead_f16w_f32io", true},
		{"f16w_chunked_w16_u16mask", simfile.Chunked, 16, simfile.WeightF16, simfile.F32, simfile.F32, simfile.MaskU16, "lmhead_f16w_f32io", true},
		{"int8w_chunked_w128", simfile.Chunked, 128, simfile.WeightInt8, simfile.F32, simfile.F32, simfile.MaskAdditive, "lmhead_int8w_f32io", false},
		{"f16w_f16io_f16kv_chunked_w128", simfile.Chunked, 128, simfile.WeightF16, simfile.F16, simfile.F16, simfile.MaskAdditive, "lmhead_f16w_f16io", false},
		{"f16w_f32io_f16kv_qhexrt_w128", simfile.QHexRT, 128, simfile.WeightF16, simfile.F32, simfile.F16, simfile.MaskAdditive, "lmhead_f16w_f32io", false},
		{"f16w_fx16io_f16kv_qhexrt_w128", simfile.QHexRT, 128, simfile.WeightF16, simfile.UFixed16, simfile.F16, simfile.MaskAdditive, "lmhead_f16w_fx16io", false},
	}
	man, err := os.Create(filepath.Join(out, "variants.txt"))
	if err != nil {
		return err
	}
	defer man.Close()
	for _, v := range variants {
		pre, dec, _ := simfile.DefaultGraphs(h, v.contract, v.window, v.io, v.kv, v.mask)
		if err := writeFile(filepath.Join(out, v.name+".hsim"), h, []simfile.Graph{pre, dec}, simfile.WeightSpecs(h, true, false), v.weights, src); err != nil {
			return err
		}
		exact := 0
		if v.exact {
			exact = 1
		}
		fmt.Fprintf(man, "%s %s.hsim %s.hsim %d %d %d\n", v.name, v.name, v.lmhead, v.contract, v.window, exact)
	}
	return nil
}

// writeET writes an ExecuTorch static-llama context (prefill_forward AR 4,
// kv_forward; context 64) with float32 KV, logits and mask, for the
// harness's ExecuTorch smoke test.
func writeET(out string, cfg tinyllama.Config) error {
	eh := hyperOf(cfg, 64)
	eh.Rope = simfile.Rope{Theta: float32(cfg.RopeTheta), Scaling: cfg.Rope()}
	es := simfile.ETSpec{PrefillAR: 4, KV: simfile.F32, Logits: simfile.F32, Mask: simfile.F32, Shards: 1}
	ef, err := os.Create(filepath.Join(out, "et_f32.hsim"))
	if err != nil {
		return err
	}
	err = simfile.WriteETShard(ef, eh, es, 0, simfile.WeightF16, func(name string, start int, dst []uint16) error {
		return tinyllama.Fill(cfg, name, start, dst)
	})
	if cerr := ef.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeEmbed writes the embedding table (what the host side looks up),
// float16 little-endian [V, H].
func writeEmbed(out string, cfg tinyllama.Config) error {
	emb, err := tinyllama.Generate(cfg, "model.embed_tokens.weight")
	if err != nil {
		return err
	}
	eb := make([]byte, 2*len(emb))
	for i, v := range emb {
		eb[2*i], eb[2*i+1] = byte(v), byte(v>>8)
	}
	return os.WriteFile(filepath.Join(out, "embed.f16"), eb, 0o644)
}

// writeCases writes cases.txt: the model's shape, the RoPE frequencies and
// every golden case.
func writeCases(out string, cfg tinyllama.Config, h simfile.Hyper, g golden) error {
	f, err := os.Create(filepath.Join(out, "cases.txt"))
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	inv := tinyllama.InvFreq(cfg)
	fmt.Fprintf(w, "model %d %d %d %d %d %d %d %d\ninvfreq %d", h.Hidden, h.Layers, h.Heads, h.KVHeads, h.HeadDim, h.FFN, h.Vocab, h.Ctx, len(inv))
	for _, v := range inv {
		fmt.Fprintf(w, " %.17g", v)
	}
	fmt.Fprintf(w, "\ncases %d\n", len(g.Cases))
	for _, c := range g.Cases {
		fmt.Fprintf(w, "case %s %d", c.Name, len(c.PromptIDs))
		for _, id := range c.PromptIDs {
			fmt.Fprintf(w, " %d", id)
		}
		fmt.Fprintf(w, "\nchecks %d\n", len(c.Checks))
		for _, ck := range c.Checks {
			fmt.Fprintf(w, "check %d %d", ck.Pos, len(ck.Top))
			for _, t := range ck.Top {
				fmt.Fprintf(w, " %d %.9g", int(t[0]), t[1])
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "greedy %d", len(c.Greedy))
		for i, id := range c.Greedy {
			fmt.Fprintf(w, " %d %.9g", id, c.GreedyMargins[i])
		}
		fmt.Fprintln(w)
	}
	return w.Flush()
}

// runPreset writes a large model (int8 weights, f16 I/O and KV, chunked, window 128) for load/speed smoke tests.
func runPreset(name, out string, ctx int) error {
	cfg, err := tinyllama.Preset(name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	h := hyperOf(cfg, ctx)
	pre, dec, lm := simfile.DefaultGraphs(h, simfile.Chunked, 128, simfile.F16, simfile.F16, simfile.MaskAdditive)
	opt := simfile.Options{Format: simfile.WeightInt8, SourceRows: func(_ int, w simfile.Weight, row0 int, dst []uint16) error {
		return tinyllama.Fill(cfg, w.Name, row0*w.Cols, dst)
	}}
	if err := writeOpts(filepath.Join(out, name+".hsim"), h, []simfile.Graph{pre, dec}, simfile.WeightSpecs(h, true, false), opt); err != nil {
		return err
	}
	return writeOpts(filepath.Join(out, name+"_lmhead.hsim"), h, []simfile.Graph{lm}, simfile.WeightSpecs(h, false, true), opt)
}

func hyperOf(cfg tinyllama.Config, ctx int) simfile.Hyper {
	return simfile.Hyper{Hidden: cfg.HiddenSize, Layers: cfg.NumHiddenLayers, Heads: cfg.NumAttentionHeads,
		KVHeads: cfg.NumKeyValueHeads, HeadDim: cfg.HeadDim, FFN: cfg.IntermediateSize, Vocab: cfg.VocabSize,
		Ctx: ctx, RMSEps: float32(cfg.RMSNormEps), TiedLMHead: cfg.TieWordEmbeddings}
}

func writeFile(path string, h simfile.Hyper, graphs []simfile.Graph, ws []simfile.Weight, wf simfile.WeightFormat,
	src func(int, simfile.Weight) ([]uint16, error)) error {
	return writeOpts(path, h, graphs, ws, simfile.Options{Format: wf, Source: src})
}

func writeOpts(path string, h simfile.Hyper, graphs []simfile.Graph, ws []simfile.Weight, opt simfile.Options) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := simfile.WriteWith(f, h, graphs, ws, opt); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
