package simfile

import (
	"fmt"
	"io"
	"strconv"
)

// ETSpec describes the ExecuTorch static-llama graphs of a model (docs/executorch-pte.md §3): prefill_forward
// (PrefillAR rows per call) and kv_forward (1 row) over a KV cache of Hyper.Ctx − AR slots.
type ETSpec struct {
	PrefillAR int
	KV        DType // UFixed8, UFixed16 or F32
	Logits    DType // UFixed16 or F32
	Mask      DType // UFixed16 (65535 attend / 0 masked), UFixed8 (255 / 0) or F32 (0 / −65535)
	// KRange and VRange are per model layer: the largest |K| (post-RoPE) and |V| the fixed-point KV
	// codes must hold. LogitsRange and HiddenRange do the same for the logits and for the hidden
	// state that crosses shards.
	KRange, VRange           []float32
	LogitsRange, HiddenRange float32
	Shards                   int
}

// ShardLayers splits layers over shards as evenly as possible, earlier shards taking the
// remainder; it returns each shard's first layer and count.
func ShardLayers(layers, shards int) (first, count []int) {
	at := 0
	for i := range shards {
		n := layers / shards
		if i < layers%shards {
			n++
		}
		first, count = append(first, at), append(count, n)
		at += n
	}
	return first, count
}

// CrossDType is the data type of what crosses shards (hidden state, cos, sin): float32 when
// the KV cache and logits are float32, else 16-bit codes.
func (s ETSpec) CrossDType() DType {
	if s.KV == F32 && s.Logits == F32 {
		return F32
	}
	return UFixed16
}

// fixedRange returns a symmetric scale/offset holding ±r in dt (QNN: real = scale·(q + offset)).
func fixedRange(dt DType, r float32) (float32, int32) {
	switch dt {
	case UFixed8:
		return 2 * r / 255, -128
	case UFixed16:
		return 2 * r / 65535, -32768
	}
	return 0, 0
}

func (s ETSpec) validate(h Hyper) error {
	switch {
	case s.PrefillAR < 1 || s.PrefillAR >= h.Ctx:
		return fmt.Errorf("simfile: prefill AR %d must be in [1, ctx %d)", s.PrefillAR, h.Ctx)
	case s.KV != UFixed8 && s.KV != UFixed16 && s.KV != F32:
		return fmt.Errorf("simfile: KV data type %#x (want u8, u16 or f32)", uint32(s.KV))
	case s.Logits != UFixed16 && s.Logits != F32:
		return fmt.Errorf("simfile: logits data type %#x (want u16 or f32)", uint32(s.Logits))
	case s.Mask != UFixed16 && s.Mask != UFixed8 && s.Mask != F32:
		return fmt.Errorf("simfile: mask data type %#x (want u16, u8 or f32)", uint32(s.Mask))
	case s.Shards < 1 || s.Shards > h.Layers:
		return fmt.Errorf("simfile: %d shards for %d layers", s.Shards, h.Layers)
	case s.KV != F32 && (len(s.KRange) != h.Layers || len(s.VRange) != h.Layers):
		return fmt.Errorf("simfile: fixed-point KV needs a K and V range per layer")
	}
	return nil
}

// ETShard returns shard i's header (Layers = its layer count) and its two graphs in the stored
// order kv_forward, prefill_forward. h is the whole model's.
func ETShard(h Hyper, s ETSpec, i int) (Hyper, []Graph, error) {
	if err := s.validate(h); err != nil {
		return Hyper{}, nil, err
	}
	if i < 0 || i >= s.Shards {
		return Hyper{}, nil, fmt.Errorf("simfile: shard %d of %d", i, s.Shards)
	}
	first, count := ShardLayers(h.Layers, s.Shards)
	sh := h
	sh.FirstLayer, sh.Layers, sh.Shards = first[i], count[i], s.Shards
	dec := etGraph(sh, s, "kv_forward", ETDecode, 1, i == 0, i == s.Shards-1)
	pre := etGraph(sh, s, "prefill_forward", ETPrefill, s.PrefillAR, i == 0, i == s.Shards-1)
	return sh, []Graph{dec, pre}, nil
}

