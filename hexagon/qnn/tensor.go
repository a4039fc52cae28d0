package qnn

import (
	"fmt"
	"unsafe"
)

// DataType is a Qnn_DataType_t. The low byte is the bit width written as a
// decimal number in hex (0x16 = 16 bits).
type DataType uint32

// QNN data types.
const (
	Int8      DataType = 0x0008
	Int16     DataType = 0x0016
	Int32     DataType = 0x0032
	Int64     DataType = 0x0064
	Uint8     DataType = 0x0108
	Uint16    DataType = 0x0116
	Uint32    DataType = 0x0132
	Uint64    DataType = 0x0164
	Float16   DataType = 0x0216
	BFloat16  DataType = 0x0226
	Float32   DataType = 0x0232
	Float64   DataType = 0x0264
	SFixed4   DataType = 0x0304
	SFixed8   DataType = 0x0308
	SFixed16  DataType = 0x0316
	SFixed32  DataType = 0x0332
	UFixed4   DataType = 0x0404
	UFixed8   DataType = 0x0408
	UFixed16  DataType = 0x0416
	UFixed32  DataType = 0x0432
	Bool8     DataType = 0x0508
	String    DataType = 0x0608
	Undefined DataType = 0x7FFFFFFF
)

var dataTypeNames = map[DataType]string{
	Int8: "INT_8", Int16: "INT_16", Int32: "INT_32", Int64: "INT_64",
	Uint8: "UINT_8", Uint16: "UINT_16", Uint32: "UINT_32", Uint64: "UINT_64",
	Float16: "FLOAT_16", BFloat16: "BFLOAT_16", Float32: "FLOAT_32", Float64: "FLOAT_64",
	SFixed4: "SFIXED_POINT_4", SFixed8: "SFIXED_POINT_8", SFixed16: "SFIXED_POINT_16", SFixed32: "SFIXED_POINT_32",
	UFixed4: "UFIXED_POINT_4", UFixed8: "UFIXED_POINT_8", UFixed16: "UFIXED_POINT_16", UFixed32: "UFIXED_POINT_32",
	Bool8: "BOOL_8", String: "STRING", Undefined: "UNDEFINED",
}

func (t DataType) String() string {
	if s, ok := dataTypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("DataType(0x%04x)", uint32(t))
}

// Bits is the element width in bits (0 for UNDEFINED or an unknown type).
func (t DataType) Bits() int {
	if _, known := dataTypeNames[t]; !known || t == Undefined {
		return 0
	}
	if t == BFloat16 { // 0x0226: the low byte is not the width here
		return 16
	}
	lo := uint32(t) & 0xFF
	return int(lo>>4*10 + lo&0xF)
}

// Size is the element size in bytes; 0 for sub-byte and undefined types.
func (t DataType) Size() int { return t.Bits() / 8 }

// IsFixedPoint reports whether t is an SFIXED_POINT or UFIXED_POINT type,
// whose values are real = (q + Offset) · Scale.
func (t DataType) IsFixedPoint() bool {
	c := uint32(t) >> 8
	return t != Undefined && (c == 3 || c == 4)
}

// TensorType is a Qnn_TensorType_t.
type TensorType uint32

// Tensor types seen on graph inputs and outputs.
const (
	TensorAppWrite     TensorType = 0 // graph input
	TensorAppRead      TensorType = 1 // graph output
	TensorAppReadWrite TensorType = 2
	TensorNative       TensorType = 3
	TensorStatic       TensorType = 4
	TensorNull         TensorType = 5
)

func (t TensorType) String() string {
	switch t {
	case TensorAppWrite:
		return "APP_WRITE"
	case TensorAppRead:
		return "APP_READ"
	case TensorAppReadWrite:
		return "APP_READWRITE"
	case TensorNative:
		return "NATIVE"
	case TensorStatic:
		return "STATIC"
	case TensorNull:
		return "NULL"
	}
	return fmt.Sprintf("TensorType(%d)", uint32(t))
}

// QuantEncoding is a Qnn_QuantizationEncoding_t.
type QuantEncoding uint32

// Quantization encodings this package copies out of binary info. Others
// are reported by value with no parameters.
const (
	QuantScaleOffset       QuantEncoding = 0
	QuantAxisScaleOffset   QuantEncoding = 1
	QuantBwScaleOffset     QuantEncoding = 2
	QuantBwAxisScaleOffset QuantEncoding = 3
	QuantUndefined         QuantEncoding = 0x7FFFFFFF
)

// Quant is a tensor's quantization: real = (q + Offset) · Scale. QNN's
// Offset is the negated zero point. Per-axis encodings fill Axis, Scales
// and Offsets instead of Scale and Offset.
type Quant struct {
	Encoding QuantEncoding
	Scale    float32
	Offset   int32
	Bitwidth uint32 // BW_* encodings only
	Axis     int32
	Scales   []float32
	Offsets  []int32
}

// TensorInfo describes one graph input or output, copied out of binary info.
type TensorInfo struct {
	ID       uint32 // must be passed back at execute
	Name     string
	Type     TensorType
	DataType DataType
	Dims     []uint32
	Quant    Quant

	version    uint32 // Qnn_Tensor_t version in the binary info (1 or 2)
	dataFormat uint32
	quantDef   uint32 // encodingDefinition
}

// Elements is the product of Dims (1 for a scalar).
func (t TensorInfo) Elements() int {
	n := 1
	for _, d := range t.Dims {
		n *= int(d)
	}
	return n
}

// Bytes is the tensor's size in bytes (sub-byte types rounded up; their
// packing is UNCONFIRMED).
func (t TensorInfo) Bytes() int {
	return (t.Elements()*t.DataType.Bits() + 7) / 8
}

