package executorch

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// maxCopyWorkers bounds the copier's goroutines: the transposed K copy is
// bound by memory latency, and a few cores' outstanding misses are what it
// can use; the caller's own core is one more.
const maxCopyWorkers = 3

// copyWorkers is the copier size for this process: GOMAXPROCS − 1 (the
// caller helps), at most maxCopyWorkers.
func copyWorkers() int { return min(runtime.GOMAXPROCS(0)-1, maxCopyWorkers) }

// layerCopy copies one layer's n new entries (K and V) from entry from…
// of method m's outputs into cache slots start… of caches of stride slots
// per row.
type layerCopy struct {
	m                         *method
	layer, start, from, n, st int
}

// copier runs layer copies on a small persistent set of goroutines, so a
// shard's copy overlaps the next shard's graph call, and the last shard's
// overlaps the engine's sampling and the next token's earlier shards. wait
// finishes the copies of some layers (or all), the caller taking queued
// copies itself: on the critical path the copy is split between the
// caller's core and the workers'. With no workers, copies run at the next
// wait.
type copier struct {
	run func(layerCopy)

	mu      sync.Mutex
	work    sync.Cond // a copy was queued, or close
	idle    sync.Cond // a copy finished
	queue   []layerCopy
	head    int   // queue[head:] are not yet taken
	pending int   // queued or running
	busy    []int // per layer: copies queued or running
	closed  bool
	exited  sync.WaitGroup

	off atomic.Int64 // ns the workers spent copying
}

// newCopier starts workers goroutines that copy layers [0, layers) with run.
func newCopier(layers, workers int, run func(layerCopy)) *copier {
	c := &copier{run: run, busy: make([]int, layers)}
	c.work.L, c.idle.L = &c.mu, &c.mu
	for range workers {
		c.exited.Add(1)
		go c.worker()
	}
	return c
}

func (c *copier) worker() {
	defer c.exited.Done()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for c.head == len(c.queue) && !c.closed {
			c.work.Wait()
		}
		if c.head == len(c.queue) {
			return
		}
		t := c.take()
		c.mu.Unlock()
		t0 := time.Now()
		c.run(t)
		c.off.Add(int64(time.Since(t0)))
		c.mu.Lock()
		c.done(t)
	}
}

// take pops the oldest queued copy; c.mu is held and the queue not empty.
func (c *copier) take() layerCopy {
	t := c.queue[c.head]
	c.queue[c.head] = layerCopy{}
	if c.head++; c.head == len(c.queue) {
		c.queue, c.head = c.queue[:0], 0
	}
	return t
}

// done counts a finished copy; c.mu is held.
func (c *copier) done(t layerCopy) {
	c.pending--
	c.busy[t.layer]--
	c.idle.Broadcast()
}

// submit queues copies for the workers.
func (c *copier) submit(ts ...layerCopy) {
	if len(ts) == 0 {
		return
	}
	c.mu.Lock()
	c.queue = append(c.queue, ts...)
	c.pending += len(ts)
	for _, t := range ts {
		c.busy[t.layer]++
	}
	c.mu.Unlock()
	c.work.Broadcast()
}

// wait returns when every submitted copy of layers has finished, running
// the oldest queued copies on the calling goroutine meanwhile. It reports
// whether it had to wait.
func (c *copier) wait(layers []int) bool {
	return c.waitUntil(func() bool {
		for _, l := range layers {
			if c.busy[l] > 0 {
				return false
			}
		}
		return true
	})
}

// waitAll is wait for every layer.
func (c *copier) waitAll() bool { return c.waitUntil(func() bool { return c.pending == 0 }) }

// waitUntil runs queued copies, or waits for running ones, until done
// (called with c.mu held) holds.
func (c *copier) waitUntil(done func() bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	waited := false
	for !done() {
		waited = true
		if c.head < len(c.queue) {
			t := c.take()
			c.mu.Unlock()
			c.run(t)
			c.mu.Lock()
			c.done(t)
			continue
		}
		c.idle.Wait()
	}
	return waited
}

// offPath is the workers' cumulative time copying.
func (c *copier) offPath() time.Duration { return time.Duration(c.off.Load()) }

// close finishes the pending copies and stops the workers.
func (c *copier) close() {
	c.waitAll()
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.work.Broadcast()
	c.exited.Wait()
}