// etGraph builds one graph. Inputs are named input_<k>_<node>@0 and stored caches first (a
// scrambled order, as in the real binaries); outputs are V0, K0, V1, K1, ..., then the logits
// (last shard) or the hidden state, cos and sin for the next shard.
func etGraph(h Hyper, s ETSpec, name string, kind Kind, ar int, first, last bool) Graph {
	L, nkv, hd, cl := h.Layers, h.KVHeads, h.HeadDim, h.Ctx
	S := cl - ar
	cross := s.CrossDType()
	in := func(k int, node string) string { return "input_" + strconv.Itoa(k) + "_" + node + "@0" }
	kv := func(n string, l int, isK bool, dims ...int) Tensor {
		t := Tensor{Name: n, DType: s.KV, Dims: dims}
		r := s.VRange
		if isK {
			r = s.KRange
		}
		if s.KV != F32 {
			t.Scale, t.Offset = fixedRange(s.KV, r[h.FirstLayer+l])
		}
		return t
	}
	crossT := func(n string, r float32, dims ...int) Tensor {
		t := Tensor{Name: n, DType: cross, Dims: dims}
		t.Scale, t.Offset = fixedRange(cross, r)
		return t
	}
	mask := Tensor{Name: in(4, "atten_mask"), DType: s.Mask, Dims: []int{1, 1, ar, cl}}
	switch s.Mask {
	case UFixed16:
		mask.Scale, mask.Offset = 255.0/65535, -65535
	case UFixed8:
		mask.Scale, mask.Offset = 1, -255
	}
	var caches, rest []Tensor
	k := 2
	for l := range L {
		kk, vk := k, k+1
		if l == 0 {
			k += 3 // input_4 is the mask
		} else {
			k += 2
		}
		caches = append(caches,
			kv(in(kk, "args_"+strconv.Itoa(l)), l, true, 1, nkv, hd, S),
			kv(in(vk, "args_"+strconv.Itoa(L+l)), l, false, 1, nkv, S, hd))
	}
	if first {
		rest = []Tensor{{Name: in(0, "input_pos"), DType: Int32, Dims: []int{1, ar}},
			{Name: in(1, "tokens"), DType: Int32, Dims: []int{1, ar}}}
	} else {
		rest = []Tensor{crossT(in(0, "hidden_state"), s.HiddenRange, 1, ar, h.Hidden),
			crossT(in(1, "freqs_cos"), 1, ar, hd/2), crossT(in(k, "freqs_sin"), 1, ar, hd/2)}
	}
	g := Graph{Name: name, Kind: kind, Window: ar, KV: s.KV, Inputs: append(append(caches, rest...), mask)}
	for l := range L {
		g.Outputs = append(g.Outputs,
			kv(fmt.Sprintf("output_aten_permute_copy_default_%d_sha_concat@0", 13*(h.FirstLayer+l)+6), l, false, 1, nkv, ar, hd),
			kv(fmt.Sprintf("output_aten_permute_copy_default_%d_sha_concat@0", 13*(h.FirstLayer+l)+7), l, true, 1, nkv, hd, ar))
	}
	if last {
		t := Tensor{Name: "output_aten_squeeze_copy_dims_15@0", DType: s.Logits, Dims: []int{1, ar, h.Vocab}}
		t.Scale, t.Offset = fixedRange(s.Logits, s.LogitsRange)
		g.Outputs = append(g.Outputs, t)
	} else {
		g.Outputs = append(g.Outputs, crossT("output_llama_fallback_default@0", s.HiddenRange, 1, ar, h.Hidden),
			crossT("output_aten_select_copy_int@0", 1, ar, hd/2), crossT("output_aten_select_copy_int_1@0", 1, ar, hd/2))
	}
	return g
}

