package executorch

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hexserve/hexserve/hexagon/pte"
	"github.com/hexserve/hexserve/hexagon/qnn"
)

// layout is one method's plan resolved against its graphs' tensors: what
// each instruction binds, which plan values are the tokens, positions, mask
// and caches, and their QNN types. It is pure data (no runtime), so the
// binding rules are tested against recorded tensor tables.
type layout struct {
	method string
	ar, cl int // rows per call, mask columns
	steps  []lstep
	sizes  map[int32]int            // bytes of every plan value an instruction touches
	types  map[int32]qnn.TensorInfo // the graph tensor bound to each value (the last one)

	tokens, pos, mask int32 // plan values
	tokensT, posT     qnn.TensorInfo
	maskT             qnn.TensorInfo
	kIn, vIn          []int32 // per model layer: plan value of the cache input
	kT, vT            qnn.TensorInfo
	kNew, vNew        []int32 // per model layer: plan value of the new entries
	logits            int32
	logitsT           qnn.TensorInfo
}

// lstep is a delegate call (graph execute) or a fallback copy.
type lstep struct {
	delegate int   // index into Method.Delegates, -1 for a copy
	in, out  []arg // delegate: inputs in binary order, outputs in graph order
	from, to int32 // copy: plan values
}

// arg binds a graph tensor to a plan value.
type arg struct {
	t     qnn.TensorInfo
	value int32
}

// inputNode splits a graph input name input_<k>_<node>@<i> into k and node
// (docs/executorch-pte.md §3.1).
func inputNode(name string) (int, string, bool) {
	rest, ok := strings.CutPrefix(name, "input_")
	if !ok {
		return 0, "", false
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[:i]
	}
	ks, node, ok := strings.Cut(rest, "_")
	k, err := strconv.Atoi(ks)
	if !ok || err != nil {
		return 0, "", false
	}
	return k, node, true
}

