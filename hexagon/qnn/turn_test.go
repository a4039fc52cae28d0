package qnn

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestTurn: one holder at a time, and waiters get the turn in arrival order
// (a model that asks again right after its call queues behind the others).
func TestTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var turn Turn
		var mu sync.Mutex
		var order []string
		holders := 0
		step := func(name string) {
			turn.Lock()
			mu.Lock()
			holders++
			if holders != 1 {
				t.Errorf("%d holders", holders)
			}
			order = append(order, name)
			mu.Unlock()
			time.Sleep(10 * time.Millisecond) // a graph call
			mu.Lock()
			holders--
			mu.Unlock()
			turn.Unlock()
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			for range 3 {
				step("a")
			}
		})
		time.Sleep(time.Millisecond) // a is in its first call
		wg.Go(func() {
			for range 3 {
				step("b")
			}
		})
		wg.Wait()
		if want := []string{"a", "b", "a", "b", "a", "b"}; !slices.Equal(order, want) {
			t.Errorf("order = %v, want %v", order, want)
		}
	})
}
