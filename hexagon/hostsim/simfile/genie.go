package simfile

import (
	"fmt"
	"io"
	"strconv"
)

// GenieSpec describes the graphs of a Qualcomm AI Hub Genie export (docs/genie.md): per part, a
// prompt graph of PromptAR rows and a token graph of 1 row, weight-shared in one context binary,
// over a KV cache of Ctx − AR past slots per graph. Part 1 is the embedding lookup, the later parts
// carry the layers (split as evenly as possible, earlier parts taking the remainder) and the last
// ends in the final norm, the lm-head and logits.
type GenieSpec struct {
	PromptAR int
	Parts    int   // ≥ 2
	Act      DType // hidden state, mask, cos/sin and logits: UFixed16 (w4a16), F16 (w4) or F32
	KV       DType // UFixed8 (w4a16), F16 (w4) or F32
	// KRange and VRange are per model layer (fixed-point KV only); HiddenRange and LogitsRange
	// the symmetric ranges of the hidden state and logits (fixed-point activations only).
	KRange, VRange           []float32
	HiddenRange, LogitsRange float32
}

// GenieMaskScale and GenieMaskOffset are the uint16 attention mask's encoding: the calibrated
// range [−50, 0], so code 65535 is 0.0 (attend) and code 0 is −50 (masked), the codes Genie writes.
const (
	GenieMaskScale  = float32(50.0 / 65535)
	GenieMaskOffset = -65535
)

// GenieGraphName is AI Hub's graph name (qai_hub_models llm/model.py get_qnn_context_graph_name).
func GenieGraphName(prompt bool, ar, cl, part, parts int) string {
	kind := "token"
	if prompt {
		kind = "prompt"
	}
	return fmt.Sprintf("%s_ar%d_cl%d_%d_of_%d", kind, ar, cl, part, parts)
}

// GenieLayers returns each part's first model layer and layer count: part 0 none (the
// embedding), the layers spread over the others; with one part more than layers+1 the last
// part holds only the final norm and the lm-head.
func GenieLayers(layers, parts int) (first, count []int) {
	n := min(parts-1, layers)
	f, c := ShardLayers(layers, n)
	first, count = append([]int{0}, f...), append([]int{0}, c...)
	if parts-1 > layers {
		first, count = append(first, layers), append(count, 0)
	}
	return first, count
}

// GenieHidden is the name of the hidden state part k (0-based) outputs: the ONNX name with / and
// . replaced by _ (AI Hub's onnxruntime_genai.py prepare_onnx_specs).
func GenieHidden(h Hyper, parts, k int) string {
	if k == 0 {
		return "_model_model_embed_tokens_Gather_output_0"
	}
	first, count := GenieLayers(h.Layers, parts)
	return "_model_model_layers_" + strconv.Itoa(first[k]+count[k]-1) + "_Add_1_output_0"
}

func (s GenieSpec) validate(h Hyper) error {
	switch {
	case s.PromptAR < 2 || s.PromptAR >= h.Ctx:
		return fmt.Errorf("simfile: prompt AR %d must be in [2, ctx %d)", s.PromptAR, h.Ctx)
	case s.Parts < 2 || s.Parts > h.Layers+2:
		return fmt.Errorf("simfile: %d parts for %d layers (want 2 to layers+2)", s.Parts, h.Layers)
	case s.Act != UFixed16 && s.Act != F16 && s.Act != F32:
		return fmt.Errorf("simfile: activation data type %#x (want u16, f16 or f32)", uint32(s.Act))
	case s.KV != UFixed8 && s.KV != F16 && s.KV != F32:
		return fmt.Errorf("simfile: KV data type %#x (want u8, f16 or f32)", uint32(s.KV))
	case s.KV.Fixed() && (len(s.KRange) != h.Layers || len(s.VRange) != h.Layers):
		return fmt.Errorf("simfile: fixed-point KV needs a K and V range per layer")
	}
	return nil
}

// GeniePart returns part k's (0-based) header (Layers = its layer count, FirstLayer, Shards =
// parts) and its two graphs, prompt then token. h is the whole model's.
func GeniePart(h Hyper, s GenieSpec, k int) (Hyper, []Graph, error) {
	if err := s.validate(h); err != nil {
		return Hyper{}, nil, err
	}
	if k < 0 || k >= s.Parts {
		return Hyper{}, nil, fmt.Errorf("simfile: part %d of %d", k, s.Parts)
	}
	first, count := GenieLayers(h.Layers, s.Parts)
	sh := h
	sh.FirstLayer, sh.Layers, sh.Shards = first[k], count[k], s.Parts
	return sh, []Graph{genieGraph(h, sh, s, k, s.PromptAR), genieGraph(h, sh, s, k, 1)}, nil
}

