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
	bound             int // model layers whose caches the delegates bind
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
// returns for delegate i (the graph named m.Name in the delegate's context)
// and checks the result: bindMethod, then layout.check.
func resolveMethod(m *pte.Method, layers int, graph func(delegate int) (qnn.GraphInfo, error)) (*layout, error) {
	l, err := bindMethod(m, layers, graph)
	if err != nil {
		return nil, err
	}
	if err := l.check(layers); err != nil {
		return nil, err
	}
	return l, nil
}

// binder builds one method's layout, instruction by instruction.
type binder struct {
	m      *pte.Method
	layers int
	l      *layout
}

// bindMethod is the binder: inputs are matched to DelegateCall args by
// sorting on k, as ExecuTorch does, and given roles by their node names
// (tokens, input_pos, atten_mask, args_j: j < L is layer first+j's K cache,
// else layer first+j−L's V); outputs bind positionally, and the plan's
// outputs name logits, new K and new V by position; fallback copies take
// the size of the value a delegate binds at either end. Types, dims and
// quantisation are the graphs'. It checks only what binding needs: the
// layout as a whole is layout.check's.
func bindMethod(m *pte.Method, layers int, graph func(delegate int) (qnn.GraphInfo, error)) (*layout, error) {
	b := &binder{m: m, layers: layers,
		l: &layout{method: m.Name, sizes: map[int32]int{}, types: map[int32]qnn.TensorInfo{}, tokens: -1, pos: -1, mask: -1}}
	l := b.l
	if len(m.Outputs) != 1+2*layers {
		return nil, b.errf("%d plan outputs, want 1 + 2·%d (logits, new K, new V)", len(m.Outputs), layers)
	}
	l.logits, l.kNew, l.vNew = m.Outputs[0], m.Outputs[1:1+layers], m.Outputs[1+layers:]
	l.kIn, l.vIn = make([]int32, layers), make([]int32, layers)
	for i := range layers {
		l.kIn[i], l.vIn[i] = -1, -1
	}
	for _, ins := range m.Instructions {
		var err error
		switch ins.Kind {
		case pte.KernelCall:
			err = b.kernel(ins)
		case pte.DelegateCall:
			err = b.delegate(ins, graph)
		default:
			err = b.errf("instruction %s is not supported", ins.Kind)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := b.sizeCopies(); err != nil {
		return nil, err
	}
	return l, nil
}

func (b *binder) errf(format string, a ...any) error {
	return fmt.Errorf("method %s: %s", b.m.Name, fmt.Sprintf(format, a...))
}

// size records that value v is bound as n bytes.
func (b *binder) size(v int32, n int) error {
	m := b.m
	if v < 0 || int(v) >= len(m.Values) || m.Values[v].Kind != pte.KindTensor {
		return b.errf("arg %d is not a tensor value", v)
	}
	if old, ok := b.l.sizes[v]; ok && old != n {
		return b.errf("value %d is bound as %d and %d bytes", v, old, n)
	}
	b.l.sizes[v] = n
	return nil
}

// same records t as the tensor of a role, or checks it against the one an
// earlier shard bound (K and V scales differ per layer).
func (b *binder) same(what string, have *qnn.TensorInfo, t qnn.TensorInfo) error {
	if have.Name == "" {
		*have = t
		return nil
	}
	if have.DataType != t.DataType || !slices.Equal(have.Dims, t.Dims) || have.Quant.Scale != t.Quant.Scale && what != "K" && what != "V" {
		return b.errf("%s tensors differ between shards: %s and %s", what, have, t)
	}
	return nil
}

// role binds plan value want to a role, which every shard must bind alike.
func (b *binder) role(v *int32, want int32, what string, have *qnn.TensorInfo, t qnn.TensorInfo) error {
	if *v >= 0 && *v != want {
		return b.errf("the shards bind %s to different values %d and %d", what, *v, want)
	}
	*v = want
	return b.same(what, have, t)
}

// kernel adds a fallback copy (the only CPU operator there is).
func (b *binder) kernel(ins pte.Instruction) error {
	m := b.m
	if int(ins.Op) >= len(m.Operators) || m.Operators[ins.Op] != pte.FallbackOp || len(ins.Args) < 2 {
		op := "?"
		if int(ins.Op) < len(m.Operators) {
			op = m.Operators[ins.Op].Name
		}
		return b.errf("CPU operator %s is not supported (only %s.%s, the identity copy between shards)", op, pte.FallbackOp.Name, pte.FallbackOp.Overload)
	}
	b.l.steps = append(b.l.steps, lstep{delegate: -1, from: ins.Args[0], to: ins.Args[1]})
	return nil
}

// keyed is a graph input with the k and node of its name.
type keyed struct {
	k    int
	node string
	t    qnn.TensorInfo
}

// delegate binds one DelegateCall: its inputs sorted by k to the first
// args, its outputs in graph order to the rest; the shard's caches are the
// model layers after those earlier shards bound.
func (b *binder) delegate(ins pte.Instruction, graph func(delegate int) (qnn.GraphInfo, error)) error {
	l := b.l
	g, err := graph(int(ins.Delegate))
	if err != nil {
		return b.errf("delegate %d: %v", ins.Delegate, err)
	}
	if len(ins.Args) != len(g.Inputs)+len(g.Outputs) {
		return b.errf("delegate %d: %d args for a graph of %d inputs and %d outputs", ins.Delegate, len(ins.Args), len(g.Inputs), len(g.Outputs))
	}
	var ks []keyed
	nargs := 0
	for _, t := range g.Inputs {
		k, node, ok := inputNode(t.Name)
		if !ok {
			return b.errf("delegate %d: input %q is not named input_<k>_<node>", ins.Delegate, t.Name)
		}
		ks = append(ks, keyed{k, node, t})
		if strings.HasPrefix(node, "args_") {
			nargs++
		}
	}
	if nargs%2 != 0 || l.bound+nargs/2 > b.layers {
		return b.errf("delegate %d: %d cache inputs (args_j) do not make whole layers of %d", ins.Delegate, nargs, b.layers)
	}
	sorted := slices.Clone(ks)
	slices.SortStableFunc(sorted, func(a, b keyed) int { return a.k - b.k })
	bound := map[string]int32{}
	for i, c := range sorted {
		v := ins.Args[i]
		bound[c.t.Name] = v
		if err := b.input(int(ins.Delegate), c, v, nargs/2); err != nil {
			return err
		}
	}
	st := lstep{delegate: int(ins.Delegate)}
	for _, t := range g.Inputs {
		st.in = append(st.in, arg{t, bound[t.Name]})
	}
	for i, t := range g.Outputs {
		v := ins.Args[len(g.Inputs)+i]
		if err := b.size(v, t.Bytes()); err != nil {
			return err
		}
		l.types[v] = t
		st.out = append(st.out, arg{t, v})
		if v == l.logits {
			l.logitsT = t
		}
	}
	l.steps = append(l.steps, st)
	l.bound += nargs / 2
	return nil
}

// input binds graph input c to plan value v and gives it its role; L is the
// shard's layer count.
func (b *binder) input(delegate int, c keyed, v int32, L int) error {
	l := b.l
	if err := b.size(v, c.t.Bytes()); err != nil {
		return err
	}
	l.types[v] = c.t
	switch {
	case c.node == "tokens":
		return b.role(&l.tokens, v, "tokens", &l.tokensT, c.t)
	case c.node == "input_pos":
		return b.role(&l.pos, v, "input_pos", &l.posT, c.t)
	case c.node == "atten_mask":
		return b.role(&l.mask, v, "atten_mask", &l.maskT, c.t)
	case strings.HasPrefix(c.node, "args_"):
		j, err := strconv.Atoi(strings.TrimPrefix(c.node, "args_"))
		if err != nil || j < 0 || j >= 2*L {
			return b.errf("delegate %d: input %q: args index out of range 0..%d", delegate, c.t.Name, 2*L-1)
		}
		if j < L {
			l.kIn[l.bound+j] = v
			return b.same("K", &l.kT, c.t)
		}
		l.vIn[l.bound+j-L] = v
		return b.same("V", &l.vT, c.t)
	}
	return nil
}

// sizeCopies sizes the fallback copies: both ends take the size of
// whichever a delegate binds.
func (b *binder) sizeCopies() error {
	for _, s := range b.l.steps {
		if s.delegate >= 0 {
			continue
		}
		n, ok := b.l.sizes[s.from]
		if !ok {
			n, ok = b.l.sizes[s.to]
		}
		if !ok {
			return b.errf("fallback copy %d → %d touches no graph tensor", s.from, s.to)
		}
		if err := b.size(s.from, n); err != nil {
			return err
		}
		if err := b.size(s.to, n); err != nil {
			return err
		}
	}
	return nil
}

// check validates a bound layout for a model of layers layers and derives
// AR and CL from the mask: every layer has both caches, quantised like its
// new entries (they are copied as raw codes); tokens, positions and the
// mask exist and agree on AR; the caches are K [1, n_kv, hd, S] and V
// [1, n_kv, S, hd] of one type with S = CL − AR; the new entries hold AR
// slots and the logits one row per token.
func (l *layout) check(layers int) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("method %s: %s", l.method, fmt.Sprintf(format, a...))
	}
	switch {
	case l.bound != layers:
		return bad("the delegates hold %d layers' caches, the model has %d", l.bound, layers)
	case l.tokens < 0 || l.pos < 0 || l.mask < 0:
		return bad("no graph input named tokens, input_pos and atten_mask")
	case l.logitsT.Name == "":
		return bad("no delegate produces the logits (plan output 0)")
	}
	if err := l.checkCaches(layers, bad); err != nil {
		return err
	}
	md := l.maskT.Dims
	if len(md) < 2 {
		return bad("atten_mask has dims %v, want [..., AR, CL]", md)
	}
	l.ar, l.cl = int(md[len(md)-2]), int(md[len(md)-1])
	if l.tokensT.Elements() != l.ar || l.posT.Elements() != l.ar {
		return bad("tokens %v and input_pos %v do not hold the mask's %d rows", l.tokensT.Dims, l.posT.Dims, l.ar)
	}
	for _, t := range []qnn.TensorInfo{l.tokensT, l.posT} {
		if t.DataType != qnn.Int32 && t.DataType != qnn.Uint32 {
			return bad("input %s is %s; tokens and positions must be 32-bit integers", t.Name, t.DataType)
		}
	}
	if err := l.checkShapes(layers, bad); err != nil {
		return err
	}
	if ld := l.logitsT.Dims; len(ld) < 2 || int(ld[len(ld)-2]) != l.ar {
		return bad("logits %v do not hold one row per token (%d)", ld, l.ar)
	}
	return nil
}

