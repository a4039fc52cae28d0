package qhexrt

import (
	"math"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/internal/rope"
)

// RopeScaling is the Llama-3 frequency scaling of RoPE (Hugging Face's
// rope_scaling with rope_type "llama3"). A zero Factor means no scaling.
type RopeScaling struct {
	RopeType                      string  `json:"rope_type"`
	Factor                        float64 `json:"factor"`
	LowFreqFactor                 float64 `json:"low_freq_factor"`
	HighFreqFactor                float64 `json:"high_freq_factor"`
	OriginalMaxPositionEmbeddings float64 `json:"original_max_position_embeddings"`
}

// Llama32Scaling is the RoPE scaling of Llama-3.2.
var Llama32Scaling = RopeScaling{RopeType: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}

// InvFreq returns the headDim/2 RoPE inverse frequencies for theta, with the
// Llama-3 scaling applied (as Hugging Face's _compute_llama3_parameters).
func InvFreq(headDim int, theta float64, s RopeScaling) []float64 {
	if s.Factor == 0 || (s.RopeType != "" && s.RopeType != "llama3") {
		return rope.InvFreq(headDim, theta, nil)
	}
	return rope.InvFreq(headDim, theta, &rope.Llama3{Factor: s.Factor, LowFreqFactor: s.LowFreqFactor,
		HighFreqFactor: s.HighFreqFactor, OriginalMaxPositions: s.OriginalMaxPositionEmbeddings})
}

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
