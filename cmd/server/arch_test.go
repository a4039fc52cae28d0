package main

import (
	"testing"

	"github.com/hexserve/hexserve/server"
)

// TestShapeParams: the parameter count from a Hugging Face config is the
// one Ollama shows for the same models (llama3.2:1b 1.24B, llama3.2:3b
// 3.21B, llama3.1:8b 8.03B, from their GGUF tensors); a size the config
// lacks leaves it unknown.
func TestShapeParams(t *testing.T) {
	llama := func(h, layers, heads, kv, ffn float64, tied bool) map[string]any {
		return map[string]any{"hidden_size": h, "num_hidden_layers": layers, "num_attention_heads": heads,
			"num_key_value_heads": kv, "intermediate_size": ffn, "vocab_size": 128256.0, "tie_word_embeddings": tied}
	}
	noFFN := llama(2048, 16, 32, 8, 8192, true)
	delete(noFFN, "intermediate_size")
	for _, tc := range []struct {
		name string
		hf   map[string]any
		want server.ModelArch
	}{
		{"Llama-3.2-1B", llama(2048, 16, 32, 8, 8192, true), server.ModelArch{Params: 1235814400, Hidden: 2048, Layers: 16, FFN: 8192, Heads: 32, KVHeads: 8}},
		{"Llama-3.2-3B", llama(3072, 28, 24, 8, 8192, true), server.ModelArch{Params: 3212749824, Hidden: 3072, Layers: 28, FFN: 8192, Heads: 24, KVHeads: 8}},
		{"Llama-3.1-8B", llama(4096, 32, 32, 8, 14336, false), server.ModelArch{Params: 8030261248, Hidden: 4096, Layers: 32, FFN: 14336, Heads: 32, KVHeads: 8}},
		{"no intermediate_size", noFFN, server.ModelArch{Hidden: 2048, Layers: 16, Heads: 32, KVHeads: 8}},
		{"junk", map[string]any{"hidden_size": "big", "num_hidden_layers": -3.0}, server.ModelArch{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := hfShape(tc.hf).arch(); got != tc.want {
				t.Errorf("%+v, want %+v", got, tc.want)
			}
		})
	}
	for size, want := range map[string]int64{"1B": 1e9, "3.2B": 3.2e9, "135M": 135e6, "": 0, "unknown": 0, "xB": 0} {
		if got := namedParams(size); got != want {
			t.Errorf("namedParams(%q) = %d, want %d", size, got, want)
		}
	}
}