// checkCaches: every layer has both cache inputs, and its new entries are
// graph outputs quantised like them.
func (l *layout) checkCaches(layers int, bad func(string, ...any) error) error {
	for i := range layers {
		if l.kIn[i] < 0 || l.vIn[i] < 0 {
			return bad("layer %d has no K or V cache input", i)
		}
		for _, p := range [][2]int32{{l.kIn[i], l.kNew[i]}, {l.vIn[i], l.vNew[i]}} {
			in, out := l.types[p[0]], l.types[p[1]]
			if out.Name == "" {
				return bad("plan output value %d (layer %d) is not a graph output", p[1], i)
			}
			// New entries are copied into the cache as raw codes.
			if in.DataType != out.DataType || in.Quant.Scale != out.Quant.Scale || in.Quant.Offset != out.Quant.Offset {
				return bad("layer %d: output %s (%s, scale %g, offset %d) is not quantised like its cache input %s (%s, scale %g, offset %d)",
					i, out.Name, out.DataType, out.Quant.Scale, out.Quant.Offset, in.Name, in.DataType, in.Quant.Scale, in.Quant.Offset)
			}
		}
	}
	return nil
}

// checkShapes: the cache dims and type, and the new entries' sizes.
func (l *layout) checkShapes(layers int, bad func(string, ...any) error) error {
	if len(l.kT.Dims) != 4 || len(l.vT.Dims) != 4 {
		return bad("caches have dims %v and %v, want K [1, n_kv, hd, S] and V [1, n_kv, S, hd]", l.kT.Dims, l.vT.Dims)
	}
	nkv, hd, S := int(l.kT.Dims[1]), int(l.kT.Dims[2]), int(l.kT.Dims[3])
	if int(l.vT.Dims[1]) != nkv || int(l.vT.Dims[2]) != S || int(l.vT.Dims[3]) != hd {
		return bad("V cache %v does not match K cache %v (want [1, %d, %d, %d])", l.vT.Dims, l.kT.Dims, nkv, S, hd)
	}
	if S != l.cl-l.ar {
		return bad("caches hold %d slots, want CL − AR = %d − %d", S, l.cl, l.ar)
	}
	if l.kT.DataType != l.vT.DataType || l.kT.DataType.Size() == 0 {
		return bad("K cache %s and V cache %s must share one whole-byte type", l.kT.DataType, l.vT.DataType)
	}
	es := l.kT.DataType.Size()
	for i := range layers {
		if l.sizes[l.kNew[i]] != nkv*hd*l.ar*es || l.sizes[l.vNew[i]] != nkv*hd*l.ar*es {
			return bad("layer %d: new entries of %d and %d bytes, want n_kv·hd·AR·%d = %d", i,
				l.sizes[l.kNew[i]], l.sizes[l.vNew[i]], es, nkv*hd*l.ar*es)
		}
	}
	return nil
}

// shape is what both methods must agree on.
func (l *layout) shape() (nkv, hd, vocab int) {
	ld := l.logitsT.Dims
	return int(l.kT.Dims[1]), int(l.kT.Dims[2]), int(ld[len(ld)-1])
}
