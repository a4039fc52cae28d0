// Package pte reads ExecuTorch .pte programs exported by ExecuTorch's
// Qualcomm (QNN/HTP) backend: the ET12 flatbuffer and its eh00 extended
// header, the execution plans with their values, delegate calls and
// QnnBackend delegates, the segments, the constant-returning metadata
// methods, each delegate's qnn_compile_spec, and the 0x5678ABCD payload
// header around each QNN context binary. The file is memory-mapped and
// context binaries are slices of the map, never copied
// (docs/executorch-pte.md §1–2 describes the format).
package pte

import (
	"encoding/binary"
	"fmt"

	"github.com/hexserve/hexserve/internal/modelfile"
)

// Header is the file header: the flatbuffer's root offset and identifier,
// then ExecuTorch's eh00 extended header.
type Header struct {
	RootOffset uint32 `json:"root_offset"`
	// Extended is false for a file with no eh00 header (no segments).
	Extended        bool   `json:"extended"`
	ExtendedLen     uint32 `json:"extended_header_len,omitempty"`
	ProgramSize     uint64 `json:"program_size"`
	SegmentBase     uint64 `json:"segment_base_offset"`
	SegmentDataSize uint64 `json:"segment_data_size"`
}

// DataSegment is a Program.segments entry; Offset is relative to
// Header.SegmentBase.
type DataSegment struct {
	Offset uint64 `json:"offset"`
	Size   uint64 `json:"size"`
}

// SubsegmentOffsets are offsets into one segment.
type SubsegmentOffsets struct {
	Segment uint32   `json:"segment_index"`
	Offsets []uint64 `json:"offsets"`
}

// Method is an execution plan.
type Method struct {
	Name   string
	Values []Value
	// Inputs and Outputs index Values.
	Inputs, Outputs []int32
	// Instructions are the plan's chains, concatenated in order.
	Instructions []Instruction
	Operators    []Operator
	Delegates    []Delegate
}

// Delegate is a BackendDelegate with its payload resolved.
type Delegate struct {
	ID           string
	Location     DataLocation
	Index        uint32 // into Program.segments or backend_delegate_data
	CompileSpecs []CompileSpec
	// Payload is the delegate's processed bytes (a slice of the map) and
	// PayloadOffset their file offset.
	Payload       []byte
	PayloadOffset int64
	// For QnnBackend delegates: the decoded qnn_compile_spec (nil if the
	// delegate has none), the payload header and the context binary (a
	// slice of the map at file offset BinaryOffset).
	QNN          *QNNOptions
	Header       PayloadHeader
	Binary       []byte
	BinaryOffset int64
}

// File is an open .pte. Its byte slices alias the file's memory map and are
// valid until Close.
type File struct {
	Path     string
	Size     int64
	Header   Header
	Version  uint32
	Segments []DataSegment
	// ConstantSegment is Program.constant_segment (nil when absent);
	// ConstantBuffers, MutableSegments and NamedData count the tables a
	// QNN export leaves empty.
	ConstantSegment *SubsegmentOffsets
	ConstantBuffers int
	MutableSegments int
	NamedData       int
	// Methods are all execution plans in file order, metadata methods
	// included.
	Methods []*Method
	// Metadata maps each constant-returning method (one with no
	// instructions whose outputs are all non-tensor constants) to its
	// outputs: get_vocab_size → [Int 512], get_kv_output_0_quant_attr → 5
	// values.
	Metadata map[string][]Value

	data []byte
}

// Open maps path read-only and parses it. It requires the static-llama
// methods prefill_forward and kv_forward, each with QnnBackend delegates
// whose payloads carry the QNN context protocol header. Every error names
// the file and what is wrong with it.
func Open(path string) (*File, error) {
	data, err := modelfile.Map(path, 0)
	if err != nil {
		return nil, fmt.Errorf("pte: %w", err)
	}
	if len(data) < 8 {
		modelfile.Unmap(data)
		return nil, fmt.Errorf("pte: %s: %d bytes is too short for a .pte file", path, len(data))
	}
	p, err := Parse(path, data)
	if err != nil {
		modelfile.Unmap(data)
		return nil, err
	}
	p.data = data
	return p, nil
}

// Close unmaps the file; slices taken from it become invalid.
func (f *File) Close() error {
	if f.data == nil {
		return nil
	}
	err := modelfile.Unmap(f.data)
	f.data = nil
	return err
}

