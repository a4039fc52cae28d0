package ptesim

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/pte"
	"github.com/hexserve/hexserve/internal/rope"
)

var small = simfile.Hyper{Hidden: 16, Layers: 3, Heads: 2, KVHeads: 1, HeadDim: 8, FFN: 32, Vocab: 64, Ctx: 32,
	RMSEps: 1e-5, TiedLMHead: true, Rope: simfile.Rope{Theta: 500000, Scaling: rope.Llama32()}}

func spec(kv simfile.DType, shards int) simfile.ETSpec {
	return simfile.ETSpec{PrefillAR: 8, KV: kv, Logits: simfile.UFixed16, Mask: simfile.UFixed16, Shards: shards,
		KRange: []float32{4, 5, 6}, VRange: []float32{1, 2, 3}, LogitsRange: 20, HiddenRange: 10}
}

func write(t *testing.T, s simfile.ETSpec) *pte.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "m.pte")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	err = Write(f, small, s, simfile.WeightF16, func(string, int, []uint16) error { return nil }, nil, map[string]string{"note": "generated"})
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := pte.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pf.Close() })
	return pf
}

// The plan layout of docs/executorch-pte.md §1.3, for 3 layers: values tokens 0, mask 1, pos 2, K 3..5,
// V 6..8, then the delegate's outputs V0 K0 V1 K1 V2 K2 logits.
func TestProgramOneShard(t *testing.T) {
	f := write(t, spec(simfile.UFixed8, 1))
	for _, name := range []string{pte.MethodDecode, pte.MethodPrefill} {
		m := f.Method(name)
		ar := int32(1)
		if name == pte.MethodPrefill {
			ar = 8
		}
		if !slices.Equal(m.Inputs, []int32{0, 1, 2, 3, 4, 5, 6, 7, 8}) || !slices.Equal(m.Outputs, []int32{15, 10, 12, 14, 9, 11, 13}) {
			t.Errorf("%s: inputs %v outputs %v", name, m.Inputs, m.Outputs)
		}
		if len(m.Instructions) != 1 || m.Instructions[0].Kind != pte.DelegateCall || len(m.Operators) != 0 {
			t.Fatalf("%s: instructions %v", name, m.Instructions)
		}
		// Inputs sorted by k: pos(0) tokens(1) K0(2) V0(3) mask(4) K1 V1 K2 V2, then the outputs.
		if want := []int32{2, 0, 3, 6, 1, 4, 7, 5, 8, 9, 10, 11, 12, 13, 14, 15}; !slices.Equal(m.Instructions[0].Args, want) {
			t.Errorf("%s: args %v, want %v", name, m.Instructions[0].Args, want)
		}
		for v, want := range map[int]pte.Tensor{
			0: {Type: pte.Int, Sizes: []int32{1, ar}}, 1: {Type: pte.UInt16, Sizes: []int32{1, 1, ar, 32}},
			3: {Type: pte.Byte, Sizes: []int32{1, 1, 8, 32 - ar}}, 6: {Type: pte.Byte, Sizes: []int32{1, 1, 32 - ar, 8}},
			9: {Type: pte.Byte, Sizes: []int32{1, 1, ar, 8}}, 10: {Type: pte.Byte, Sizes: []int32{1, 1, 8, ar}},
			15: {Type: pte.UInt16, Sizes: []int32{1, ar, 64}},
		} {
			got := m.Values[v].Tensor
			if got == nil || got.Type != want.Type || !slices.Equal(got.Sizes, want.Sizes) {
				t.Errorf("%s value %d: %+v, want %+v", name, v, got, want)
			}
		}
	}
	if d, p := f.Method(pte.MethodDecode).Delegates[0], f.Method(pte.MethodPrefill).Delegates[0]; d.BinaryOffset != p.BinaryOffset {
		t.Errorf("the two methods' delegates are not one segment: %d vs %d", d.BinaryOffset, p.BinaryOffset)
	}
	md := f.Metadata
	for k, want := range map[string]any{"get_n_layers": int64(3), "get_vocab_size": int64(64), "get_max_context_len": int64(32),
		"get_kv_io_bit_width": int64(8), "get_ar_len": int64(1), "get_use_kv_cache": true, "get_logits_zero_point": int64(32768)} {
		if len(md[k]) != 1 || md[k][0].Any() != want {
			t.Errorf("%s = %v, want %v", k, md[k], want)
		}
	}
	// get_kv_output_i_quant_attr in graph order V0, K0, V1, ...: scale 2·range/255, zero point 128.
	for i, r := range []float32{1, 4, 2, 5, 3, 6} {
		q := md["get_kv_output_"+string(rune('0'+i))+"_quant_attr"]
		if len(q) != 5 || q[0].Double != float64(2*r/255) || q[1].Int != 128 || q[3].Int != 255 || q[4].String != "torch.uint8" {
			t.Errorf("quant_attr %d = %v", i, q)
		}
	}
}

