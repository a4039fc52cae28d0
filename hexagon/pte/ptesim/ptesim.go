// Package ptesim writes ExecuTorch static-llama .pte files (docs/executorch-pte.md) whose QNN context
// binaries are hostsim's ExecuTorch graphs (simfile.ETShard): the plans, delegates, fallback copies
// between shards and metadata methods of ExecuTorch's hybrid export, so that hexagon/pte reads them
// like a real export and hostsim runs them. hexserve mkmodel --format pte uses it.
package ptesim

import (
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/pte"
	"github.com/hexserve/hexserve/hexagon/pte/ptewrite"
)

// Write writes the .pte of a whole model (header h) with graphs s. fill supplies float16 values
// of a whole-model tensor starting at element start; progress, if set, is called after each shard.
// meta adds string metadata methods (a marker of generated weights, ...).
// The shards stream into w one after another (their sizes are known beforehand), so memory stays
// flat whatever the model's size.
func Write(w io.Writer, h simfile.Hyper, s simfile.ETSpec, f simfile.WeightFormat,
	fill func(name string, start int, dst []uint16) error, progress func(shard, size int), meta map[string]string) error {
	var ctxs []ptewrite.Context
	for i := range s.Shards {
		size, err := simfile.ETShardSize(h, s, i, f)
		if err != nil {
			return fmt.Errorf("ptesim: shard %d: %w", i, err)
		}
		sig, err := signature(h, s, i, f, fill)
		if err != nil {
			return fmt.Errorf("ptesim: shard %d: %w", i, err)
		}
		ctxs = append(ctxs, ptewrite.Context{Size: size, Signature: sig, Stream: func(w io.Writer) error {
			if err := simfile.WriteETShard(w, h, s, i, f, fill); err != nil {
				return fmt.Errorf("ptesim: shard %d: %w", i, err)
			}
			if progress != nil {
				progress(i, int(size))
			}
			return nil
		}})
	}
	p, err := Program(h, s, nil)
	if err != nil {
		return err
	}
	p.Contexts = ctxs
	for k, v := range meta {
		p.Metadata[k] = []pte.Value{pte.StringValue(v)}
	}
	return ptewrite.Write(w, p)
}

// signature identifies shard i's binary without holding it: an FNV-1a hash of what decides its
// bytes (the header, the graph spec, the weight format) and of the first values fill gives for
// the embedding table, which differ between seeds.
func signature(h simfile.Hyper, s simfile.ETSpec, i int, f simfile.WeightFormat,
	fill func(name string, start int, dst []uint16) error) (int64, error) {
	sample := make([]uint16, 64)
	if err := fill("model.embed_tokens.weight", 0, sample); err != nil {
		return 0, err
	}
	hs := fnv.New64a()
	fmt.Fprintf(hs, "%+v|%+v|%d|%d|%v", h, s, i, f, sample)
	return int64(hs.Sum64() >> 1), nil
}

// scalarOf is the plan-level type of a graph tensor (#19146: plans carry the quantised types).
func scalarOf(d simfile.DType) pte.ScalarType {
	switch d {
	case simfile.UFixed8:
		return pte.Byte
	case simfile.UFixed16:
		return pte.UInt16
	case simfile.Int32:
		return pte.Int
	}
	return pte.Float
}

func tensorValue(t simfile.Tensor) pte.Value {
	sizes := make([]int32, len(t.Dims))
	for i, d := range t.Dims {
		sizes[i] = int32(d)
	}
	return pte.TensorValue(scalarOf(t.DType), sizes...)
}

// inputKey splits a graph input name input_<k>_<node>@0.
func inputKey(name string) (int, string) {
	rest := strings.TrimSuffix(strings.TrimPrefix(name, "input_"), "@0")
	ks, node, _ := strings.Cut(rest, "_")
	k, _ := strconv.Atoi(ks)
	return k, node
}