func genieGraph(h, sh Hyper, s GenieSpec, k, ar int) Graph {
	cl, nkv, hd := h.Ctx, h.KVHeads, h.HeadDim
	p := cl - ar
	act := func(name string, r float32, dims ...int) Tensor {
		t := Tensor{Name: name, DType: s.Act, Dims: dims}
		t.Scale, t.Offset = fixedRange(s.Act, r)
		return t
	}
	kv := func(name string, r []float32, l int, dims ...int) Tensor {
		t := Tensor{Name: name, DType: s.KV, Dims: dims}
		if s.KV.Fixed() {
			t.Scale, t.Offset = fixedRange(s.KV, r[l])
		}
		return t
	}
	g := Graph{Name: GenieGraphName(ar > 1, ar, cl, k+1, s.Parts), Kind: Genie, Window: ar, KV: s.KV}
	if k == 0 {
		g.Inputs = []Tensor{{Name: "input_ids", DType: Int32, Dims: []int{1, ar}}}
		g.Outputs = []Tensor{act(GenieHidden(h, s.Parts, 0), s.HiddenRange, 1, ar, h.Hidden)}
		return g
	}
	if sh.Layers == 0 { // the head-only last part
		g.Inputs = []Tensor{act(GenieHidden(h, s.Parts, k-1), s.HiddenRange, 1, ar, h.Hidden)}
		g.Outputs = []Tensor{act("logits", s.LogitsRange, 1, ar, h.Vocab)}
		return g
	}
	af := float32(h.Rope.Scaling.Attention()) // LongRoPE's cos/sin reach ± its attention factor
	mask := Tensor{Name: "attention_mask", DType: s.Act, Dims: []int{1, 1, ar, cl}}
	if s.Act.Fixed() {
		mask.Scale, mask.Offset = GenieMaskScale, GenieMaskOffset
	}
	g.Inputs = []Tensor{act(GenieHidden(h, s.Parts, k-1), s.HiddenRange, 1, ar, h.Hidden), mask,
		act("position_ids_cos", af, 1, 1, ar, hd/2), act("position_ids_sin", af, 1, 1, ar, hd/2)}
	for i := range sh.Layers {
		l := sh.FirstLayer + i
		ls := strconv.Itoa(l)
		g.Inputs = append(g.Inputs, kv("past_key_"+ls+"_in", s.KRange, l, nkv, 1, hd, p),
			kv("past_value_"+ls+"_in", s.VRange, l, nkv, 1, p, hd))
		g.Outputs = append(g.Outputs, kv("past_key_"+ls+"_out", s.KRange, l, nkv, 1, hd, ar),
			kv("past_value_"+ls+"_out", s.VRange, l, nkv, 1, ar, hd))
	}
	if k == s.Parts-1 {
		g.Outputs = append(g.Outputs, act("logits", s.LogitsRange, 1, ar, h.Vocab))
	} else {
		g.Outputs = append(g.Outputs, act(GenieHidden(h, s.Parts, k), s.HiddenRange, 1, ar, h.Hidden))
	}
	return g
}

// WriteGeniePart writes part k (0-based) of a Genie model (whole-model header h) as a context
// binary. fill supplies float16 values of a whole-model tensor, starting at element start.
func WriteGeniePart(w io.Writer, h Hyper, s GenieSpec, k int, f WeightFormat, fill func(name string, start int, dst []uint16) error) error {
	sh, gs, err := GeniePart(h, s, k)
	if err != nil {
		return err
	}
	var ws []Weight
	var names []string
	if k == 0 {
		ws, names = []Weight{{Name: "model.embed_tokens.weight", Rows: h.Vocab, Cols: h.Hidden}}, []string{"model.embed_tokens.weight"}
	} else {
		ws, names = ETWeightSpecs(sh, k == s.Parts-1)
		if sh.FirstLayer == 0 && !(k == s.Parts-1 && sh.TiedLMHead) { // ETWeightSpecs' first shard embeds; a Genie layer part does not
			for i, n := range names {
				if n == "model.embed_tokens.weight" {
					ws, names = append(ws[:i:i], ws[i+1:]...), append(names[:i:i], names[i+1:]...)
					break
				}
			}
		}
	}
	return WriteWith(w, sh, gs, ws, Options{Format: f, SourceRows: func(j int, wt Weight, row0 int, dst []uint16) error {
		return fill(names[j], row0*wt.Cols, dst)
	}})
}
