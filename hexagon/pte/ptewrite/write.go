// Package ptewrite writes ExecuTorch .pte containers around QNN context
// binaries, laid out as ExecuTorch's own serializer does (ET12 flatbuffer
// with the eh00 extended header, an empty constant segment 0, one segment
// per distinct context binary behind the 0x5678ABCD payload header), so
// that hexagon/pte reads them exactly like a real export. hexserve mkmodel
// uses it for test models; the serving build does not need it.
package ptewrite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/hexserve/hexserve/hexagon/pte"
)

// Program is what Write serialises.
type Program struct {
	// Methods are the execution plans (prefill_forward, kv_forward, ...), in
	// file order.
	Methods []Method
	// Metadata are the constant-returning methods (get_vocab_size → Int 512,
	// get_kv_output_0_quant_attr → 5 values, ...), written after Methods in
	// name order: each is a plan with no instructions whose outputs are
	// these constants.
	Metadata map[string][]pte.Value
	// Contexts are the QNN context binaries; Delegate.Context indexes them.
	// Context i is stored in segment i+1 (segment 0 is the empty constant
	// segment), once however many delegates name it.
	Contexts []Context
}

// Method is one execution plan.
type Method struct {
	Name   string
	Values []pte.Value
	// Inputs and Outputs index Values.
	Inputs, Outputs []int32
	// Instructions form the plan's single chain: DelegateCalls, and between
	// shards KernelCalls of pte.FallbackOp with Args [in, out, out].
	Instructions []pte.Instruction
	Operators    []pte.Operator
	Delegates    []Delegate
}

// Delegate is a QnnBackend delegate of a method.
type Delegate struct {
	// Context indexes Program.Contexts.
	Context int
	// Options is written as the delegate's qnn_compile_spec.
	Options pte.QNNOptions
}

// Context is a QNN context binary and its payload header: Binary, or a
// binary of Size bytes that Stream writes when its turn comes (so a
// multi-gigabyte model is never held in memory).
type Context struct {
	Binary []byte
	Size   int64
	Stream func(io.Writer) error
	// Signature identifies the payload (ExecuTorch writes the AOT time in ns);
	// 0 means "derive one from the binary's bytes" (a streamed context must
	// set one).
	Signature int64
	// Legacy writes the 20-byte payload header used before ExecuTorch
	// #17326 instead of the 256-byte one.
	Legacy bool
}

// SegmentAlignment is the alignment of segment_base_offset and of every
// segment (exir/_serialize default).
const SegmentAlignment = 128

// Write writes p as a .pte container.
func Write(w io.Writer, p Program) error {
	if err := check(p); err != nil {
		return fmt.Errorf("ptewrite: %w", err)
	}
	// Segment 0 is the empty constant segment; context i is segment i+1.
	var dataLen int64
	segs := []*table{new(table)}
	for _, c := range p.Contexts {
		dataLen = alignUp(dataLen)
		n := payloadHeaderLen(c) + c.size()
		segs = append(segs, new(table).u64(0, uint64(dataLen)).u64(1, uint64(n)))
		dataLen += n
	}
	root := new(table).
		ref(1, tables(plans(p))).
		ref(2, tables(nil)).
		ref(3, tables(nil)).
		ref(4, tables(segs)).
		ref(5, new(table).ref(1, intVec([]int64{0})).object())
	if _, err := w.Write(program(root, dataLen)); err != nil {
		return err
	}
	return writeSegments(w, p.Contexts)
}

// plans are p's methods' execution plans, then one plan per metadata key
// (sorted) whose outputs are its values.
func plans(p Program) []*table {
	var out []*table
	for _, m := range p.Methods {
		out = append(out, plan(m))
	}
	names := make([]string, 0, len(p.Metadata))
	for k := range p.Metadata {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		vals := p.Metadata[k]
		outs := make([]int32, len(vals))
		for i := range outs {
			outs[i] = int32(i)
		}
		out = append(out, plan(Method{Name: k, Values: vals, Outputs: outs}))
	}
	return out
}

// program is the file up to the segments: root offset, ET12, the 32-byte
// eh00 header, the root's vtable and table, padding to the segment base.
func program(root *table, dataLen int64) []byte {
	b := &builder{buf: make([]byte, 40)}
	copy(b.buf[4:], "ET12")
	copy(b.buf[8:], "eh00")
	binary.LittleEndian.PutUint32(b.buf[12:], 32)
	rootAt := b.table(root)
	binary.LittleEndian.PutUint32(b.buf[0:], uint32(rootAt))
	progSize := len(b.buf)
	base := (progSize + SegmentAlignment - 1) / SegmentAlignment * SegmentAlignment
	binary.LittleEndian.PutUint64(b.buf[16:], uint64(progSize))
	binary.LittleEndian.PutUint64(b.buf[24:], uint64(base))
	binary.LittleEndian.PutUint64(b.buf[32:], uint64(dataLen))
	return append(b.buf, make([]byte, base-progSize)...)
}