// Program lays out both methods over the shard contexts bins, as ExecuTorch does: plan
// inputs tokens, atten_mask, input_pos, K caches, V caches; one DelegateCall per shard whose
// args are the delegate's inputs sorted by k, then its outputs in graph order; between shards
// llama::fallback copies of the hidden state, cos and sin; plan outputs logits, new K, new V.
func Program(h simfile.Hyper, s simfile.ETSpec, bins [][]byte) (ptewrite.Program, error) {
	var p ptewrite.Program
	for _, b := range bins {
		p.Contexts = append(p.Contexts, ptewrite.Context{Binary: b})
	}
	opts := pte.HTPOptions(pte.SM8750, pte.V79)
	if s.CrossDType() == simfile.F32 {
		opts.Precision = pte.HtpFp16
	}
	if s.Shards > 1 { // update_spill_fill_size: hostsim needs none, a nominal 1 MiB turns the group config on
		opts.UseMultiContexts, opts.MaxSpillFill = true, 1<<20
	}
	first, _ := simfile.ShardLayers(h.Layers, s.Shards)
	var logitsT simfile.Tensor
	for _, method := range []string{pte.MethodDecode, pte.MethodPrefill} {
		b := &methodBuilder{m: ptewrite.Method{Name: method}, carry: map[string]int32{},
			kin: make([]int32, h.Layers), vin: make([]int32, h.Layers), knew: make([]int32, h.Layers), vnew: make([]int32, h.Layers)}
		for i := range s.Shards {
			_, gs, err := simfile.ETShard(h, s, i)
			if err != nil {
				return p, err
			}
			g := gs[slices.IndexFunc(gs, func(g simfile.Graph) bool { return g.Name == method })]
			if i == 0 {
				b.planInputs(g, h.Layers)
			}
			L := (len(g.Outputs) - 1) / 2
			if i < s.Shards-1 {
				L = (len(g.Outputs) - 3) / 2
			}
			outs := b.call(g, i, first[i], L, opts)
			if i == s.Shards-1 {
				b.logits, logitsT = outs[2*L], g.Outputs[2*L]
				continue
			}
			b.fallback(g, outs, L)
		}
		m := b.m
		m.Inputs = append([]int32{b.tokens, b.mask, b.pos}, append(b.kin, b.vin...)...)
		m.Outputs = append([]int32{b.logits}, append(b.knew, b.vnew...)...)
		p.Methods = append(p.Methods, m)
	}
	p.Metadata = metadata(h, s, logitsT)
	return p, nil
}

// methodBuilder lays out one method: its values and instructions, the plan
// inputs' and outputs' value indexes, and the values carried between shards.
type methodBuilder struct {
	m                    ptewrite.Method
	tokens, mask, pos    int32
	kin, vin, knew, vnew []int32
	carry                map[string]int32 // fallback outputs by the next shard's input name
	logits               int32
}

func (b *methodBuilder) add(v pte.Value) int32 {
	b.m.Values = append(b.m.Values, v)
	return int32(len(b.m.Values) - 1)
}

// planInputs adds the plan inputs, in ExecuTorch's value order: tokens,
// mask, positions, then every layer's K cache and every layer's V cache.
func (b *methodBuilder) planInputs(g simfile.Graph, layers int) {
	byNode := map[string]simfile.Tensor{}
	for _, t := range g.Inputs {
		_, n := inputKey(t.Name)
		byNode[n] = t
	}
	b.tokens, b.mask, b.pos = b.add(tensorValue(byNode["tokens"])), b.add(tensorValue(byNode["atten_mask"])), b.add(tensorValue(byNode["input_pos"]))
	k0, v0 := g.Inputs[0], g.Inputs[1] // layer caches share dims and type
	for l := range layers {
		b.kin[l] = b.add(tensorValue(k0))
	}
	for l := range layers {
		b.vin[l] = b.add(tensorValue(v0))
	}
}

