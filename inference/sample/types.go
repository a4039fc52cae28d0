package sample

import "github.com/hexserve/hexserve/internal/half"

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
		return half.ToFloat32(l.Raw16[i])
	default:
		return (float32(l.Raw16[i]) + float32(l.Offset)) * l.Scale
	}
}

// Params holds a request's sampling parameters. The zero value is greedy.
type Params struct {
	Temperature       float32 // 0: greedy
	TopK              int     // 0: off
	TopP              float32 // 0 or 1: off
	MinP              float32 // 0: off
	PresencePenalty   float32 // OpenAI semantics
	FrequencyPenalty  float32 // OpenAI semantics
	RepetitionPenalty float32 // llama.cpp semantics; 0 or 1: off
	// RepeatLastN, when > 0, limits the repetition penalty to the last N
	// tokens of the sequence (prompt and output, llama.cpp's repeat_last_n);
	// 0: the whole sequence.
	RepeatLastN int
	LogitBias   map[int32]float32
	Seed        *int64 // nil: random
}

// TokenLogprob is the log-probability of one token (log-softmax of the raw logits).
type TokenLogprob struct {
	ID      int32
	Bytes   []byte // the token's decoded bytes (the sampler leaves them to its caller)
	Logprob float32
}

// Logprob describes one generated token: the chosen token and the top alternatives.
type Logprob struct {
	TokenLogprob
	Top []TokenLogprob
}

// Constraint is what the sampler needs of a structured-output constraint:
// whether it allows a token, and the set of all it allows (one bit per
// vocabulary id) when the drawn token was refused.
type Constraint interface {
	Allowed(id int32) bool
	Mask(allowed []uint64)
}
