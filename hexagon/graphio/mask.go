package graphio

import (
	"fmt"

	"github.com/hexserve/hexserve/hexagon/qnn"
)

// MaskEncoding is how an attention-mask tensor says attend or blocked.
type MaskEncoding string

// The mask encodings.
const (
	// MaskAdditive adds 0 (attend) or Blocked to the attention scores in
	// float masks; fixed-point masks attend with the code of 0.0 (−offset:
	// 65535 for ExecuTorch's uint16 mask) and block with the lowest code.
	// Raw uint8/uint16 masks attend with the highest code and block with 0.
	MaskAdditive MaskEncoding = "additive"
	// MaskU16 is raw 16-bit codes whatever the quantisation: 65535 attends,
	// 0 blocks.
	MaskU16 MaskEncoding = "u16"
)

// Blocked is the additive mask's blocked value: the most negative finite
// float16, so it survives any conversion to the graph's type (ExecuTorch's
// fill_mask writes −65535 into float32 masks: the same after softmax).
const Blocked = -65504

// Mask holds one attend and one blocked element of a mask tensor in its own
// encoding, so that mask updates are plain copies.
type Mask struct {
	es            int
	open, blocked [8]byte
}

// NewMask encodes attend and blocked for a mask tensor of element type e.
func NewMask(e Elem, enc MaskEncoding) (*Mask, error) {
	m := &Mask{es: e.Size()}
	switch enc {
	case MaskU16:
		if e.Size() != 2 || e.Type == qnn.Float16 {
			return nil, fmt.Errorf("mask encoding u16 needs a 16-bit integer tensor, have %s", e)
		}
		U16(m.open[:2])[0] = 65535
	case MaskAdditive, "":
		switch {
		case e.Type == qnn.Float32 || e.Type == qnn.Float16:
			e.Put(m.blocked[:m.es], []float32{Blocked})
		case e.Quantized():
			lo, hi := e.Range()
			open := float64(-e.Offset)
			if open <= lo || open > hi {
				return nil, fmt.Errorf("mask %s cannot express attend (0.0) above blocked (code %g)", e, lo)
			}
			e.Put(m.open[:m.es], []float32{0})
			e.Put(m.blocked[:m.es], []float32{Blocked})
		case e.Type == qnn.Uint8 || e.Type == qnn.Uint16:
			_, hi := e.Range()
			for i := range m.es {
				m.open[i] = byte(uint64(hi) >> (8 * i))
			}
		default:
			return nil, fmt.Errorf("mask is %s; want float32/16, ufixed or sfixed 8/16, uint8 or uint16", e)
		}
	default:
		return nil, fmt.Errorf("unknown mask encoding %q (want additive or u16)", enc)
	}
	return m, nil
}

// Fill writes elements [from, to) of b with attend or blocked codes.
func (m *Mask) Fill(b []byte, from, to int, attend bool) {
	if to <= from {
		return
	}
	c := m.blocked[:m.es]
	if attend {
		c = m.open[:m.es]
	}
	d := b[from*m.es : to*m.es]
	n := copy(d, c)
	for n < len(d) {
		n += copy(d[n:], d[:n])
	}
}

// Row writes a mask row of n elements: [0, open) attend, the rest blocked.
func (m *Mask) Row(dst []byte, open, n int) {
	m.Fill(dst, 0, open, true)
	m.Fill(dst, open, n, false)
}

// Causal writes a [rows, past+rows] mask: each row r attends to the first
// pastOpen of the past slots and to window columns 0…r (past may be 0).
func (m *Mask) Causal(dst []byte, rows, past, pastOpen int) {
	w := (past + rows) * m.es
	for r := range rows {
		d := dst[r*w : (r+1)*w]
		m.Row(d[:past*m.es], pastOpen, past)
		m.Row(d[past*m.es:], r+1, rows)
	}
}