// call adds shard i's DelegateCall (its L layers from first): the inputs
// sorted by key, then its outputs in graph order, which it returns.
func (b *methodBuilder) call(g simfile.Graph, i, first, L int, opts pte.QNNOptions) []int32 {
	type arg struct {
		k int
		v int32
	}
	var args []arg
	for _, t := range g.Inputs {
		k, n := inputKey(t.Name)
		args = append(args, arg{k, b.input(n, first, L)})
	}
	slices.SortFunc(args, func(a, b arg) int { return a.k - b.k })
	call := pte.Instruction{Kind: pte.DelegateCall, Delegate: int32(i)}
	for _, a := range args {
		call.Args = append(call.Args, a.v)
	}
	var outs []int32
	for j, t := range g.Outputs {
		v := b.add(tensorValue(t))
		outs = append(outs, v)
		call.Args = append(call.Args, v)
		switch {
		case j < 2*L && j%2 == 0:
			b.vnew[first+j/2] = v
		case j < 2*L:
			b.knew[first+j/2] = v
		}
	}
	b.m.Instructions = append(b.m.Instructions, call)
	b.m.Delegates = append(b.m.Delegates, ptewrite.Delegate{Context: i, Options: opts})
	return outs
}

// input is the value a shard's input named n reads.
func (b *methodBuilder) input(n string, first, L int) int32 {
	switch {
	case n == "tokens":
		return b.tokens
	case n == "input_pos":
		return b.pos
	case n == "atten_mask":
		return b.mask
	case strings.HasPrefix(n, "args_"):
		j, _ := strconv.Atoi(strings.TrimPrefix(n, "args_"))
		if j < L {
			return b.kin[first+j]
		}
		return b.vin[first+j-L]
	}
	return b.carry[n]
}

// fallback adds the llama::fallback copies of a shard's hidden state, cos
// and sin for the next shard.
func (b *methodBuilder) fallback(g simfile.Graph, outs []int32, L int) {
	b.m.Operators = []pte.Operator{pte.FallbackOp}
	for j, n := range []string{"hidden_state", "freqs_cos", "freqs_sin"} {
		out := b.add(tensorValue(g.Outputs[2*L+j]))
		b.m.Instructions = append(b.m.Instructions, pte.Instruction{Kind: pte.KernelCall, Op: 0, Args: []int32{outs[2*L+j], out, out}})
		b.carry[n] = out
	}
}

// metadata are the constant methods of static_llama.py get_metadata and llm_wrappers.py.
func metadata(h simfile.Hyper, s simfile.ETSpec, logits simfile.Tensor) map[string][]pte.Value {
	iv := func(v int) []pte.Value { return []pte.Value{pte.IntValue(int64(v))} }
	md := map[string][]pte.Value{
		"get_ar_len": iv(1), "get_bos_id": iv(1), "get_eos_id": iv(2), "get_n_bos": iv(1), "get_n_eos": iv(1),
		"get_dim": iv(h.Hidden), "get_head_dim": iv(h.HeadDim), "get_max_batch_size": iv(1),
		"get_max_seq_len": iv(h.Ctx), "get_max_context_len": iv(h.Ctx), "get_n_kv_heads": iv(h.KVHeads),
		"get_n_layers": iv(h.Layers), "get_vocab_size": iv(h.Vocab), "get_use_kv_cache": {pte.BoolValue(true)},
		"get_kv_io_bit_width": iv(8 * s.KV.Size()),
	}
	if s.Logits.Fixed() {
		md["get_logits_scale"] = []pte.Value{pte.DoubleValue(float64(logits.Scale))}
		md["get_logits_zero_point"] = iv(int(-logits.Offset))
	}
	if s.KV.Fixed() {
		first, _ := simfile.ShardLayers(h.Layers, s.Shards)
		for i := range s.Shards {
			sh, gs, _ := simfile.ETShard(h, s, i)
			outs := gs[0].Outputs
			for j := range 2 * sh.Layers { // graph order V0, K0, V1, K1, ...
				t := outs[j]
				qmax, name := 255, "torch.uint8"
				if s.KV == simfile.UFixed16 {
					qmax, name = 65535, "torch.uint16"
				}
				md[fmt.Sprintf("get_kv_output_%d_quant_attr", 2*first[i]+j)] = []pte.Value{pte.DoubleValue(float64(t.Scale)),
					pte.IntValue(int64(-t.Offset)), pte.IntValue(0), pte.IntValue(int64(qmax)), pte.StringValue(name)}
			}
		}
	}
	return md
}