// writeSegments writes each context, aligned, with its payload header.
func writeSegments(w io.Writer, contexts []Context) error {
	var at int64
	for i, c := range contexts {
		if pad := alignUp(at) - at; pad > 0 {
			if _, err := w.Write(make([]byte, pad)); err != nil {
				return err
			}
			at += pad
		}
		hdr := payloadHeader(c)
		if _, err := w.Write(hdr); err != nil {
			return err
		}
		if err := c.write(w, i); err != nil {
			return err
		}
		at += int64(len(hdr)) + c.size()
	}
	return nil
}

// write writes context i's binary, or streams it and checks its size.
func (c Context) write(w io.Writer, i int) error {
	if c.Stream == nil {
		_, err := w.Write(c.Binary)
		return err
	}
	cw := &countingWriter{w: w}
	if err := c.Stream(cw); err != nil {
		return fmt.Errorf("ptewrite: context %d: %w", i, err)
	}
	if cw.n != c.Size {
		return fmt.Errorf("ptewrite: context %d: streamed %d bytes, declared %d", i, cw.n, c.Size)
	}
	return nil
}

func alignUp(n int64) int64 {
	return (n + SegmentAlignment - 1) / SegmentAlignment * SegmentAlignment
}

func (c Context) size() int64 {
	if c.Stream != nil {
		return c.Size
	}
	return int64(len(c.Binary))
}

// countingWriter counts what a streamed context writes.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func check(p Program) error {
	for i, c := range p.Contexts {
		if c.Stream != nil && (c.Signature == 0 || c.Binary != nil) {
			return fmt.Errorf("context %d: a streamed context needs a Signature and no Binary", i)
		}
	}
	seen := map[string]bool{}
	for _, m := range p.Methods {
		if m.Name == "" {
			return errors.New("a method has no name")
		}
		if seen[m.Name] {
			return fmt.Errorf("method %q is listed twice", m.Name)
		}
		seen[m.Name] = true
		idx := func(what string, is ...int32) error {
			for _, i := range is {
				if i < 0 || int(i) >= len(m.Values) {
					return fmt.Errorf("method %q: %s index %d is outside its %d values", m.Name, what, i, len(m.Values))
				}
			}
			return nil
		}
		if err := idx("input", m.Inputs...); err != nil {
			return err
		}
		if err := idx("output", m.Outputs...); err != nil {
			return err
		}
		for i, v := range m.Values {
			if err := checkValue(v); err != nil {
				return fmt.Errorf("method %q value %d: %w", m.Name, i, err)
			}
		}
		for j, in := range m.Instructions {
			if err := idx(fmt.Sprintf("instruction %d arg", j), in.Args...); err != nil {
				return err
			}
			switch in.Kind {
			case pte.DelegateCall:
				if in.Delegate < 0 || int(in.Delegate) >= len(m.Delegates) {
					return fmt.Errorf("method %q instruction %d: delegate %d of %d", m.Name, j, in.Delegate, len(m.Delegates))
				}
			case pte.KernelCall:
				if in.Op < 0 || int(in.Op) >= len(m.Operators) {
					return fmt.Errorf("method %q instruction %d: operator %d of %d", m.Name, j, in.Op, len(m.Operators))
				}
			default:
				return fmt.Errorf("method %q instruction %d: %v is not written", m.Name, j, in.Kind)
			}
		}
		for j, d := range m.Delegates {
			if d.Context < 0 || d.Context >= len(p.Contexts) {
				return fmt.Errorf("method %q delegate %d: context %d of %d", m.Name, j, d.Context, len(p.Contexts))
			}
		}
	}
	for k, vals := range p.Metadata {
		if seen[k] || k == "" {
			return fmt.Errorf("metadata method %q is empty or also a method", k)
		}
		for _, v := range vals {
			if v.Kind == pte.KindTensor {
				return fmt.Errorf("metadata method %q: a tensor is not a constant", k)
			}
			if err := checkValue(v); err != nil {
				return fmt.Errorf("metadata method %q: %w", k, err)
			}
		}
	}
	return nil
}

func checkValue(v pte.Value) error {
	switch v.Kind {
	case pte.KindNull, pte.KindInt, pte.KindBool, pte.KindDouble, pte.KindString, pte.KindIntList:
	case pte.KindTensor:
		if v.Tensor == nil {
			return errors.New("a Tensor value has no tensor")
		}
	default:
		return fmt.Errorf("%v values are not written", v.Kind)
	}
	return nil
}

func payloadHeaderLen(c Context) int64 {
	if c.Legacy {
		return pte.LegacyPayloadHeaderSize
	}
	return pte.PayloadHeaderSize
}

// payloadHeader is QnnContextCustomProtocol's header in front of c: magic,
// signature, size, then zeros up to 256 (or 20 when Legacy).
func payloadHeader(c Context) []byte {
	sig := c.Signature
	if sig == 0 {
		sig = signature(c.Binary)
	}
	hdr := make([]byte, payloadHeaderLen(c))
	binary.LittleEndian.PutUint32(hdr[0:], pte.PayloadMagic)
	binary.LittleEndian.PutUint64(hdr[4:], uint64(sig))
	binary.LittleEndian.PutUint64(hdr[12:], uint64(c.size()))
	return hdr
}