// Two shards (layers 2 + 1): DelegateCall 0, three llama::fallback copies, DelegateCall 1.
func TestProgramShards(t *testing.T) {
	f := write(t, spec(simfile.UFixed8, 2))
	m := f.Method(pte.MethodPrefill)
	kinds := []pte.InstrKind{}
	for _, in := range m.Instructions {
		kinds = append(kinds, in.Kind)
	}
	if !slices.Equal(kinds, []pte.InstrKind{pte.DelegateCall, pte.KernelCall, pte.KernelCall, pte.KernelCall, pte.DelegateCall}) ||
		len(m.Delegates) != 2 || len(m.Operators) != 1 || m.Operators[0] != pte.FallbackOp {
		t.Fatalf("instructions %v, operators %v", kinds, m.Operators)
	}
	// The copies feed shard 1 (hidden_state k0, freqs_cos k1, ..., freqs_sin last).
	last := m.Instructions[4].Args
	for j, in := range m.Instructions[1:4] {
		if in.Args[1] != in.Args[2] {
			t.Errorf("fallback %d args %v: want [in, out, out]", j, in.Args)
		}
		h := m.Values[in.Args[1]].Tensor
		if h.Type != pte.UInt16 {
			t.Errorf("fallback %d carries %v, want UINT16 codes", j, h.Type)
		}
	}
	if last[0] != m.Instructions[1].Args[1] || last[1] != m.Instructions[2].Args[1] {
		t.Errorf("shard 1 args %v do not start with the copied hidden state and cos", last)
	}
	if m.Delegates[0].QNN == nil || !m.Delegates[0].QNN.UseMultiContexts || m.Delegates[0].QNN.MaxSpillFill == 0 {
		t.Errorf("sharded compile spec %+v: want multi-contexts with a spill-fill size", m.Delegates[0].QNN)
	}
	if len(m.Outputs) != 7 || m.Values[m.Outputs[0]].Tensor.Sizes[2] != 64 {
		t.Errorf("outputs %v", m.Outputs)
	}
}

// TestStreamedShards: the shards stream into the file at the sizes laid out beforehand
// (simfile.ETShardSize), and the string metadata is there.
func TestStreamedShards(t *testing.T) {
	s := spec(simfile.UFixed8, 2)
	f := write(t, s)
	m := f.Method(pte.MethodDecode)
	for i, d := range m.Delegates {
		want, err := simfile.ETShardSize(small, s, i, simfile.WeightF16)
		if err != nil {
			t.Fatal(err)
		}
		if int64(d.Header.Size) != want || d.Header.Signature <= 0 {
			t.Errorf("shard %d: size %d signature %d; want size %d and a signature", i, d.Header.Size, d.Header.Signature, want)
		}
	}
	if v := f.Metadata["note"]; len(v) != 1 || v[0].Kind != pte.KindString || v[0].String != "generated" {
		t.Errorf("metadata note = %+v", v)
	}
}
