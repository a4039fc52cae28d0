package pte

import (
	"encoding/json"
	"fmt"
)

// Method names of ExecuTorch's static-llama hybrid export (decoder_constants.py).
const (
	MethodPrefill = "prefill_forward"
	MethodDecode  = "kv_forward"
)

// QNNBackendID is BackendDelegate.id of a QNN delegate.
const QNNBackendID = "QnnBackend"

// QNNCompileSpecKey is the compile spec holding a QnnExecuTorchOptions flatbuffer.
const QNNCompileSpecKey = "qnn_compile_spec"

// ScalarType is a tensor element type (scalar_type.fbs).
type ScalarType int8

// The scalar types static-llama exports use.
const (
	Byte     ScalarType = 0 // uint8
	Char     ScalarType = 1 // int8
	Short    ScalarType = 2
	Int      ScalarType = 3 // int32
	Long     ScalarType = 4 // int64
	Half     ScalarType = 5
	Float    ScalarType = 6
	Double   ScalarType = 7
	Bool     ScalarType = 11
	UInt16   ScalarType = 27
	UInt32   ScalarType = 28
	UInt64   ScalarType = 29
	BFloat16 ScalarType = 15
)

var scalarNames = map[ScalarType]string{Byte: "BYTE", Char: "CHAR", Short: "SHORT", Int: "INT", Long: "LONG",
	Half: "HALF", Float: "FLOAT", Double: "DOUBLE", Bool: "BOOL", BFloat16: "BFLOAT16", UInt16: "UINT16",
	UInt32: "UINT32", UInt64: "UINT64"}

func (s ScalarType) String() string { return enumName(scalarNames, s) }

// MarshalText writes the schema's name.
func (s ScalarType) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Size is the element size in bytes, or 0 when unknown.
func (s ScalarType) Size() int {
	switch s {
	case Byte, Char, Bool:
		return 1
	case Short, Half, UInt16, BFloat16:
		return 2
	case Int, Float, UInt32:
		return 4
	case Long, Double, UInt64:
		return 8
	}
	return 0
}

// Tensor is a plan-level tensor declaration.
type Tensor struct {
	Type     ScalarType `json:"scalar_type"`
	Sizes    []int32    `json:"sizes"`
	DimOrder []uint8    `json:"dim_order,omitempty"` // nil means identity
}

// ValueKind is the EValue union tag.
type ValueKind uint8

// EValue kinds (program.fbs KernelTypes).
const (
	KindNone ValueKind = iota
	KindNull
	KindInt
	KindBool
	KindDouble
	KindTensor
	KindString
	KindIntList
	KindDoubleList
	KindBoolList
	KindTensorList
	KindOptionalTensorList
)

var kindNames = map[ValueKind]string{KindNone: "None", KindNull: "Null", KindInt: "Int", KindBool: "Bool",
	KindDouble: "Double", KindTensor: "Tensor", KindString: "String", KindIntList: "IntList",
	KindDoubleList: "DoubleList", KindBoolList: "BoolList", KindTensorList: "TensorList",
	KindOptionalTensorList: "OptionalTensorList"}

func (k ValueKind) String() string { return enumName(kindNames, k) }

// Value is an EValue. Only the field of its Kind is set; List holds IntList
// items and TensorList/OptionalTensorList value indices.
type Value struct {
	Kind   ValueKind
	Int    int64
	Bool   bool
	Double float64
	String string
	Tensor *Tensor
	List   []int64
}

// IntValue, BoolValue, DoubleValue, StringValue and TensorValue build Values.
func IntValue(v int64) Value      { return Value{Kind: KindInt, Int: v} }
func BoolValue(v bool) Value      { return Value{Kind: KindBool, Bool: v} }
func DoubleValue(v float64) Value { return Value{Kind: KindDouble, Double: v} }
func StringValue(v string) Value  { return Value{Kind: KindString, String: v} }
func TensorValue(t ScalarType, sizes ...int32) Value {
	return Value{Kind: KindTensor, Tensor: &Tensor{Type: t, Sizes: sizes}}
}

// Any is the Go value of a constant (int64, bool, float64, string, []int64),
// a *Tensor, or nil for Null and None.
func (v Value) Any() any {
	switch v.Kind {
	case KindInt:
		return v.Int
	case KindBool:
		return v.Bool
	case KindDouble:
		return v.Double
	case KindString:
		return v.String
	case KindTensor:
		return v.Tensor
	case KindIntList, KindTensorList, KindOptionalTensorList:
		return v.List
	}
	return nil
}

// InstrKind is the Instruction union tag.
type InstrKind uint8

// Instruction kinds (program.fbs InstructionArguments).
const (
	KernelCall    InstrKind = 1
	DelegateCall  InstrKind = 2
	MoveCall      InstrKind = 3
	JumpFalseCall InstrKind = 4
	FreeCall      InstrKind = 5
)

var instrNames = map[InstrKind]string{KernelCall: "KernelCall", DelegateCall: "DelegateCall", MoveCall: "MoveCall",
	JumpFalseCall: "JumpFalseCall", FreeCall: "FreeCall"}

func (k InstrKind) String() string { return enumName(instrNames, k) }

// MarshalText writes the schema's name.
func (k InstrKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Instruction is one step of a plan's chain. Op (KernelCall) and Delegate
// (DelegateCall) index the plan's Operators and Delegates; Args index its
// Values (a DelegateCall lists the delegate's inputs, then its outputs).
type Instruction struct {
	Kind     InstrKind `json:"kind"`
	Op       int32     `json:"op,omitempty"`
	Delegate int32     `json:"delegate,omitempty"`
	Args     []int32   `json:"args,omitempty"`
}

// Operator is a CPU kernel a plan calls (e.g. llama::fallback.out, the
// identity copy between shards).
type Operator struct {
	Name     string `json:"name"`
	Overload string `json:"overload,omitempty"`
}

// FallbackOp is the identity-copy kernel ExecuTorch's sharded llama exports
// run between shards (extension/llm/custom_ops/op_fallback.cpp).
var FallbackOp = Operator{Name: "llama::fallback", Overload: "out"}

// DataLocation says where a delegate's payload is.
type DataLocation uint8

// Payload locations.
const (
	Inline  DataLocation = 0 // Program.backend_delegate_data[index]
	Segment DataLocation = 1 // Program.segments[index]
)

func (l DataLocation) String() string {
	return enumName(map[DataLocation]string{Inline: "INLINE", Segment: "SEGMENT"}, l)
}

// MarshalText writes the schema's name.
func (l DataLocation) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// CompileSpec is one key/value compile spec of a delegate.
type CompileSpec struct {
	Key   string
	Value []byte
}

func enumName[K ~int8 | ~uint8 | ~int32](names map[K]string, k K) string {
	if s, ok := names[k]; ok {
		return s
	}
	return fmt.Sprintf("%d", k)
}

// MarshalJSON writes the constant itself (512, true, "torch.uint8", ...),
// or {"tensor": ...} for a tensor and null for Null and None.
func (v Value) MarshalJSON() ([]byte, error) {
	if v.Kind == KindTensor {
		return json.Marshal(map[string]*Tensor{"tensor": v.Tensor})
	}
	return json.Marshal(v.Any())
}
