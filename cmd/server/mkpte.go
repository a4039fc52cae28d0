//go:build !nomkmodel

package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hexserve/hexserve/hexagon/genie/geniesim"
	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/pte/ptesim"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// mkmodel --format pte: an ExecuTorch static-llama .pte (docs/executorch-pte.md) whose QNN context
// binaries are hostsim's, with the plans, delegates, fallback copies between shards and
// metadata methods of ExecuTorch's hybrid export.

var (
	pteKV     = map[string]simfile.DType{"u8": simfile.UFixed8, "u16": simfile.UFixed16, "f32": simfile.F32}
	pteLogits = map[string]simfile.DType{"u16": simfile.UFixed16, "f32": simfile.F32}
)

// calibrateMax is the largest model (in weight elements) whose fixed-point ranges mkmodel
// measures with the float64 reference; larger ones use fixedRanges.
const calibrateMax = 50_000_000

// fixedRanges are the ranges of models too large to calibrate: the SPEC's weight scaling keeps
// K and V near ±4 at every size (tiny: 4.3), the residual grows with depth, logits reach ~100.
func fixedRanges(c tinyllama.Config) tinyllama.Ranges {
	r := tinyllama.Ranges{Hidden: 8 * float64(c.NumHiddenLayers), Logits: 128}
	for range c.NumHiddenLayers {
		r.K, r.V = append(r.K, 8), append(r.V, 8)
	}
	return r
}

// pteSpec derives the graph spec; ranges get 25% headroom.
func pteSpec(o mkmodelOptions, c tinyllama.Config) (simfile.ETSpec, error) {
	kv, ok := pteKV[o.kv]
	if !ok {
		return simfile.ETSpec{}, fmt.Errorf("--kv %q: want u8, u16 or f32", o.kv)
	}
	lg, ok := pteLogits[o.logits]
	if !ok {
		return simfile.ETSpec{}, fmt.Errorf("--logits %q: want u16 or f32", o.logits)
	}
	if o.shards < 1 || o.shards > c.NumHiddenLayers {
		return simfile.ETSpec{}, fmt.Errorf("--shards %d: want 1 to %d (the layer count)", o.shards, c.NumHiddenLayers)
	}
	if o.prefillChunk < 1 || o.prefillChunk >= o.ctx {
		return simfile.ETSpec{}, fmt.Errorf("need 0 < --prefill-chunk (%d) < --ctx (%d)", o.prefillChunk, o.ctx)
	}
	if c.MaxPositionEmbeddings > 0 && o.ctx > c.MaxPositionEmbeddings {
		return simfile.ETSpec{}, fmt.Errorf("--ctx %d exceeds the model's max_position_embeddings %d", o.ctx, c.MaxPositionEmbeddings)
	}
	s := simfile.ETSpec{PrefillAR: o.prefillChunk, KV: kv, Logits: lg, Mask: simfile.UFixed16, Shards: o.shards}
	if s.CrossDType() == simfile.F32 { // ExecuTorch's fp16 flow: mask, KV and logits all float32
		s.Mask = simfile.F32
	}
	r := fixedRanges(c)
	var n int
	for _, t := range tinyllama.Tensors(c) {
		n += t.Len()
	}
	if n <= calibrateMax && (kv != simfile.F32 || lg != simfile.F32) {
		m, err := tinyllama.NewModel(c)
		if err != nil {
			return s, err
		}
		toks := []int{c.BOSTokenID}
		for _, d := range tinyllama.Draws(7, 63) {
			toks = append(toks, d%c.VocabSize)
		}
		if r, err = m.Calibrate(toks); err != nil {
			return s, err
		}
	}
	for l := range r.K {
		s.KRange, s.VRange = append(s.KRange, float32(1.25*r.K[l])), append(s.VRange, float32(1.25*r.V[l]))
	}
	s.LogitsRange, s.HiddenRange = float32(1.25*r.Logits), float32(1.25*r.Hidden)
	return s, nil
}

// pteHyper is the whole model's hostsim header.
func pteHyper(c tinyllama.Config, ctx int) simfile.Hyper {
	h := simfile.Hyper{Hidden: c.HiddenSize, Layers: c.NumHiddenLayers, Heads: c.NumAttentionHeads,
		KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim, FFN: c.IntermediateSize, Vocab: c.VocabSize, Ctx: ctx,
		RMSEps: float32(c.RMSNormEps), TiedLMHead: c.TieWordEmbeddings, QKNorm: c.QKNorm(), QKVBias: c.QKVBias(),
		Scales: geniesim.Scales(c),
		Rope:   simfile.Rope{Theta: float32(c.RopeTheta), Scaling: c.Rope()}}
	return h
}

// writePTE writes OUT/<name>.pte with the tokenizer and licence files and returns OUT. The
// shards stream into the file: memory stays flat whatever the model's size.
func writePTE(o mkmodelOptions, stderr io.Writer) (string, error) {
	cfg, wf, err := modelInputs(&o)
	if err != nil {
		return "", err
	}
	s, err := pteSpec(o, cfg)
	if err != nil {
		return "", err
	}
	h := pteHyper(cfg, o.ctx)
	var size int64
	for i := range s.Shards {
		n, err := simfile.ETShardSize(h, s, i, wf)
		if err != nil {
			return "", err
		}
		size += n
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(o.out, o.name+".pte")
	fmt.Fprintf(stderr, "hexserve mkmodel: writing %s (%s)\n", path, humanSize(size))
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return "", err
	}
	pw := newProgressWriter(f, stderr, filepath.Base(path), size)
	err = ptesim.Write(pw, h, s, wf, func(name string, start int, dst []uint16) error {
		return tinyllama.Fill(cfg, name, start, dst)
	}, func(i, size int) {
		if s.Shards > 1 {
			pw.Note("shard %d/%d: %.1f MB", i+1, s.Shards, float64(size)/1e6)
		}
	}, map[string]string{tinyllama.GeneratedKey: tinyllama.GeneratedNote(cfg)})
	pw.Done()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if err := copyTokenizer(o, o.out, cfg, stderr); err != nil {
		return "", err
	}
	// The family, which ExecuTorch's metadata does not name (Falcon3's config.json says llama, with its own
	// sizes and end tokens).
	if cmp.Or(o.family, "llama") != "llama" {
		for name, v := range map[string]any{"config.json": geniesim.HFConfig(cfg), "generation_config.json": geniesim.GenerationConfig(cfg)} {
			b, _ := json.MarshalIndent(v, "", "    ")
			if err := os.WriteFile(filepath.Join(o.out, name), b, 0o644); err != nil {
				return "", err
			}
		}
	}
	return o.out, nil
}
