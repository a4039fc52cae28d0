package tinyllama

import "math"

// RingLogits feeds toks to a session of m, evicting n rows after the first
// sink before each position in shifts (ascending), as a ring at the
// original positions does (inference.ContextShifter), and calls f with
// the logits of every position want accepts and the rows then held. It is
// the reference the runners' context-shift tests compare with.
func (m *Model) RingLogits(toks []int32, sink, n int, shifts []int, want func(pos int) bool, f func(pos, rows int, logits []float64)) error {
	s := m.NewSession()
	for pos, tok := range toks {
		if len(shifts) > 0 && shifts[0] == pos {
			if err := s.Evict(sink, n); err != nil {
				return err
			}
			shifts = shifts[1:]
		}
		h, err := s.Append(int(tok))
		if err != nil {
			return err
		}
		if want(pos) {
			f(pos, s.Rows(), m.Logits(h))
		}
	}
	return nil
}

// MaxAbsDiff is max |got[i] − ref[i]|.
func MaxAbsDiff(got []float32, ref []float64) float64 {
	d := 0.0
	for i, v := range ref {
		d = max(d, math.Abs(float64(got[i])-v))
	}
	return d
}
