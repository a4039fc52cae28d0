package qhexrt

import (
	"fmt"
	"path/filepath"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/qhexrt/bundle"
	"github.com/hexserve/hexserve/hexagon/qnn"
)

// checker collects binding problems for one graph.
type checker struct {
	g        *graphIO
	problems *[]string
}

func (c checker) addf(format string, args ...any) {
	*c.problems = append(*c.problems, fmt.Sprintf("%s graph %q: ", filepath.Base(c.g.ref.file), c.g.ref.name)+fmt.Sprintf(format, args...))
}

// tensor finds an input (or output) by name and checks its element count.
func (c checker) tensor(output bool, name string, want int, shape string) *graphio.Tensor {
	list, kind := c.g.info.Inputs, "input"
	if output {
		list, kind = c.g.info.Outputs, "output"
	}
	ti, ok := graphio.Find(list, name)
	if !ok {
		c.addf("no %s %q %s (it has %s)", kind, name, shape, graphio.Names(list))
		return nil
	}
	if want > 0 && ti.Elements() != want {
		c.addf("%s %q has dims %v, want %s", kind, name, ti.Dims, shape)
		return nil
	}
	et, err := graphio.ElemOf(ti)
	if err == nil && !et.Quantized() && et.Type != qnn.Float32 && et.Type != qnn.Float16 && et.Type != qnn.Uint16 {
		err = fmt.Errorf("unsupported data type %s", et)
	}
	if err != nil {
		c.addf("%s %q: %v", kind, name, err)
		return nil
	}
	return &graphio.Tensor{Info: ti, Elem: et}
}

// bindTensors is the binding step, pure (no runtime, no buffers): it
// resolves every tensor the runner binds in the graphs' binary-info tables
// (gs[role].info) against the bundle's spec, sets each graphIO's tensors
// (info and type) and masks, and returns the prefill window, the KV cache's
// element type and every problem found (each naming the file, the graph and
// the tensor).
func bindTensors(s *spec, gs [nRoles]*graphIO) (window int, kvET graphio.Elem, problems []string) {
	pre, dec := gs[rolePrefill], gs[roleDecode]
	window = prefillWindow(s, pre, &problems)
	for _, g := range []*graphIO{pre, dec} {
		bindBody(s, g, window, &problems)
		if g.role == roleDecode || s.contract == ContractChunked {
			bindPast(s, g, &kvET, &problems)
		}
	}
	// new_k/new_v rows are copied into the cache as they are.
	if kvET.Type != 0 {
		for _, g := range []*graphIO{pre, dec} {
			c := checker{g, &problems}
			for _, t := range append(append([]*graphio.Tensor(nil), g.newK...), g.newV...) {
				if t != nil && !t.Elem.Same(kvET) {
					c.addf("output %q is %s, the KV cache (past inputs) is %s", t.Info.Name, t.Elem, kvET)
				}
			}
		}
	}
	bindLMHead(s, gs[roleLMHead], &problems)
	return window, kvET, problems
}

// prefillWindow is the prefill window: the spec's, which the prefill
// graph's x must match, or else the one x's dims give.
func prefillWindow(s *spec, pre *graphIO, problems *[]string) int {
	window := s.window
	for _, ti := range pre.info.Inputs {
		if ti.Name == s.names.X {
			if ar := ti.Elements() / s.hidden; window == 0 {
				window = ar
			} else if ar != window {
				*problems = append(*problems, fmt.Sprintf("%s graph %q: input %q has dims %v: prefill_window %d wants [%d, %d]",
					filepath.Base(pre.ref.file), pre.ref.name, ti.Name, ti.Dims, window, window, s.hidden))
			}
		}
	}
	return max(window, 1)
}

