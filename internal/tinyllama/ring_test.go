package tinyllama

import "testing"

// TestRingLogits: RingLogits with no shifts gives a plain session's logits,
// and with one it holds the rows the eviction left and differs after it.
func TestRingLogits(t *testing.T) {
	m, err := NewModel(Tiny())
	if err != nil {
		t.Fatal(err)
	}
	ids := []int{128000, 5, 9, 300, 7, 12, 40}
	toks := make([]int32, len(ids))
	for i, id := range ids {
		toks[i] = int32(id)
	}
	want, err := m.Forward(ids) // a plain session's logits
	if err != nil {
		t.Fatal(err)
	}
	all := func(int) bool { return true }
	err = m.RingLogits(toks, 1, 2, nil, all, func(pos, rows int, l []float64) {
		if d := MaxAbsDiff(toF32(l), want[pos]); d > 1e-4 || rows != pos+1 {
			t.Errorf("no shifts: position %d differs by %g with %d rows", pos, d, rows)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	err = m.RingLogits(toks, 1, 2, []int{4}, all, func(pos, rows int, l []float64) {
		switch d := MaxAbsDiff(toF32(l), want[pos]); {
		case pos < 4 && (d > 1e-4 || rows != pos+1):
			t.Errorf("before the shift: position %d differs by %g with %d rows", pos, d, rows)
		case pos >= 4 && (d == 0 || rows != pos-1):
			t.Errorf("after the shift: position %d differs by %g with %d rows (want %d)", pos, d, rows, pos-1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

func toF32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