// resolveMethod binds method m's instructions to the graphs graph(i)
// returns for delegate i (the graph named m.Name in the delegate's context).
// Inputs are matched to DelegateCall args by sorting on k, as ExecuTorch
// does, and given roles by their node names (tokens, input_pos, atten_mask,
// args_j: j < L is layer first+j's K cache, else layer first+j−L's V);
// outputs bind positionally, and the plan's outputs name logits, new K and
// new V by position. Types, dims and quantisation are the graphs'.
func resolveMethod(m *pte.Method, layers int, graph func(delegate int) (qnn.GraphInfo, error)) (*layout, error) {
	l := &layout{method: m.Name, sizes: map[int32]int{}, types: map[int32]qnn.TensorInfo{}, tokens: -1, pos: -1, mask: -1}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("method %s: %s", m.Name, fmt.Sprintf(format, a...))
	}
	if len(m.Outputs) != 1+2*layers {
		return nil, bad("%d plan outputs, want 1 + 2·%d (logits, new K, new V)", len(m.Outputs), layers)
	}
	l.logits, l.kNew, l.vNew = m.Outputs[0], m.Outputs[1:1+layers], m.Outputs[1+layers:]
	l.kIn, l.vIn = make([]int32, layers), make([]int32, layers)
	for i := range layers {
		l.kIn[i], l.vIn[i] = -1, -1
	}
	size := func(v int32, n int) error {
		if v < 0 || int(v) >= len(m.Values) || m.Values[v].Kind != pte.KindTensor {
			return bad("arg %d is not a tensor value", v)
		}
		if old, ok := l.sizes[v]; ok && old != n {
			return bad("value %d is bound as %d and %d bytes", v, old, n)
		}
		l.sizes[v] = n
		return nil
	}
	same := func(what string, have *qnn.TensorInfo, t qnn.TensorInfo) error {
		if have.Name == "" {
			*have = t
			return nil
		}
		if have.DataType != t.DataType || !slices.Equal(have.Dims, t.Dims) || have.Quant.Scale != t.Quant.Scale && what != "K" && what != "V" {
			return bad("%s tensors differ between shards: %s and %s", what, have, t)
		}
		return nil
	}
	role := func(v *int32, want int32, what string) error {
		if *v >= 0 && *v != want {
			return bad("the shards bind %s to different values %d and %d", what, *v, want)
		}
		*v = want
		return nil
	}
	first := 0 // the first model layer of the current shard
	for _, ins := range m.Instructions {
		switch ins.Kind {
		case pte.KernelCall:
			if int(ins.Op) >= len(m.Operators) || m.Operators[ins.Op] != pte.FallbackOp || len(ins.Args) < 2 {
				op := "?"
				if int(ins.Op) < len(m.Operators) {
					op = m.Operators[ins.Op].Name
				}
				return nil, bad("CPU operator %s is not supported (only %s.%s, the identity copy between shards)", op, pte.FallbackOp.Name, pte.FallbackOp.Overload)
			}
			l.steps = append(l.steps, lstep{delegate: -1, from: ins.Args[0], to: ins.Args[1]})
		case pte.DelegateCall:
			g, err := graph(int(ins.Delegate))
			if err != nil {
				return nil, bad("delegate %d: %v", ins.Delegate, err)
			}
			if len(ins.Args) != len(g.Inputs)+len(g.Outputs) {
				return nil, bad("delegate %d: %d args for a graph of %d inputs and %d outputs", ins.Delegate, len(ins.Args), len(g.Inputs), len(g.Outputs))
			}
			type keyed struct {
				k    int
				node string
				t    qnn.TensorInfo
			}
			var ks []keyed
			for _, t := range g.Inputs {
				k, node, ok := inputNode(t.Name)
				if !ok {
					return nil, bad("delegate %d: input %q is not named input_<k>_<node>", ins.Delegate, t.Name)
				}
				ks = append(ks, keyed{k, node, t})
			}
			sorted := slices.Clone(ks)
			slices.SortStableFunc(sorted, func(a, b keyed) int { return a.k - b.k })
			bound := map[string]int32{}
			nargs := 0
			for _, c := range ks {
				if strings.HasPrefix(c.node, "args_") {
					nargs++
				}
			}
			if nargs%2 != 0 || first+nargs/2 > layers {
				return nil, bad("delegate %d: %d cache inputs (args_j) do not make whole layers of %d", ins.Delegate, nargs, layers)
			}
			L := nargs / 2
			for i, c := range sorted {
				v := ins.Args[i]
				bound[c.t.Name] = v
				if err := size(v, c.t.Bytes()); err != nil {
					return nil, err
				}
				l.types[v] = c.t
				switch {
				case c.node == "tokens":
					if err := role(&l.tokens, v, "tokens"); err != nil {
						return nil, err
					}
					if err := same("tokens", &l.tokensT, c.t); err != nil {
						return nil, err
					}
				case c.node == "input_pos":
					if err := role(&l.pos, v, "input_pos"); err != nil {
						return nil, err
					}
					if err := same("input_pos", &l.posT, c.t); err != nil {
						return nil, err
					}
				case c.node == "atten_mask":
					if err := role(&l.mask, v, "atten_mask"); err != nil {
						return nil, err
					}
					if err := same("atten_mask", &l.maskT, c.t); err != nil {
						return nil, err
					}
				case strings.HasPrefix(c.node, "args_"):
					j, err := strconv.Atoi(strings.TrimPrefix(c.node, "args_"))
					if err != nil || j < 0 || j >= 2*L {
						return nil, bad("delegate %d: input %q: args index out of range 0..%d", ins.Delegate, c.t.Name, 2*L-1)
					}
					if j < L {
						l.kIn[first+j] = v
						if err := same("K", &l.kT, c.t); err != nil {
							return nil, err
						}
					} else {
						l.vIn[first+j-L] = v
						if err := same("V", &l.vT, c.t); err != nil {
							return nil, err
						}
					}
				}
			}
			st := lstep{delegate: int(ins.Delegate)}
			for _, t := range g.Inputs {
				st.in = append(st.in, arg{t, bound[t.Name]})
			}
			for i, t := range g.Outputs {
				v := ins.Args[len(g.Inputs)+i]
				if err := size(v, t.Bytes()); err != nil {
					return nil, err
				}
				l.types[v] = t
				st.out = append(st.out, arg{t, v})
				if v == l.logits {
					l.logitsT = t
				}
			}
			l.steps = append(l.steps, st)
			first += L
		default:
			return nil, bad("instruction %s is not supported", ins.Kind)
		}
	}
	// Copies: both ends take the size of whichever a delegate binds.
	for _, s := range l.steps {
		if s.delegate >= 0 {
			continue
		}
		n, ok := l.sizes[s.from]
		if !ok {
			n, ok = l.sizes[s.to]
		}
		if !ok {
			return nil, bad("fallback copy %d → %d touches no graph tensor", s.from, s.to)
		}
		if err := size(s.from, n); err != nil {
			return nil, err
		}
		if err := size(s.to, n); err != nil {
			return nil, err
		}
	}
	switch {
	case first != layers:
		return nil, bad("the delegates hold %d layers' caches, the model has %d", first, layers)
	case l.tokens < 0 || l.pos < 0 || l.mask < 0:
		return nil, bad("no graph input named tokens, input_pos and atten_mask")
	case l.logitsT.Name == "":
		return nil, bad("no delegate produces the logits (plan output 0)")
	}
	for i := range layers {
		if l.kIn[i] < 0 || l.vIn[i] < 0 {
			return nil, bad("layer %d has no K or V cache input", i)
		}
		for _, p := range [][2]int32{{l.kIn[i], l.kNew[i]}, {l.vIn[i], l.vNew[i]}} {
			in, out := l.types[p[0]], l.types[p[1]]
			if out.Name == "" {
				return nil, bad("plan output value %d (layer %d) is not a graph output", p[1], i)
			}
			// New entries are copied into the cache as raw codes.
			if in.DataType != out.DataType || in.Quant.Scale != out.Quant.Scale || in.Quant.Offset != out.Quant.Offset {
				return nil, bad("layer %d: output %s (%s, scale %g, offset %d) is not quantised like its cache input %s (%s, scale %g, offset %d)",
					i, out.Name, out.DataType, out.Quant.Scale, out.Quant.Offset, in.Name, in.DataType, in.Quant.Scale, in.Quant.Offset)
			}
		}
	}
	md := l.maskT.Dims
	if len(md) < 2 {
		return nil, bad("atten_mask has dims %v, want [..., AR, CL]", md)
	}
	l.ar, l.cl = int(md[len(md)-2]), int(md[len(md)-1])
	if l.tokensT.Elements() != l.ar || l.posT.Elements() != l.ar {
		return nil, bad("tokens %v and input_pos %v do not hold the mask's %d rows", l.tokensT.Dims, l.posT.Dims, l.ar)
	}
	for _, t := range []qnn.TensorInfo{l.tokensT, l.posT} {
		if t.DataType != qnn.Int32 && t.DataType != qnn.Uint32 {
			return nil, bad("input %s is %s; tokens and positions must be 32-bit integers", t.Name, t.DataType)
		}
	}
	if len(l.kT.Dims) != 4 || len(l.vT.Dims) != 4 {
		return nil, bad("caches have dims %v and %v, want K [1, n_kv, hd, S] and V [1, n_kv, S, hd]", l.kT.Dims, l.vT.Dims)
	}
	nkv, hd, S := int(l.kT.Dims[1]), int(l.kT.Dims[2]), int(l.kT.Dims[3])
	if int(l.vT.Dims[1]) != nkv || int(l.vT.Dims[2]) != S || int(l.vT.Dims[3]) != hd {
		return nil, bad("V cache %v does not match K cache %v (want [1, %d, %d, %d])", l.vT.Dims, l.kT.Dims, nkv, S, hd)
	}
	if S != l.cl-l.ar {
		return nil, bad("caches hold %d slots, want CL − AR = %d − %d", S, l.cl, l.ar)
	}
	if l.kT.DataType != l.vT.DataType || l.kT.DataType.Size() == 0 {
		return nil, bad("K cache %s and V cache %s must share one whole-byte type", l.kT.DataType, l.vT.DataType)
	}
	es := l.kT.DataType.Size()
	for i := range layers {
		if l.sizes[l.kNew[i]] != nkv*hd*l.ar*es || l.sizes[l.vNew[i]] != nkv*hd*l.ar*es {
			return nil, bad("layer %d: new entries of %d and %d bytes, want n_kv·hd·AR·%d = %d", i,
				l.sizes[l.kNew[i]], l.sizes[l.vNew[i]], es, nkv*hd*l.ar*es)
		}
	}
	if ld := l.logitsT.Dims; len(ld) < 2 || int(ld[len(ld)-2]) != l.ar {
		return nil, bad("logits %v do not hold one row per token (%d)", ld, l.ar)
	}
	return l, nil
}

// shape is what both methods must agree on.
func (l *layout) shape() (nkv, hd, vocab int) {
	ld := l.logitsT.Dims
	return int(l.kT.Dims[1]), int(l.kT.Dims[2]), int(ld[len(ld)-1])
}
