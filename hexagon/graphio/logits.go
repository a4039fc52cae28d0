package graphio

import (
	"fmt"

	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/inference/sample"
)

// Logits views a logits buffer of element type e for the sampler: float32,
// float16, or ufixed16 codes with their scale and offset (dequantised by
// the sampler, never sampled as raw codes).
func Logits(e Elem, b []byte) (sample.Logits, error) {
	switch e.Type {
	case qnn.Float32:
		return sample.Logits{Type: sample.F32, F32: F32(b)}, nil
	case qnn.Float16:
		return sample.Logits{Type: sample.F16, Raw16: U16(b)}, nil
	case qnn.UFixed16:
		return sample.Logits{Type: sample.U16, Raw16: U16(b), Scale: e.Scale, Offset: e.Offset}, nil
	}
	return sample.Logits{}, fmt.Errorf("logits are %s; want float32, float16 or ufixed16", e)
}

// Row is row i of logits holding rows of vocab entries.
func Row(l sample.Logits, i, vocab int) sample.Logits {
	if l.Type == sample.F32 {
		l.F32 = l.F32[i*vocab : (i+1)*vocab]
	} else {
		l.Raw16 = l.Raw16[i*vocab : (i+1)*vocab]
	}
	return l
}