// Method returns the execution plan called name, or nil.
func (f *File) Method(name string) *Method {
	for _, m := range f.Methods {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Parse reads a .pte held in data (Open maps the file and calls it); name
// is used in errors. Returned slices alias data.
func Parse(name string, data []byte) (file *File, err error) {
	defer func() {
		if r := recover(); r != nil {
			fe, ok := r.(fbError)
			if !ok {
				panic(r)
			}
			file, err = nil, fmt.Errorf("pte: %s: corrupt program flatbuffer: %s", name, fe.msg)
		}
	}()
	file = &File{Path: name, Size: int64(len(data)), Metadata: map[string][]Value{}}
	if err := file.parse(data); err != nil {
		return nil, fmt.Errorf("pte: %s: %w", name, err)
	}
	return file, nil
}

// parse fills f from data: the header, the program's segments and
// buffers, its methods, and the two a static-llama export must have.
func (f *File) parse(data []byte) error {
	program, err := f.Header.parse(data)
	if err != nil {
		return err
	}
	h := &f.Header
	if uint64(h.RootOffset) < 8 || uint64(h.RootOffset)+4 > uint64(len(program)) {
		return fmt.Errorf("root table offset %d is outside the %d-byte program", h.RootOffset, len(program))
	}
	root := newFB(program, "program").table(int(h.RootOffset), "Program")
	f.Version = root.u32(0)
	if err := f.segments(root, data); err != nil {
		return err
	}
	_, f.ConstantBuffers = root.vec(2, 4, "constant_buffer")
	_, f.MutableSegments = root.vec(6, 4, "mutable_data_segments")
	_, f.NamedData = root.vec(7, 4, "named_data")
	if err := f.methods(root, data); err != nil {
		return err
	}
	for _, name := range []string{MethodPrefill, MethodDecode} {
		m := f.Method(name)
		if m == nil {
			return fmt.Errorf("method %s is missing (not an ExecuTorch static-llama export; methods: %v)", name, f.methodNames())
		}
		if err := checkQNNMethod(m); err != nil {
			return err
		}
	}
	return nil
}

// parse reads the file header (and the eh00 extended header) of data and
// returns the program flatbuffer's bytes.
func (h *Header) parse(data []byte) ([]byte, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("%d bytes is too short for a .pte file", len(data))
	}
	if id := string(data[4:8]); id != "ET12" {
		return nil, fmt.Errorf("file identifier %q is not ET12 (not an ExecuTorch program, or an unsupported version)", id)
	}
	h.RootOffset = binary.LittleEndian.Uint32(data)
	if len(data) < 16 || string(data[8:12]) != "eh00" {
		return data, nil
	}
	h.Extended = true
	h.ExtendedLen = binary.LittleEndian.Uint32(data[12:])
	if h.ExtendedLen < 24 || 8+uint64(h.ExtendedLen) > uint64(len(data)) {
		return nil, fmt.Errorf("extended header length %d is invalid (24 or more, within the %d-byte file)", h.ExtendedLen, len(data))
	}
	h.ProgramSize = binary.LittleEndian.Uint64(data[16:])
	h.SegmentBase = binary.LittleEndian.Uint64(data[24:])
	if h.ExtendedLen >= 32 {
		h.SegmentDataSize = binary.LittleEndian.Uint64(data[32:])
	}
	size := uint64(len(data))
	switch {
	case h.ProgramSize < 8+uint64(h.ExtendedLen) || h.ProgramSize > size:
		return nil, fmt.Errorf("program_size %d does not fit the %d-byte file (truncated?)", h.ProgramSize, size)
	case h.SegmentBase < h.ProgramSize || h.SegmentBase > size:
		return nil, fmt.Errorf("segment_base_offset %d is not between program_size %d and the file size %d (truncated?)", h.SegmentBase, h.ProgramSize, size)
	case h.SegmentDataSize != 0 && h.SegmentDataSize != size-h.SegmentBase: // SegmentBase ≤ size: no overflow
		return nil, fmt.Errorf("segment_base_offset %d + segment_data_size %d = %d, but the file has %d bytes (truncated or padded)",
			h.SegmentBase, h.SegmentDataSize, h.SegmentBase+h.SegmentDataSize, size)
	}
	return data[:h.ProgramSize], nil
}

// segments reads the program's data segments (each within the file) and
// its constant segment's offsets.
func (f *File) segments(root tbl, data []byte) error {
	for _, s := range root.tables(4, "segments") {
		seg := DataSegment{Offset: s.u64(0), Size: s.u64(1)}
		if !f.Header.Extended {
			return fmt.Errorf("the program lists segments but the file has no eh00 extended header")
		}
		end := f.Header.SegmentBase + seg.Offset
		if end < seg.Offset || end+seg.Size < end || end+seg.Size > uint64(len(data)) {
			return fmt.Errorf("segment %d (offset %d, size %d) ends past the end of the %d-byte file (truncated?)",
				len(f.Segments), seg.Offset, seg.Size, len(data))
		}
		f.Segments = append(f.Segments, seg)
	}
	if cs, ok := root.sub(5, "constant_segment"); ok {
		f.ConstantSegment = &SubsegmentOffsets{Segment: cs.u32(0)}
		for _, o := range cs.i64s(1, "constant_segment offsets") {
			f.ConstantSegment.Offsets = append(f.ConstantSegment.Offsets, uint64(o))
		}
	}
	return nil
}

// methods reads the execution plans (names unique) and their metadata
// constants.
func (f *File) methods(root tbl, data []byte) error {
	inline := root.tables(3, "backend_delegate_data")
	seen := map[string]bool{}
	for _, pt := range root.tables(1, "execution_plan") {
		m, err := f.plan(pt, data, inline)
		if err != nil {
			return err
		}
		if seen[m.Name] {
			return fmt.Errorf("method %q is listed twice", m.Name)
		}
		seen[m.Name] = true
		f.Methods = append(f.Methods, m)
		if vals, ok := constants(m); ok {
			f.Metadata[m.Name] = vals
		}
	}
	return nil
}

func (f *File) methodNames() []string {
	names := make([]string, len(f.Methods))
	for i, m := range f.Methods {
		names[i] = m.Name
	}
	return names
}

// constants returns the outputs of a constant-returning method.
func constants(m *Method) ([]Value, bool) {
	if len(m.Instructions) != 0 || len(m.Outputs) == 0 {
		return nil, false
	}
	out := make([]Value, len(m.Outputs))
	for i, o := range m.Outputs {
		v := m.Values[o]
		switch v.Kind {
		case KindInt, KindBool, KindDouble, KindString, KindIntList:
		default:
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

// checkQNNMethod checks what a host needs to run a static-llama method: it
// calls at least one QnnBackend delegate, and every delegate it calls has a
// context binary.
func checkQNNMethod(m *Method) error {
	calls := 0
	for _, in := range m.Instructions {
		if in.Kind != DelegateCall {
			continue
		}
		calls++
		d := m.Delegates[in.Delegate]
		if d.ID != QNNBackendID {
			return fmt.Errorf("method %s calls delegate %d of backend %q, not %s", m.Name, in.Delegate, d.ID, QNNBackendID)
		}
	}
	if calls == 0 {
		return fmt.Errorf("method %s calls no QNN delegate", m.Name)
	}
	return nil
}

func (f *File) plan(pt tbl, data []byte, inline []tbl) (*Method, error) {
	m := &Method{Name: pt.str(0, "ExecutionPlan.name")}
	if m.Name == "" {
		return nil, fmt.Errorf("execution plan %d has no name", len(f.Methods))
	}
	what := "method " + m.Name
	for _, vt := range pt.tables(2, what+" values") {
		m.Values = append(m.Values, evalue(vt, what))
	}
	m.Inputs = pt.i32s(3, what+" inputs")
	m.Outputs = pt.i32s(4, what+" outputs")
	for _, io := range [][]int32{m.Inputs, m.Outputs} {
		for _, i := range io {
			if i < 0 || int(i) >= len(m.Values) {
				return nil, fmt.Errorf("%s: input/output value index %d is outside its %d values", what, i, len(m.Values))
			}
		}
	}
	for _, op := range pt.tables(6, what+" operators") {
		m.Operators = append(m.Operators, Operator{Name: op.str(0, what+" operator name"), Overload: op.str(1, what+" operator overload")})
	}
	for i, dt := range pt.tables(7, what+" delegates") {
		d, err := f.delegate(dt, data, inline)
		if err != nil {
			return nil, fmt.Errorf("%s delegate %d: %v", what, i, err)
		}
		m.Delegates = append(m.Delegates, d)
	}
	for _, ch := range pt.tables(5, what+" chains") {
		for j, it := range ch.tables(2, what+" instructions") {
			in := Instruction{Kind: InstrKind(it.u8(0))}
			call, ok := it.sub(1, what+" instruction")
			if !ok && in.Kind != 0 {
				return nil, fmt.Errorf("%s instruction %d (%v) has no arguments", what, j, in.Kind)
			}
			switch in.Kind {
			case KernelCall:
				in.Op = call.i32(0)
				in.Args = call.i32s(1, what+" kernel call args")
				if in.Op < 0 || int(in.Op) >= len(m.Operators) {
					return nil, fmt.Errorf("%s instruction %d calls operator %d of %d", what, j, in.Op, len(m.Operators))
				}
			case DelegateCall:
				in.Delegate = call.i32(0)
				in.Args = call.i32s(1, what+" delegate call args")
				if in.Delegate < 0 || int(in.Delegate) >= len(m.Delegates) {
					return nil, fmt.Errorf("%s instruction %d calls delegate %d of %d", what, j, in.Delegate, len(m.Delegates))
				}
			case MoveCall, JumpFalseCall, FreeCall:
			default:
				return nil, fmt.Errorf("%s instruction %d has unknown kind %d", what, j, in.Kind)
			}
			for _, a := range in.Args {
				if a < 0 || int(a) >= len(m.Values) {
					return nil, fmt.Errorf("%s instruction %d argument %d is outside its %d values", what, j, a, len(m.Values))
				}
			}
			m.Instructions = append(m.Instructions, in)
		}
	}
	return m, nil
}

func evalue(vt tbl, what string) Value {
	v := Value{Kind: ValueKind(vt.u8(0))}
	val, ok := vt.sub(1, what+" value")
	if !ok {
		if v.Kind != KindNone && v.Kind != KindNull {
			vt.f.fail("%s: a %v value has no body", what, v.Kind)
		}
		return v
	}
	switch v.Kind {
	case KindInt:
		v.Int = int64(val.u64(0))
	case KindBool:
		v.Bool = val.boolean(0)
	case KindDouble:
		v.Double = val.f64(0)
	case KindString:
		v.String = val.str(0, what+" string")
	case KindIntList:
		v.List = val.i64s(0, what+" int list")
	case KindTensorList, KindOptionalTensorList:
		for _, i := range val.i32s(0, what+" tensor list") {
			v.List = append(v.List, int64(i))
		}
	case KindTensor:
		t := &Tensor{Type: ScalarType(int8(val.u8(0))), Sizes: val.i32s(2, what+" tensor sizes")}
		if order := val.bytes(3, what+" dim order"); !isIdentity(order) {
			t.DimOrder = append([]uint8(nil), order...)
		}
		v.Tensor = t
	}
	return v
}

func isIdentity(order []uint8) bool {
	for i, d := range order {
		if int(d) != i {
			return false
		}
	}
	return true
}

func (f *File) delegate(dt tbl, data []byte, inline []tbl) (Delegate, error) {
	d := Delegate{ID: dt.str(0, "delegate id")}
	ref, ok := dt.sub(1, "delegate processed")
	if !ok {
		return d, fmt.Errorf("backend %q has no processed data reference", d.ID)
	}
	d.Location, d.Index = DataLocation(ref.u8(0)), ref.u32(1)
	for _, cs := range dt.tables(2, "compile specs") {
		d.CompileSpecs = append(d.CompileSpecs, CompileSpec{Key: cs.str(0, "compile spec key"), Value: cs.bytes(1, "compile spec value")})
	}
	switch d.Location {
	case Segment:
		if int64(d.Index) >= int64(len(f.Segments)) {
			return d, fmt.Errorf("payload segment %d does not exist (%d segments)", d.Index, len(f.Segments))
		}
		s := f.Segments[d.Index]
		d.PayloadOffset = int64(f.Header.SegmentBase + s.Offset)
		d.Payload = data[d.PayloadOffset : d.PayloadOffset+int64(s.Size) : d.PayloadOffset+int64(s.Size)]
	case Inline:
		if int64(d.Index) >= int64(len(inline)) {
			return d, fmt.Errorf("inline payload %d does not exist (%d inline blobs)", d.Index, len(inline))
		}
		// The program is a prefix of data, so program offsets are file offsets.
		p, n := inline[d.Index].vec(0, 1, "inline delegate data")
		d.PayloadOffset, d.Payload = int64(p), data[p:p+n:p+n]
	default:
		return d, fmt.Errorf("payload location %d is neither INLINE nor SEGMENT", d.Location)
	}
	if d.ID != QNNBackendID {
		return d, nil
	}
	for _, cs := range d.CompileSpecs {
		if cs.Key == QNNCompileSpecKey {
			o, err := decodeOptions(cs.Value)
			if err != nil {
				return d, fmt.Errorf("%s: %v", QNNCompileSpecKey, err)
			}
			d.QNN = &o
		}
	}
	h, err := parsePayloadHeader(d.Payload)
	if err != nil {
		return d, err
	}
	d.Header = h
	d.Binary = d.Payload[h.Len : h.Len+int(h.Size) : h.Len+int(h.Size)]
	d.BinaryOffset = d.PayloadOffset + int64(h.Len)
	return d, nil
}
