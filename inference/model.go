package inference

import (
	"context"
	"time"

	"github.com/hexserve/hexserve/internal/half"
)

// ModelInfo describes a loaded model to the engine.
type ModelInfo struct {
	Name          string  // model name from the bundle
	VocabSize     int     // rows of the lm-head output (128,256 for Llama-3.2)
	ContextLen    int     // KV cache rows (512 on the seed bundle)
	PrefillWindow int     // tokens per prefill graph call (128 on the seed bundle)
	BOS           int32   // begin-of-text id
	EOS           []int32 // ids that end a turn (eot, eom, end_of_text)
}

// Model is what the engine needs from a model runner. hexagon implements it on
// QNN graphs; tests use fakes. Calls are never concurrent.
type Model interface {
	Info() ModelInfo
	// Eval makes the KV cache hold seq and returns the logits after its last
	// token. Rows [0, valid) already hold seq[:valid] from earlier calls; the
	// model evaluates the rest, or recomputes from an earlier row when its cost
	// model says that is cheaper. It returns how many rows it reused. The
	// returned Logits alias the model's output buffer and are valid until the
	// next call. ctx is checked between graph calls.
	Eval(ctx context.Context, seq []int32, valid int) (logits Logits, reused int, err error)
	Close() error
}

// DType is the element type of a Logits buffer.
type DType uint8

// The logit element types the lm-head graph may produce.
const (
	F32 DType = iota // float32
	F16              // IEEE 754 half precision, raw bits
	U16              // unsigned 16-bit fixed point: real = (q + Offset) * Scale
)

// Logits is one position's lm-head output in the graph's native type, so the
// sampler can read it without a conversion pass. Exactly one of F32 and Raw16
// is set, per Type.
type Logits struct {
	Type   DType
	F32    []float32
	Raw16  []uint16
	Scale  float32 // U16 only
	Offset int32   // U16 only
}

// Len is the number of logits (the vocabulary size).
func (l Logits) Len() int {
	if l.Type == F32 {
		return len(l.F32)
	}
	return len(l.Raw16)
}

// At returns logit i as float32.
func (l Logits) At(i int) float32 {
	switch l.Type {
	case F32:
		return l.F32[i]
	case F16:
		return HalfToFloat(l.Raw16[i])
	default:
		return (float32(l.Raw16[i]) + float32(l.Offset)) * l.Scale
	}
}

// HalfToFloat converts IEEE 754 half-precision bits to float32.
func HalfToFloat(h uint16) float32 { return half.ToFloat32(h) }

// Optional model capabilities. The engine discovers them with a type
// assertion on its Model; a model without one keeps plain behaviour. They are
// designed together: speculative decoding (Verifier) writes rows past the
// accepted tokens that the next call's valid count rolls back, and the KV
// store (KVSnapshotter) only ever saves committed rows [0, valid).

// Verifier evaluates several tokens in one multi-token graph call over the KV
// cache, for speculative decoding. Models whose multi-token graph takes past
// KV (chunked QHexRT bundles, ExecuTorch prefill_forward) implement it.
type Verifier interface {
	// MaxVerify is the most tokens one Verify call may evaluate when rows
	// [0, valid) are committed (0: none fit, decode plainly).
	MaxVerify(valid int) int
	// Verify makes rows [valid, len(seq)) hold seq[valid:] in one graph call
	// (the last accepted token plus the draft) and returns their logits,
	// produced lazily and in order so a mismatch stops further lm-head work.
	// Rows the caller does not accept are simply not committed: the next
	// Eval or Verify passes a smaller valid.
	Verify(ctx context.Context, seq []int32, valid int) (Rows, error)
	// Costs are the model's current estimates of one Verify call of k tokens
	// and of one plain decode step, for deciding the draft length.
	Costs(k int) (verify, decode time.Duration)
}

// Rows are the per-token logits of one Verify call.
type Rows interface {
	Len() int
	// Logits returns row i (the logits after seq[valid+i]); rows are asked
	// for in ascending order. The result is valid until the next call on
	// Rows or the model.
	Logits(ctx context.Context, i int) (Logits, error)
}

// KVSnapshotter copies committed KV rows out of the resident cache and back,
// for a store of many conversations' prefixes (host memory or disk).
type KVSnapshotter interface {
	// KVLayout describes one cache row (all layers, K and V, native dtype).
	KVLayout() KVLayout
	// SaveKV copies rows [from, to) into dst, len(dst) = (to-from)*RowBytes.
	// Only committed rows may be saved (to <= the rows valid after the last
	// Eval; never rows a Verify wrote past the accepted tokens). The row
	// format is the model's own but must be self-contained per row: a model
	// whose cache is not row-major (the .pte runner's per-layer K is
	// transposed, [n_kv, hd, S]) gathers each row's elements on save and
	// scatters them on restore, so saved rows survive a change of graphs
	// (re-striding) in between.
	SaveKV(from, to int, dst []byte) error
	// RestoreKV copies src into rows [from, from+len(src)/RowBytes); the
	// next Eval may then pass valid up to that row.
	RestoreKV(from int, src []byte) error
}

// KVLayout identifies the format of saved rows: a snapshot is restored only
// into a model whose layout is equal.
type KVLayout struct {
	Identity string // model identity: file name, size and a hash of its header, graph shapes, dtypes
	RowBytes int    // bytes of one row over all layers, K and V
}
