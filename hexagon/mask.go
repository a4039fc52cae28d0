package hexagon

import "fmt"

// MaskEncoding is how an attention-mask tensor says attend or blocked.
type MaskEncoding string

// The mask encodings a bundle may use.
const (
	// MaskAdditive adds 0 (attend) or a large negative finite value (blocked)
	// to the attention scores; −inf misbehaves in fp16 on HTP.
	MaskAdditive MaskEncoding = "additive"
	// MaskU16 is 16-bit fixed point as ExecuTorch's graphs use it: raw 65535
	// attends, raw 0 blocks.
	MaskU16 MaskEncoding = "u16"
)

// maskBlocked is the additive mask's blocked value: the most negative finite
// float16, so it survives any conversion to the graph's type.
const maskBlocked = -65504

// maskCodes holds one encoded element for attend and one for blocked, plus
// rows of each to copy from, so mask updates are plain copies.
type maskCodes struct {
	es            int
	open, blocked []byte // n elements each
}

// newMaskCodes encodes attend/blocked in et for enc, with rows of n elements.
func newMaskCodes(enc MaskEncoding, et elemType, n int) (*maskCodes, error) {
	m := &maskCodes{es: et.size()}
	m.open = make([]byte, n*m.es)
	m.blocked = make([]byte, n*m.es)
	var o, b float32
	switch enc {
	case MaskAdditive, "":
		o, b = 0, maskBlocked
		et.put(m.open[:m.es], []float32{o})
		et.put(m.blocked[:m.es], []float32{b})
	case MaskU16:
		if et.size() != 2 || et.code == dtFloat16 {
			return nil, fmt.Errorf("mask encoding u16 needs a 16-bit integer tensor, have %s", et)
		}
		u16View(m.open[:2])[0] = 65535
		u16View(m.blocked[:2])[0] = 0
	default:
		return nil, fmt.Errorf("unknown mask encoding %q (want additive or u16)", enc)
	}
	for i := m.es; i < len(m.open); i += m.es {
		copy(m.open[i:i+m.es], m.open[:m.es])
		copy(m.blocked[i:i+m.es], m.blocked[:m.es])
	}
	return m, nil
}

// row writes a mask row of n elements into dst: [0, open) attend, the rest blocked.
func (m *maskCodes) row(dst []byte, open, n int) {
	copy(dst[:open*m.es], m.open)
	copy(dst[open*m.es:n*m.es], m.blocked)
}

// causal writes a [rows, past+rows] mask: each row r attends to the first
// pastOpen of the past slots and to window columns 0…r (past may be 0).
func (m *maskCodes) causal(dst []byte, rows, past, pastOpen int) {
	w := (past + rows) * m.es
	for r := range rows {
		d := dst[r*w : (r+1)*w]
		m.row(d[:past*m.es], pastOpen, past)
		m.row(d[past*m.es:], r+1, rows)
	}
}
