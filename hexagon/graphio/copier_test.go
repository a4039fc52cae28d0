package graphio

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
	c := NewCopier(5, 0, func(k int) int { return k }, func(k int) { ran = append(ran, k) })
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
	c := NewCopier(3, 2, func(k int) int { return k }, func(k int) {
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
	c := NewCopier(2, 1, func(k int) int { return k }, func(k int) { ran = append(ran, k) })
	c.Queue(0, 1)
	c.Close()
	if c.Pending() != 0 || len(ran) != 2 {
		t.Errorf("after Close: %d pending, ran %v", c.Pending(), ran)
	}
}