// ETWeightSpecs lists the weights of shard sh (from ETShard): its layers under shard-local names
// (model.layers.<i − FirstLayer>), the embedding on the first shard, the final norm and lm-head on
// the last. model[i] is weight i's name in the whole model (what to fill it from).
func ETWeightSpecs(sh Hyper, last bool) (ws []Weight, model []string) {
	all := WeightSpecs(Hyper{Hidden: sh.Hidden, Layers: sh.Layers, Heads: sh.Heads, KVHeads: sh.KVHeads,
		HeadDim: sh.HeadDim, FFN: sh.FFN, QKNorm: sh.QKNorm, QKVBias: sh.QKVBias, Scales: sh.Scales}, true, false)
	for _, w := range all {
		name := w.Name
		if l, rest, ok := layerOf(name); ok {
			name = "model.layers." + strconv.Itoa(sh.FirstLayer+l) + rest
		} else if !last { // model.norm.weight
			continue
		}
		ws, model = append(ws, w), append(model, name)
	}
	if sh.FirstLayer == 0 || (last && sh.TiedLMHead) {
		ws = append(ws, Weight{Name: "model.embed_tokens.weight", Rows: sh.Vocab, Cols: sh.Hidden})
		model = append(model, "model.embed_tokens.weight")
	}
	if last && !sh.TiedLMHead {
		ws = append(ws, Weight{Name: "lm_head.weight", Rows: sh.Vocab, Cols: sh.Hidden})
		model = append(model, "lm_head.weight")
	}
	return ws, model
}

// layerOf splits "model.layers.<l><rest>".
func layerOf(name string) (int, string, bool) {
	const p = "model.layers."
	if len(name) <= len(p) || name[:len(p)] != p {
		return 0, "", false
	}
	i := len(p)
	for i < len(name) && name[i] >= '0' && name[i] <= '9' {
		i++
	}
	l, err := strconv.Atoi(name[len(p):i])
	return l, name[i:], err == nil
}

// WriteETShard writes shard i of an ExecuTorch model (whole-model header h) as a context
// binary. fill supplies float16 values of a whole-model tensor, starting at element start.
func WriteETShard(w io.Writer, h Hyper, s ETSpec, i int, f WeightFormat, fill func(name string, start int, dst []uint16) error) error {
	sh, gs, err := ETShard(h, s, i)
	if err != nil {
		return err
	}
	ws, names := etWeights(sh, i)
	return WriteWith(w, sh, gs, ws, Options{Format: f, SourceRows: func(j int, wt Weight, row0 int, dst []uint16) error {
		return fill(names[j], row0*wt.Cols, dst)
	}})
}

// ETShardSize is the size of the context binary WriteETShard writes for shard i.
func ETShardSize(h Hyper, s ETSpec, i int, f WeightFormat) (int64, error) {
	sh, gs, err := ETShard(h, s, i)
	if err != nil {
		return 0, err
	}
	ws, _ := etWeights(sh, i)
	return SizeWith(sh, gs, ws, f)
}

// etWeights is ETWeightSpecs of shard i with, on the first shard of a LongRoPE model, the
// divisors for its context (RopeExtWeight), which that shard's graphs apply.
func etWeights(sh Hyper, i int) ([]Weight, []string) {
	ws, names := ETWeightSpecs(sh, i == sh.Shards-1)
	if ext := sh.Rope.Scaling.Ext(sh.Ctx); i == 0 && ext != nil {
		w := Weight{Name: RopeExtWeight, Rows: 1, Cols: len(ext), F32: make([]float32, len(ext))}
		for j, x := range ext {
			w.F32[j] = float32(x)
		}
		ws, names = append(ws, w), append(names, RopeExtWeight)
	}
	return ws, names
}
