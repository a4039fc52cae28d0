package qhexrt

import (
	"math"

	"github.com/hexserve/hexserve/hexagon/graphio"
)

// ropeRow writes the full-width cos and sin rows for position pos in the
// rotate-half layout: columns d and d+D/2 hold the angle pos·inv[d].
func ropeRow(cos, sin []float32, inv []float64, pos int) {
	h := len(inv)
	for d, f := range inv {
		s, c := math.Sincos(float64(pos) * f)
		cos[d], cos[d+h] = float32(c), float32(c)
		sin[d], sin[d+h] = float32(s), float32(s)
	}
}

// ropeTable holds the encoded cos and sin rows of positions [0, rows) in a
// graph tensor's element type, so a step copies one row per input; a row
// past them (a sequence gone on past the window after a context shift) is
// computed when asked for.
type ropeTable struct {
	rowBytes int
	cos, sin []byte
	inv      []float64
	et       graphio.Elem
	c, s     []float32 // rows' scratch
}

// newRopeTable precomputes rows positions of width 2·len(inv) encoded as et.
func newRopeTable(inv []float64, rows int, et graphio.Elem) *ropeTable {
	d := 2 * len(inv)
	t := &ropeTable{rowBytes: d * et.Size(), inv: inv, et: et, c: make([]float32, d), s: make([]float32, d)}
	t.cos = make([]byte, rows*t.rowBytes)
	t.sin = make([]byte, rows*t.rowBytes)
	c, s := make([]float32, d), make([]float32, d)
	for p := range rows {
		ropeRow(c, s, inv, p)
		et.Put(t.cos[p*t.rowBytes:(p+1)*t.rowBytes], c)
		et.Put(t.sin[p*t.rowBytes:(p+1)*t.rowBytes], s)
	}
	return t
}

// rows copies the cos/sin rows of positions [pos, pos+n) into dst buffers.
func (t *ropeTable) rows(cos, sin []byte, pos, n int) {
	a, b := pos*t.rowBytes, (pos+n)*t.rowBytes
	if b <= len(t.cos) {
		copy(cos, t.cos[a:b])
		copy(sin, t.sin[a:b])
		return
	}
	for i := range n {
		ropeRow(t.c, t.s, t.inv, pos+i)
		t.et.Put(cos[i*t.rowBytes:(i+1)*t.rowBytes], t.c)
		t.et.Put(sin[i*t.rowBytes:(i+1)*t.rowBytes], t.s)
	}
}
