package qnn

import "sync"

// Turn makes the graph executions of several Runtimes take turns on the one
// NPU they share: each Call.Execute holds it for the graph call, and waiters
// get it in arrival order, so a model decoding a long answer lets another
// model's prefill or decode step in between two of its calls instead of
// after its whole request. The zero Turn is ready to use.
//
// It works at the graph call, below the engines' scheduling, so it needs
// nothing from them and covers every call an engine makes (prompt,
// decode and verify rows of its Steps) without wrappers that would have to
// forward each optional model interface.
type Turn struct {
	mu      sync.Mutex
	held    bool
	waiters []chan struct{}
}

// Lock waits for the turn.
func (t *Turn) Lock() {
	t.mu.Lock()
	if !t.held {
		t.held = true
		t.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	t.waiters = append(t.waiters, ch)
	t.mu.Unlock()
	<-ch // Unlock handed the turn over: held stays true
}

// Unlock hands the turn to the longest waiter, if any.
func (t *Turn) Unlock() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.waiters) == 0 {
		t.held = false
		return
	}
	ch := t.waiters[0]
	t.waiters = t.waiters[1:]
	close(ch)
}