func (t TensorInfo) String() string {
	return fmt.Sprintf("%s %s %v (id %d, %s)", t.Name, t.DataType, t.Dims, t.ID, t.Type)
}

// GraphInfo describes one graph of a context binary.
type GraphInfo struct {
	Name    string
	Inputs  []TensorInfo
	Outputs []TensorInfo
}

// Input returns the input tensor called name.
func (g *GraphInfo) Input(name string) (TensorInfo, bool) { return find(g.Inputs, name) }

// Output returns the output tensor called name.
func (g *GraphInfo) Output(name string) (TensorInfo, bool) { return find(g.Outputs, name) }

func find(ts []TensorInfo, name string) (TensorInfo, bool) {
	for _, t := range ts {
		if t.Name == name {
			return t, true
		}
	}
	return TensorInfo{}, false
}

// binaryMeta is the deep copy of a QnnSystemContext_BinaryInfo_t.
type binaryMeta struct {
	version    uint32
	socVersion string
	socModel   uint32 // V3 only
	graphs     []GraphInfo
}

// parseBinaryInfo deep-copies the binary info at p (owned by the system
// context, freed by systemContextFree).
func parseBinaryInfo(p unsafe.Pointer) (binaryMeta, error) {
	var m binaryMeta
	if p == nil {
		return m, fmt.Errorf("qnn: binary info is NULL")
	}
	m.version = *(*uint32)(p)
	var n uint32
	var graphs unsafe.Pointer
	switch m.version {
	case 1, 2:
		b := (*cBinaryInfoV12)(p)
		m.socVersion = goString(b.socVersion)
		n, graphs = b.numGraphs, b.graphs
	case 3:
		b := (*cBinaryInfoV3)(p)
		m.socVersion, m.socModel = goString(b.socVersion), b.socModel
		n, graphs = b.numGraphs, b.graphs
	default:
		return m, fmt.Errorf("qnn: unsupported binary info version %d", m.version)
	}
	if n > 0 && graphs == nil {
		return m, fmt.Errorf("qnn: binary info lists %d graphs but no array", n)
	}
	for i := range uintptr(n) {
		g := (*cGraphInfo)(unsafe.Add(graphs, i*graphInfoStride))
		if g.version < 1 || g.version > 3 {
			return m, fmt.Errorf("qnn: graph %d: unsupported graph info version %d", i, g.version)
		}
		gi := GraphInfo{Name: goString(g.name)}
		var err error
		if gi.Inputs, err = parseTensors(g.inputs, g.numInputs); err != nil {
			return m, fmt.Errorf("qnn: graph %q inputs: %w", gi.Name, err)
		}
		if gi.Outputs, err = parseTensors(g.outputs, g.numOutputs); err != nil {
			return m, fmt.Errorf("qnn: graph %q outputs: %w", gi.Name, err)
		}
		m.graphs = append(m.graphs, gi)
	}
	return m, nil
}

func parseTensors(p unsafe.Pointer, n uint32) ([]TensorInfo, error) {
	if n > 0 && p == nil {
		return nil, fmt.Errorf("%d tensors but no array", n)
	}
	ts := make([]TensorInfo, 0, n)
	for i := range uintptr(n) {
		t := (*cTensor)(unsafe.Add(p, i*tensorStride))
		if t.version != 1 && t.version != 2 {
			return nil, fmt.Errorf("tensor %d: unsupported tensor version %d", i, t.version)
		}
		ti := TensorInfo{
			ID:         t.id,
			Name:       goString(t.name),
			Type:       TensorType(t.tensorType),
			DataType:   DataType(t.dataType),
			version:    t.version,
			dataFormat: t.dataFormat,
			quantDef:   t.quant.encodingDefinition,
		}
		if t.rank > 0 {
			if t.dimensions == nil {
				return nil, fmt.Errorf("tensor %q: rank %d with NULL dimensions", ti.Name, t.rank)
			}
			ti.Dims = append([]uint32(nil), unsafe.Slice(t.dimensions, t.rank)...)
		}
		ti.Quant = parseQuant(&t.quant)
		ts = append(ts, ti)
	}
	return ts, nil
}

func parseQuant(q *cQuantizeParams) Quant {
	out := Quant{Encoding: QuantEncoding(q.encoding)}
	u := unsafe.Pointer(&q.u)
	switch out.Encoding {
	case QuantScaleOffset:
		so := (*cScaleOffset)(u)
		out.Scale, out.Offset = so.scale, so.offset
	case QuantBwScaleOffset:
		so := (*cBwScaleOffset)(u)
		out.Bitwidth, out.Scale, out.Offset = so.bitwidth, so.scale, so.offset
	case QuantAxisScaleOffset:
		a := (*cAxisScaleOffset)(u)
		out.Axis = a.axis
		if a.scaleOffset != nil {
			for _, so := range unsafe.Slice(a.scaleOffset, a.numScaleOffsets) {
				out.Scales = append(out.Scales, so.scale)
				out.Offsets = append(out.Offsets, so.offset)
			}
		}
	case QuantBwAxisScaleOffset:
		a := (*cBwAxisScaleOffset)(u)
		out.Bitwidth, out.Axis = a.bitwidth, a.axis
		if a.scales != nil {
			out.Scales = append(out.Scales, unsafe.Slice(a.scales, a.numElements)...)
		}
		if a.offsets != nil {
			out.Offsets = append(out.Offsets, unsafe.Slice(a.offsets, a.numElements)...)
		}
	}
	return out
}
