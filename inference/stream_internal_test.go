package inference

import "testing"

// TestStreamBufferReused: once the pump has handed a buffer back, a push
// does not allocate (a token's event used to cost a new buffer), and the
// events handed over are the ones pushed, in order.
func TestStreamBufferReused(t *testing.T) {
	s := &Stream{notify: make(chan struct{}, 1)}
	var evs []Event
	for i := range 3 { // warm up: both buffers exist
		s.push(Event{Choice: i})
		evs, _ = s.take(evs)
	}
	n := 0
	allocs := testing.AllocsPerRun(100, func() {
		s.push(Event{Choice: n, Text: "a"})
		s.push(Event{Choice: n + 1})
		got, _ := s.take(evs)
		if len(got) != 2 || got[0].Choice != n || got[0].Text != "a" || got[1].Choice != n+1 {
			t.Fatalf("take = %+v, want choices %d, %d", got, n, n+1)
		}
		evs = got
		n += 2
		<-s.notify
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per push and take, want 0", allocs)
	}
}
