package qnn

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Binding attaches a buffer region to a graph tensor by name. The tensor
// occupies Buffer bytes [Offset, Offset+TensorInfo.Bytes()).
type Binding struct {
	Name   string
	Buffer *Buffer
	Offset int
}

// Call is a graph with its inputs and outputs bound: the Qnn_Tensor_t
// arrays, names and dimensions are built once in C memory and reused by
// every Execute. Refresh the buffers' contents between executions.
type Call struct {
	g       *Graph
	in, out unsafe.Pointer // Qnn_Tensor_t arrays in C memory
	nIn     uint32
	nOut    uint32
	op      string

	mu     sync.Mutex
	closed bool
	allocs []unsafe.Pointer
	regs   []*registration
	bufs   []*Buffer
}

// Bind checks the bindings against the graph's tensor metadata (every input
// and output bound exactly once, each region large enough, offsets only in
// AllocPool buffers) and builds the tensor arrays. With shared memory the
// regions are registered with the context (reused across Calls of the same
// context); a region the backend refuses to register is passed as a client
// buffer, with a warning in the Runtime's log.
func (g *Graph) Bind(inputs, outputs []Binding) (_ *Call, err error) {
	c := &Call{g: g, op: "graphExecute(" + g.info.Name + ")"}
	ctx := g.ctx
	ctx.mu.Lock()
	if ctx.closed {
		ctx.mu.Unlock()
		return nil, ErrClosed
	}
	ctx.calls[c] = struct{}{}
	ctx.mu.Unlock()
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if c.in, c.nIn, err = c.build("input", g.info.Inputs, inputs); err != nil {
		return nil, err
	}
	if c.out, c.nOut, err = c.build("output", g.info.Outputs, outputs); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Call) alloc(n uintptr) unsafe.Pointer {
	p := cAlloc(n)
	c.allocs = append(c.allocs, p)
	return p
}

func (c *Call) build(side string, ts []TensorInfo, bs []Binding) (unsafe.Pointer, uint32, error) {
	g := c.g
	byName := make(map[string]Binding, len(bs))
	for _, b := range bs {
		if _, dup := byName[b.Name]; dup {
			return nil, 0, fmt.Errorf("qnn: graph %q: %s %q bound twice", g.info.Name, side, b.Name)
		}
		if _, ok := find(ts, b.Name); !ok {
			return nil, 0, fmt.Errorf("qnn: graph %q has no %s %q", g.info.Name, side, b.Name)
		}
		byName[b.Name] = b
	}
	var missing []string
	for _, t := range ts {
		if _, ok := byName[t.Name]; !ok {
			missing = append(missing, t.Name)
		}
	}
	if len(missing) > 0 {
		return nil, 0, fmt.Errorf("qnn: graph %q: %s(s) not bound: %s", g.info.Name, side, strings.Join(missing, ", "))
	}
	if len(ts) == 0 {
		return nil, 0, nil
	}
	arr := c.alloc(tensorStride * uintptr(len(ts)))
	for i, t := range ts {
		b := byName[t.Name]
		size := t.Bytes()
		switch {
		case b.Buffer == nil:
			return nil, 0, fmt.Errorf("qnn: graph %q: %s %q: nil buffer", g.info.Name, side, t.Name)
		case size > math.MaxUint32:
			return nil, 0, fmt.Errorf("qnn: graph %q: %s %q: %d bytes exceed QNN's 32-bit size", g.info.Name, side, t.Name, size)
		case b.Offset < 0 || b.Offset+size > b.Buffer.size:
			return nil, 0, fmt.Errorf("qnn: graph %q: %s %q (%s %v) needs %d bytes at offset %d; buffer has %d",
				g.info.Name, side, t.Name, t.DataType, t.Dims, size, b.Offset, b.Buffer.size)
		case b.Offset != 0 && !b.Buffer.pool:
			return nil, 0, fmt.Errorf("qnn: graph %q: %s %q is bound at offset %d of a buffer from Alloc, which holds one tensor; "+
				"tensors at offsets of one allocation need AllocPool", g.info.Name, side, t.Name, b.Offset)
		}
		if err := c.use(b.Buffer); err != nil {
			return nil, 0, fmt.Errorf("qnn: graph %q: %s %q: %w", g.info.Name, side, t.Name, err)
		}
		ct := (*cTensor)(unsafe.Add(arr, uintptr(i)*tensorStride))
		c.fill(ct, t)
		var reg *registration
		if b.Buffer.fd >= 0 {
			where := fmt.Sprintf("graph %q: %s %q", g.info.Name, side, t.Name)
			var err error
			if reg, err = g.ctx.register(b.Buffer, b.Offset, t, where); err != nil {
				return nil, 0, fmt.Errorf("qnn: %s: %w", where, err)
			}
			c.regs = append(c.regs, reg)
		}
		if reg != nil && reg.h != 0 {
			ct.memType = tensorMemMemHandle
			ct.data = uintptr(reg.h)
		} else {
			ct.memType = tensorMemRaw
			ct.data = uintptr(unsafe.Add(b.Buffer.ptr, b.Offset))
			ct.dataSize = uint32(size)
		}
	}
	return arr, uint32(len(ts)), nil
}

