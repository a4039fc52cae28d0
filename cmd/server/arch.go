package main

import (
	"encoding/json"
	"github.com/hexserve/hexserve/internal/modelfile"
	"os"
	"path/filepath"
	"strconv"

	"github.com/hexserve/hexserve/hexagon/pte"
	"github.com/hexserve/hexserve/hexagon/qhexrt/bundle"
	"github.com/hexserve/hexserve/server"
)

// shape is a Llama model's shape as its config gives it (0: not given), for
// /api/show's model_info.
type shape struct {
	hidden, layers, heads, kvHeads, headDim, ffn, vocab int
	tied                                                bool // the lm head is the embedding
}

// arch is s for the listings; the parameter count needs every size.
func (s shape) arch() server.ModelArch {
	a := server.ModelArch{Hidden: s.hidden, Layers: s.layers, FFN: s.ffn, Heads: s.heads, KVHeads: s.kvHeads}
	hd := s.headDim
	if hd == 0 && s.heads > 0 {
		hd = s.hidden / s.heads
	}
	for _, n := range []int{s.hidden, s.layers, s.heads, s.kvHeads, hd, s.ffn, s.vocab} {
		if n <= 0 || n > 1<<30 { // not given, or not a size
			return a
		}
	}
	h, q, kv := int64(s.hidden), int64(s.heads*hd), int64(s.kvHeads*hd)
	// Per block: q, k, v, o projections, gate, up and down, two norms.
	block := h*q + 2*h*kv + q*h + 3*h*int64(s.ffn) + 2*h
	a.Params = int64(s.vocab)*h + int64(s.layers)*block + h
	if !s.tied {
		a.Params += int64(s.vocab) * h
	}
	return a
}

// hfShape reads a Hugging Face config.json's sizes (LlamaConfig's keys and
// defaults: no num_key_value_heads is one per head, embeddings untied).
func hfShape(hf map[string]any) shape {
	n := func(key string) int {
		f, _ := hf[key].(float64)
		if f < 0 || f > 1<<30 {
			return 0
		}
		return int(f)
	}
	s := shape{hidden: n("hidden_size"), layers: n("num_hidden_layers"), heads: n("num_attention_heads"),
		kvHeads: n("num_key_value_heads"), headDim: n("head_dim"), ffn: n("intermediate_size"), vocab: n("vocab_size")}
	if s.kvHeads == 0 {
		s.kvHeads = s.heads
	}
	s.tied, _ = hf["tie_word_embeddings"].(bool)
	return s
}

// readHF reads the Hugging Face config.json in dir, bounded as manifests
// are; nil when there is none or it is not a JSON object.
func readHF(dir string) map[string]any {
	var hf map[string]any
	b, err := modelfile.ReadFile(filepath.Join(dir, "config.json"), modelfile.MaxConfig)
	if err != nil || json.Unmarshal(b, &hf) != nil {
		return nil
	}
	return hf
}

// bundleShape is a QHexRT bundle's shape: the manifest's params and heads,
// and what the manifest lacks (the feed-forward length, tied embeddings)
// from the checkpoint's config.json in the bundle folder, else from
// mkmodel's note (its bundles tie them, as Llama 3.2 1B and 3B do).
func bundleShape(b *bundle.Bundle, root string) shape {
	p := b.Manifest.Params
	s := shape{hidden: p.Hidden, layers: p.NLayers, heads: b.Settings.NHeads, kvHeads: b.Settings.NKVHeads,
		headDim: p.HeadDim, vocab: p.Vocab, tied: true}
	if hf := readHF(root); hf != nil {
		h := hfShape(hf)
		s.ffn, s.tied = h.ffn, h.tied
		return s
	}
	var note struct {
		FFN int `json:"intermediate_size"`
	}
	if json.Unmarshal(b.Manifest.Extra["mkmodel"], &note) == nil && note.FFN > 0 {
		s.ffn = note.FFN
	}
	return s
}

// bundleRoot is the folder of the bundle at path: path, or a manifest's
// folder.
func bundleRoot(path string) string {
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		return filepath.Dir(path)
	}
	return path
}

// pteShape is a .pte's shape from its metadata methods (a static-llama
// export has no feed-forward length among them).
func pteShape(f *pte.File) shape {
	n := func(key string) int {
		if v := f.Metadata[key]; len(v) == 1 && v[0].Kind == pte.KindInt && v[0].Int > 0 && v[0].Int < 1<<30 {
			return int(v[0].Int)
		}
		return 0
	}
	s := shape{hidden: n("get_dim"), layers: n("get_n_layers"), kvHeads: n("get_n_kv_heads"), headDim: n("get_head_dim"),
		vocab: n("get_vocab_size")}
	if s.headDim > 0 {
		s.heads = s.hidden / s.headDim
	}
	return s
}

// namedParams is the parameter count a size from the model's name gives
// ("1B" → 1,000,000,000; "135M"); 0 when it gives none.
func namedParams(size string) int64 {
	if len(size) < 2 {
		return 0
	}
	f, err := strconv.ParseFloat(size[:len(size)-1], 64)
	if err != nil || f <= 0 || f > 1e6 {
		return 0
	}
	switch size[len(size)-1] {
	case 'B':
		return int64(f * 1e9)
	case 'M':
		return int64(f * 1e6)
	}
	return 0
}
