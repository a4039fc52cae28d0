package simfile

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/internal/rope"
)

func TestShardLayers(t *testing.T) {
	for _, tc := range []struct {
		layers, shards int
		first, count   []int
	}{
		{2, 1, []int{0}, []int{2}},
		{5, 2, []int{0, 3}, []int{3, 2}},
		{28, 3, []int{0, 10, 19}, []int{10, 9, 9}},
		{16, 4, []int{0, 4, 8, 12}, []int{4, 4, 4, 4}},
	} {
		first, count := ShardLayers(tc.layers, tc.shards)
		if !slices.Equal(first, tc.first) || !slices.Equal(count, tc.count) {
			t.Errorf("ShardLayers(%d, %d) = %v %v, want %v %v", tc.layers, tc.shards, first, count, tc.first, tc.count)
		}
	}
}

func TestETShardRoundTrip(t *testing.T) {
	h := Hyper{Hidden: 16, Layers: 3, Heads: 2, KVHeads: 1, HeadDim: 8, FFN: 32, Vocab: 64, Ctx: 32, RMSEps: 1e-5,
		TiedLMHead: true, Rope: Rope{Theta: 500000, Scaling: rope.Llama32()}}
	s := ETSpec{PrefillAR: 8, KV: UFixed8, Logits: UFixed16, Mask: UFixed16, Shards: 2, KRange: []float32{1, 2, 3},
		VRange: []float32{4, 5, 6}, LogitsRange: 20, HiddenRange: 10}
	for i, want := range []struct {
		first, layers, nin, nout int
		weights, filled          []string // stored (shard-local) names, and the model names filled from
	}{
		{0, 2, 7, 7, []string{"model.layers.0.", "model.layers.1.", "model.embed_tokens.weight"},
			[]string{"model.layers.0.", "model.layers.1.", "model.embed_tokens.weight"}},
		{2, 1, 6, 3, []string{"model.layers.0.", "model.norm.weight", "model.embed_tokens.weight"},
			[]string{"model.layers.2.", "model.norm.weight", "model.embed_tokens.weight"}},
	} {
		var b bytes.Buffer
		var filled []string
		if err := WriteETShard(&b, h, s, i, WeightF16, func(name string, _ int, _ []uint16) error {
			filled = append(filled, name)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		f, err := Read(bytes.NewReader(b.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if f.Hyper.FirstLayer != want.first || f.Hyper.Layers != want.layers || f.Hyper.Shards != 2 || !reflect.DeepEqual(f.Hyper.Rope, h.Rope) {
			t.Errorf("shard %d header %+v", i, f.Hyper)
		}
		if len(f.Graphs) != 2 || f.Graphs[0].Name != "kv_forward" || f.Graphs[1].Name != "prefill_forward" ||
			f.Graphs[1].Kind != ETPrefill || f.Graphs[1].Window != 8 {
			t.Fatalf("shard %d graphs %+v", i, f.Graphs)
		}
		g := f.Graphs[1]
		if len(g.Inputs) != want.nin || len(g.Outputs) != want.nout {
			t.Errorf("shard %d: %d inputs, %d outputs; want %d, %d", i, len(g.Inputs), len(g.Outputs), want.nin, want.nout)
		}
		// K of the shard's first layer: transposed [1,n_kv,hd,S], scale from the model layer's range.
		k := g.Inputs[0]
		if !strings.HasSuffix(k.Name, "_args_0@0") || !slices.Equal(k.Dims, []int{1, 1, 8, 24}) ||
			k.Scale != 2*s.KRange[want.first]/255 || k.Offset != -128 {
			t.Errorf("shard %d K0 %+v", i, k)
		}
		var names []string
		for _, w := range f.Weights {
			names = append(names, w.Name)
		}
		for _, p := range want.weights {
			if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, p) }) {
				t.Errorf("shard %d stores no %s*: %v", i, p, names)
			}
		}
		for _, p := range want.filled {
			if !slices.ContainsFunc(filled, func(n string) bool { return strings.HasPrefix(n, p) }) {
				t.Errorf("shard %d never filled %s*: %v", i, p, filled)
			}
		}
		if extra := map[int]int{0: 1, 1: 2}[i]; len(names) != 9*want.layers+extra { // + embedding (+ final norm)
			t.Errorf("shard %d stores %d weights: %v", i, len(names), names)
		}
	}
	if _, _, err := ETShard(h, ETSpec{PrefillAR: 32, KV: F32, Logits: F32, Mask: F32, Shards: 1}, 0); err == nil {
		t.Error("AR = ctx accepted")
	}
	if _, _, err := ETShard(h, ETSpec{PrefillAR: 8, KV: UFixed8, Logits: F32, Mask: F32, Shards: 1}, 0); err == nil {
		t.Error("fixed-point KV without ranges accepted")
	}
}

// TestFlagsTogether: a shard may carry LongRoPE (flag bit 3, the attention factor in the header's
// factor field) and Granite's multipliers (flag bit 4, a 144-byte header) at once; both read back.
func TestFlagsTogether(t *testing.T) {
	sc := &rope.Scaling{Type: rope.TypeLongRoPE, ShortFactor: []float64{1, 1.5, 2, 3}, LongFactor: []float64{2, 3, 4, 5},
		Factor: 32, OriginalMaxPositions: 4096, AttentionFactor: 1.25}
	scales := Scales{Embedding: 12, Attention: 0.0078125, Residual: 0.22, Logits: 16}
	for _, tc := range []struct {
		name   string
		rope   *rope.Scaling
		scales Scales
		flags  uint32
		size   uint32
	}{
		{"longrope", sc, Scales{}, 1 | 8, 128},
		{"multipliers", nil, scales, 1 | 16, 144},
		{"both", sc, scales, 1 | 8 | 16, 144},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := Hyper{Hidden: 16, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 8, FFN: 32, Vocab: 64, Ctx: 32, RMSEps: 1e-5,
				TiedLMHead: true, Scales: tc.scales, Rope: Rope{Theta: 10000, Scaling: tc.rope}}
			s := ETSpec{PrefillAR: 8, KV: UFixed8, Logits: UFixed16, Mask: UFixed16, Shards: 1, KRange: []float32{1, 2},
				VRange: []float32{4, 5}, LogitsRange: 20, HiddenRange: 10}
			var b bytes.Buffer
			if err := WriteETShard(&b, h, s, 0, WeightF16, func(string, int, []uint16) error { return nil }); err != nil {
				t.Fatal(err)
			}
			raw := b.Bytes()
			if size, flags := binary.LittleEndian.Uint32(raw[12:]), binary.LittleEndian.Uint32(raw[52:]); size != tc.size || flags != tc.flags {
				t.Fatalf("header size %d, flags %#x; want %d, %#x", size, flags, tc.size, tc.flags)
			}
			f, err := Read(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			if f.Hyper.Scales != tc.scales {
				t.Errorf("multipliers %+v, want %+v", f.Hyper.Scales, tc.scales)
			}
			got := f.Hyper.Rope.Scaling
			if (tc.rope != nil) != (got.Kind() == rope.TypeLongRoPE) ||
				(tc.rope != nil && (got.Attention() != 1.25 || got.OriginalMaxPositions != 4096)) {
				t.Errorf("rope %+v, want LongRoPE %v (attention 1.25, original 4096)", got, tc.rope != nil)
			}
		})
	}
}
