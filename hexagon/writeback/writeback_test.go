package writeback

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// TestCopierWaitKeys: waiting for some keys runs queued copies (oldest
// first) until those are done and leaves the rest queued.
func TestCopierWaitKeys(t *testing.T) {
	var ran []int
	c := New(5, 0, func(k int) int { return k }, func(k int) { ran = append(ran, k) })
	defer c.Close()
	for k := range 5 {
		c.Submit(k)
	}
	if !c.Wait([]int{1}) || !slices.Equal(ran, []int{0, 1}) || c.Pending() != 3 {
		t.Fatalf("Wait(1) ran %v, %d pending; want [0 1], 3", ran, c.Pending())
	}
	if c.Wait([]int{0, 1}) {
		t.Error("Wait for finished keys waited")
	}
	if c.Wait(nil) {
		t.Error("Wait for no keys waited")
	}
	if !c.WaitAll() || !slices.Equal(ran, []int{0, 1, 2, 3, 4}) || c.Pending() != 0 {
		t.Fatalf("WaitAll ran %v, %d pending", ran, c.Pending())
	}
}

// TestCopierQueueStart: queued copies wait for Start (or a wait) while the
// workers sleep; after Start the workers run them with nobody waiting, and
// their time counts as off the critical path.
func TestCopierQueueStart(t *testing.T) {
	var mu sync.Mutex
	var ran []int
	c := New(3, 2, func(k int) int { return k }, func(k int) {
		time.Sleep(time.Millisecond)
		mu.Lock()
		ran = append(ran, k)
		mu.Unlock()
	})
	defer c.Close()
	c.Queue(0, 1)
	time.Sleep(20 * time.Millisecond)
	mu.Lock()
	n := len(ran)
	mu.Unlock()
	if n != 0 || c.Pending() != 2 {
		t.Fatalf("before Start: %d copies ran, %d pending; want 0, 2", n, c.Pending())
	}
	c.Queue(2)
	c.Start()
	for deadline := time.Now().Add(10 * time.Second); c.Pending() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("started copies not run by the workers: %d pending", c.Pending())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if slices.Sort(ran); !slices.Equal(ran, []int{0, 1, 2}) || c.OffPath() < 3*time.Millisecond {
		t.Errorf("workers ran %v in %v; want [0 1 2], ≥ 3ms", ran, c.OffPath())
	}
}

// TestCopierCloseFinishes: Close runs what is still queued, then the
// workers end.
func TestCopierCloseFinishes(t *testing.T) {
	var ran []int
	c := New(2, 1, func(k int) int { return k }, func(k int) { ran = append(ran, k) })
	c.Queue(0, 1)
	c.Close()
	if c.Pending() != 0 || len(ran) != 2 {
		t.Errorf("after Close: %d pending, ran %v", c.Pending(), ran)
	}
}

// TestCopierPolls: where a wake is dear, the workers that ran handed
// copies poll for the next ones while Hands keep coming, so a Hand wakes
// nobody; once Hands stop they sleep again, and Close ends them at once.
// Where wakes are cheap, or the copies come with Start, every call wakes the
// sleeping worker.
func TestCopierPolls(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dear      time.Duration // a wake costing more is dear
		hand      bool          // Hand, not Start
		wantWakes func(n int) bool
	}{
		// The first two Hands wake it (the second measures the gap);
		// a loaded machine may let a poll lapse now and then.
		{"dear", 0, true, func(n int) bool { return n <= 5 }},
		{"cheap", time.Hour, true, func(n int) bool { return n == 20 }},
		{"start", 0, false, func(n int) bool { return n == 20 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(2, 1, func(k int) int { return k }, func(int) {})
			c.mu.Lock()
			c.dear = tc.dear
			c.mu.Unlock()
			sleeping := func() bool {
				c.mu.Lock()
				defer c.mu.Unlock()
				return c.sleepers == 1 && c.pending == 0
			}
			for deadline := time.Now().Add(10 * time.Second); !sleeping(); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the worker did not start")
				}
			}
			for i := range 20 {
				c.Queue(i % 2)
				if tc.hand {
					c.Hand()
				} else {
					c.Start()
				}
				for deadline := time.Now().Add(10 * time.Second); c.Pending() > 0; time.Sleep(100 * time.Microsecond) {
					if time.Now().After(deadline) {
						t.Fatalf("copy %d not run by the worker", i)
					}
				}
				time.Sleep(4 * time.Millisecond)
				if !tc.hand && !sleeping() {
					t.Fatalf("copy %d: the worker polls after a Start", i)
				}
			}
			c.mu.Lock()
			wakes := c.wakes
			c.mu.Unlock()
			if !tc.wantWakes(wakes) {
				t.Errorf("20 calls woke the worker %d times", wakes)
			}
			for deadline := time.Now().Add(10 * time.Second); !sleeping(); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the worker still polls long after the last Hand")
				}
			}
			c.Close()
		})
	}
}

// TestCopierPauseKeepsGap checks that a pause long enough for the workers to
// stop polling does not count as a gap between Hands: after it they poll as
// often as before it.
func TestCopierPauseKeepsGap(t *testing.T) {
	c := New(1, 1, func(k int) int { return k }, func(int) {})
	defer c.Close()
	c.mu.Lock()
	c.dear = 0
	c.mu.Unlock()
	gap := func() time.Duration {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.gap
	}
	for range 8 {
		c.Queue(0)
		c.Hand()
		time.Sleep(2 * time.Millisecond)
	}
	before := gap()
	time.Sleep(300 * time.Millisecond) // well past 2·gap: polling stopped
	c.Queue(0)
	c.Hand()
	if after := gap(); after != before {
		t.Errorf("gap %v after a 300 ms pause, want %v as before it", after, before)
	}
	c.WaitAll()
}