// use records that the Call binds b, so that b cannot be freed under it.
func (c *Call) use(b *Buffer) error {
	r := c.g.ctx.rt
	r.mu.Lock()
	defer r.mu.Unlock()
	if b.ptr == nil {
		return errors.New("buffer already freed")
	}
	if b.rt != r {
		return errors.New("buffer belongs to another Runtime")
	}
	b.uses++
	c.bufs = append(c.bufs, b)
	return nil
}

// fill writes the metadata of t into ct (C memory), with the name,
// dimensions and per-axis quantization arrays also in C memory.
func (c *Call) fill(ct *cTensor, t TensorInfo) {
	ct.version = t.version
	ct.id = t.ID
	name := c.alloc(uintptr(len(t.Name)) + 1)
	copy(unsafe.Slice((*byte)(name), len(t.Name)), t.Name)
	ct.name = (*byte)(name)
	ct.tensorType = uint32(t.Type)
	ct.dataFormat = t.dataFormat
	ct.dataType = uint32(t.DataType)
	ct.rank = uint32(len(t.Dims))
	if len(t.Dims) > 0 {
		dims := (*uint32)(c.alloc(4 * uintptr(len(t.Dims))))
		copy(unsafe.Slice(dims, len(t.Dims)), t.Dims)
		ct.dimensions = dims
	}
	c.fillQuant(&ct.quant, t)
}

func (c *Call) fillQuant(q *cQuantizeParams, t TensorInfo) {
	q.encodingDefinition = t.quantDef
	q.encoding = uint32(t.Quant.Encoding)
	u := unsafe.Pointer(&q.u)
	switch t.Quant.Encoding {
	case QuantScaleOffset:
		*(*cScaleOffset)(u) = cScaleOffset{t.Quant.Scale, t.Quant.Offset}
	case QuantBwScaleOffset:
		*(*cBwScaleOffset)(u) = cBwScaleOffset{t.Quant.Bitwidth, t.Quant.Scale, t.Quant.Offset}
	case QuantAxisScaleOffset:
		n := len(t.Quant.Scales)
		a := (*cAxisScaleOffset)(u)
		a.axis, a.numScaleOffsets = t.Quant.Axis, uint32(n)
		if n > 0 {
			so := unsafe.Slice((*cScaleOffset)(c.alloc(8*uintptr(n))), n)
			for i := range so {
				so[i] = cScaleOffset{t.Quant.Scales[i], t.Quant.Offsets[i]}
			}
			a.scaleOffset = &so[0]
		}
	case QuantBwAxisScaleOffset:
		n := len(t.Quant.Scales)
		a := (*cBwAxisScaleOffset)(u)
		a.bitwidth, a.axis, a.numElements = t.Quant.Bitwidth, t.Quant.Axis, uint32(n)
		if n > 0 {
			s := unsafe.Slice((*float32)(c.alloc(4*uintptr(n))), n)
			copy(s, t.Quant.Scales)
			a.scales = &s[0]
		}
		if m := len(t.Quant.Offsets); m > 0 {
			o := unsafe.Slice((*int32)(c.alloc(4*uintptr(m))), m)
			copy(o, t.Quant.Offsets)
			a.offsets = &o[0]
		}
	case QuantUndefined:
	default:
		// Encodings whose parameters are not copied out of binary info.
		q.encodingDefinition, q.encoding = uint32(QuantUndefined), uint32(QuantUndefined)
	}
}

// Execute runs the graph once, synchronously. Only C memory is passed.
func (c *Call) Execute() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	r := c.g.ctx.rt
	if t := r.cfg.Turn; t != nil {
		t.Lock()
		defer t.Unlock()
	}
	st, _, _ := purego.SyscallN(r.core.graphExecute, uintptr(c.g.h), uintptr(c.in), uintptr(c.nIn), uintptr(c.out), uintptr(c.nOut), 0, 0)
	if st&0xFFFF != 0 {
		return r.status(c.op, uint64(st))
	}
	return nil
}

// Close deregisters the Call's memory (when no other Call uses it) and
// frees its C memory. It is idempotent.
func (c *Call) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	ctx := c.g.ctx
	var first error
	ctx.mu.Lock()
	for _, reg := range c.regs {
		reg.refs--
		if reg.refs == 0 && ctx.regs != nil {
			if err := ctx.deregister(reg); err != nil && first == nil {
				first = err
			}
			delete(ctx.regs, reg.key)
		}
	}
	delete(ctx.calls, c)
	ctx.mu.Unlock()
	c.regs = nil
	for _, p := range c.allocs {
		cFree(p)
	}
	c.allocs, c.in, c.out = nil, nil, nil
	r := ctx.rt
	r.mu.Lock()
	for _, b := range c.bufs {
		b.uses--
	}
	r.mu.Unlock()
	c.bufs = nil
	return first
}