// signature is a positive FNV-1a hash of the binary, stable across runs.
func signature(b []byte) int64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return int64(h >> 1)
}

func plan(m Method) *table {
	values := make([]*table, len(m.Values))
	for i, v := range m.Values {
		values[i] = evalue(v)
	}
	instrs := make([]*table, len(m.Instructions))
	for i, in := range m.Instructions {
		call := new(table).ref(1, intVec(in.Args))
		if in.Kind == pte.KernelCall {
			call.i32(0, in.Op)
		} else {
			call.i32(0, in.Delegate)
		}
		instrs[i] = new(table).u8(0, uint8(in.Kind)).ref(1, call.object())
	}
	ops := make([]*table, len(m.Operators))
	for i, o := range m.Operators {
		ops[i] = new(table).ref(0, str(o.Name)).ref(1, str(o.Overload))
	}
	dels := make([]*table, len(m.Delegates))
	for i, d := range m.Delegates {
		spec := new(table).ref(0, str(pte.QNNCompileSpecKey)).ref(1, bytesVec(encodeOptions(d.Options), 1))
		dels[i] = new(table).
			ref(0, str(pte.QNNBackendID)).
			ref(1, new(table).u8(0, uint8(pte.Segment)).u32(1, uint32(d.Context+1)).object()).
			ref(2, tables([]*table{spec}))
	}
	// Buffer 0 is reserved; plans with tensors get one more (empty: every
	// I/O tensor is supplied by the caller), as in ExecuTorch's exports.
	bufferSizes := []int64{0}
	for _, v := range m.Values {
		if v.Kind == pte.KindTensor {
			bufferSizes = []int64{0, 0}
			break
		}
	}
	// ExecuTorch leaves the chain's inputs and outputs empty.
	chain := new(table).ref(0, intVec[int32](nil)).ref(1, intVec[int32](nil)).ref(2, tables(instrs))
	return new(table).
		ref(0, str(m.Name)).
		ref(1, new(table).ref(0, str("")).ref(1, str("")).object()).
		ref(2, tables(values)).
		ref(3, intVec(m.Inputs)).
		ref(4, intVec(m.Outputs)).
		ref(5, tables([]*table{chain})).
		ref(6, tables(ops)).
		ref(7, tables(dels)).
		ref(8, intVec(bufferSizes))
}

func evalue(v pte.Value) *table {
	var val *table
	switch v.Kind {
	case pte.KindNull:
		val = new(table)
	case pte.KindInt:
		val = new(table).i64(0, v.Int)
	case pte.KindBool:
		val = new(table).boolean(0, v.Bool)
	case pte.KindDouble:
		val = new(table).f64(0, v.Double)
	case pte.KindString:
		val = new(table).ref(0, str(v.String))
	case pte.KindIntList:
		val = new(table).ref(0, intVec(v.List))
	case pte.KindTensor:
		t := v.Tensor
		order := t.DimOrder
		if order == nil {
			order = make([]uint8, len(t.Sizes))
			for i := range order {
				order[i] = uint8(i)
			}
		}
		val = new(table).u8(0, uint8(t.Type)).ref(2, intVec(t.Sizes)).ref(3, bytesVec(slices.Clone(order), 1))
	}
	return new(table).u8(0, uint8(v.Kind)).ref(1, val.object())
}

// encodeOptions writes o as a QnnExecuTorchOptions flatbuffer (no file
// identifier), leaving default-valued fields out as flatc does.
func encodeOptions(o pte.QNNOptions) []byte {
	htp := new(table).
		i32(0, o.MaxSpillFill).i32(1, int32(o.PerformanceMode)).i32(2, int32(o.Precision)).i32(3, int32(o.PdSession)).
		boolean(4, o.UseConvHMX).boolean(5, o.UseDLBC).boolean(6, o.UseFoldReLU).boolean(7, o.UseMultiContexts).
		boolean(8, o.UseWeightSharing).boolean(9, o.UseSLCAllocator)
	soc := new(table).i32(0, int32(o.SocModel)).
		ref(1, new(table).i32(0, int32(o.HtpArch)).u32(1, o.VTCMMB).object())
	opts := new(table).
		ref(0, soc.object()).
		ref(1, new(table).i32(0, int32(o.Backend)).ref(1, htp.object()).object()).
		ref(2, str(o.LibraryPath)).
		i32(3, int32(o.LogLevel)).
		boolean(4, o.OnlinePrepare).
		boolean(5, o.DumpIntermediate).
		i32(6, int32(o.ProfileLevel)).
		boolean(7, o.SharedBuffer).
		boolean(8, o.IsFromContextBinary).
		boolean(9, o.Saver).
		ref(10, str(o.SaverOutputDir)).
		ref(11, new(table).ref(0, tables(nil)).object()).
		boolean(12, o.UseMHA2SHA)
	b := &builder{buf: make([]byte, 4)}
	binary.LittleEndian.PutUint32(b.buf, uint32(b.table(opts)))
	return b.buf
}