// bindBody binds a prefill or decode graph's x, cos, sin, mask, y and new
// K/V.
func bindBody(s *spec, g *graphIO, ar int, problems *[]string) {
	c := checker{g, problems}
	h, d, kv, ctxLen := s.hidden, s.headDim, s.kvDim, s.ctx
	rows := 1
	maskN, maskShape := ctxLen, fmt.Sprintf("[%d]", ctxLen)
	if g.role == rolePrefill {
		rows = ar
		maskN, maskShape = ar*ar, fmt.Sprintf("[%d, %d]", ar, ar)
		if s.contract == ContractChunked {
			maskN, maskShape = ar*(ctxLen+ar), fmt.Sprintf("[%d, %d]", ar, ctxLen+ar)
		}
	}
	g.rows = rows
	g.x = c.tensor(false, s.names.X, rows*h, fmt.Sprintf("[%d, %d]", rows, h))
	g.cos = c.tensor(false, s.names.Cos, rows*d, fmt.Sprintf("[%d, %d]", rows, d))
	g.sin = c.tensor(false, s.names.Sin, rows*d, fmt.Sprintf("[%d, %d]", rows, d))
	g.mask = c.tensor(false, s.names.CMask, maskN, maskShape)
	g.y = c.tensor(true, s.names.Y, rows*h, fmt.Sprintf("[%d, %d]", rows, h))
	for i := range s.layers {
		g.newK = append(g.newK, c.tensor(true, bundle.Layer(s.names.NewK, i), rows*kv, fmt.Sprintf("[%d, %d]", rows, kv)))
		g.newV = append(g.newV, c.tensor(true, bundle.Layer(s.names.NewV, i), rows*kv, fmt.Sprintf("[%d, %d]", rows, kv)))
	}
	if g.cos != nil && g.sin != nil && !g.cos.Elem.Same(g.sin.Elem) {
		c.addf("inputs %q and %q have different types %s and %s", s.names.Cos, s.names.Sin, g.cos.Elem, g.sin.Elem)
	}
	if g.mask != nil {
		m, err := graphio.NewMask(g.mask.Elem, s.mask)
		if err != nil {
			c.addf("input %q: %v", s.names.CMask, err)
		}
		g.masks = m
	}
}

// bindPast checks a graph's past K/V inputs: [CTX, kv_dim] each, of the
// one KV cache type (*kvET, set by the first seen) since every graph shares
// the cache.
func bindPast(s *spec, g *graphIO, kvET *graphio.Elem, problems *[]string) {
	c := checker{g, problems}
	for i := range s.layers {
		for _, name := range []string{bundle.Layer(s.names.PastK, i), bundle.Layer(s.names.PastV, i)} {
			t := c.tensor(false, name, s.ctx*s.kvDim, fmt.Sprintf("[%d, %d]", s.ctx, s.kvDim))
			if t == nil {
				continue
			}
			if kvET.Type == 0 {
				*kvET = t.Elem
			} else if !t.Elem.Same(*kvET) {
				c.addf("input %q is %s, the KV cache is %s", name, t.Elem, *kvET)
			}
		}
	}
}

// bindLMHead binds the lm-head: exactly one input [1, H] and one output
// [1, V] of a logits type.
func bindLMHead(s *spec, lm *graphIO, problems *[]string) {
	c := checker{lm, problems}
	if len(lm.info.Inputs) != 1 || len(lm.info.Outputs) != 1 {
		c.addf("has %d inputs and %d outputs, want exactly one of each", len(lm.info.Inputs), len(lm.info.Outputs))
		return
	}
	lm.in = c.tensor(false, lm.info.Inputs[0].Name, s.hidden, fmt.Sprintf("[1, %d]", s.hidden))
	lm.out = c.tensor(true, lm.info.Outputs[0].Name, s.vocab, fmt.Sprintf("[1, %d] (params.vocab)", s.vocab))
	if lm.out != nil {
		switch lm.out.Elem.Type {
		case qnn.Float32, qnn.Float16, qnn.UFixed16:
		default:
			c.addf("output %q is %s; logits must be float32, float16 or ufixed16", lm.out.Info.Name, lm.out.Elem)
		}
	}
}
