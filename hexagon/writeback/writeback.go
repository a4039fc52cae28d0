// Package writeback runs a model runner's KV-cache write-back off the
// critical path: the copies of a graph call's new K/V entries into the
// host-side cache, done by a few persistent workers while the engine goes
// on, and waited for by whatever next reads or writes the cache (Copier).
package writeback

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// maxCopyWorkers bounds a Copier's goroutines: a runner's KV write-back is
// bound by memory latency, and a few cores' outstanding misses are what it
// can use; the caller's own core is one more.
const maxCopyWorkers = 3

// Workers is the Copier size for this process: GOMAXPROCS − 1 (the
// caller helps), at most 3.
func Workers() int { return min(runtime.GOMAXPROCS(0)-1, maxCopyWorkers) }

// Copier is a runner's KV write-back off the critical path: copies of a
// call's new K/V entries into the host-side cache, run by a small
// persistent set of goroutines while the caller does its own work (the
// engine's sampling, the next shard's graph call). Each copy has a key in
// [0, keys) (a layer); Wait finishes the copies of some keys, WaitAll all,
// and whoever comes first runs a queued copy: a waiting caller takes the
// copies no worker has started, so a copy is never both waited for and
// idle. Everything that reads or writes the cache or the new-entry outputs
// waits first. With no workers the copies run at the next wait.
//
// Waking a sleeping worker costs the caller a system call (on a VM, an
// inter-processor interrupt: tens of µs here), so copies are queued (Queue)
// and the workers woken once for a batch (Start); Submit is both. Where a
// wake is measured to cost more than pollWake, the workers that just ran
// copies handed over with Hand (copies not needed before the caller's next
// graph call, as a sharded .pte's) keep looking for the next ones on a
// timer instead (every quarter of the recent time between Hands, while
// Hands keep coming), and a Hand finds them awake and wakes nobody: the
// wake leaves the caller's critical path for a timer interrupt on the
// worker's core. A copy no poll has reached yet is run by the caller's
// wait, as always. A Copier is safe for one caller and its workers;
// OffPath is safe from any goroutine.
type Copier[T any] struct {
	run func(T)
	key func(T) int

	mu      sync.Mutex
	work    sync.Cond // copies were started, or Close
	idle    sync.Cond // a copy finished
	queue   []T
	head    int   // queue[head:] are not yet taken
	started int   // queue[head:started] are started: the workers take them
	pending int   // queued or running
	busy    []int // per key: copies queued or running
	closed  bool
	exited  sync.WaitGroup

	// Polling (see above): sleepers counts workers waiting on work (a
	// Start or Hand must wake them); the rest poll. wake is the recent cost
	// of a wake, gap the recent time between Hands that handed copies over,
	// last the latest of those.
	sleepers  int
	wakes     int           // Starts and Hands that woke workers
	dear      time.Duration // pollWake (tests change it)
	wake, gap time.Duration
	last      time.Time
	kick      chan struct{} // Close ends the pollers' sleep
	nudge     chan struct{} // a Start ends a poller's sleep

	off atomic.Int64 // ns the workers spent copying
}

// Polling thresholds: workers poll when a wake costs more than pollWake,
// at a quarter of the time between Hands (at least minPoll); a gap counts
// as at most maxGap, so that polling stops at most ≈ 2·maxGap after the
// last Hand (a pause past that, see lapse, does not count at all).
const (
	pollWake = 10 * time.Microsecond
	minPoll  = 250 * time.Microsecond
	maxGap   = 2 * time.Second
)

// New starts workers goroutines that run copies of keys [0, keys)
// with run; key gives a copy's key.
func New[T any](keys, workers int, key func(T) int, run func(T)) *Copier[T] {
	c := &Copier[T]{run: run, key: key, busy: make([]int, keys), dear: pollWake,
		kick: make(chan struct{}), nudge: make(chan struct{}, 1)}
	c.work.L, c.idle.L = &c.mu, &c.mu
	for range workers {
		c.exited.Add(1)
		go c.worker()
	}
	return c
}

func (c *Copier[T]) worker() {
	defer c.exited.Done()
	c.mu.Lock()
	defer c.mu.Unlock()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		for c.head == c.started && !c.closed {
			if p := c.poll(); p > 0 {
				c.mu.Unlock()
				timer.Reset(p)
				select {
				case <-timer.C:
				case <-c.kick:
				case <-c.nudge:
				}
				c.mu.Lock()
				continue
			}
			c.sleepers++
			c.work.Wait()
			c.sleepers--
		}
		if c.head == c.started {
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
func (c *Copier[T]) take() T {
	t := c.queue[c.head]
	var zero T
	c.queue[c.head] = zero
	if c.head++; c.head == len(c.queue) {
		c.queue, c.head, c.started = c.queue[:0], 0, 0
	}
	c.started = max(c.started, c.head)
	return t
}

// done counts a finished copy; c.mu is held.
func (c *Copier[T]) done(t T) {
	c.pending--
	c.busy[c.key(t)]--
	c.idle.Broadcast()
}

// Queue adds copies without waking the workers: they take them after the
// next Start; a wait runs them itself.
func (c *Copier[T]) Queue(ts ...T) {
	if len(ts) == 0 {
		return
	}
	c.mu.Lock()
	c.queue = append(c.queue, ts...)
	c.pending += len(ts)
	for _, t := range ts {
		c.busy[c.key(t)]++
	}
	c.mu.Unlock()
}

// Start hands the copies queued since the last Start to the workers and
// wakes them, if there are any.
func (c *Copier[T]) Start() { c.start(false) }

// Hand is Start for copies the caller will not wait for before its next
// graph call: where wakes are dear, polling workers take them, and the
// caller wakes nobody.
func (c *Copier[T]) Hand() { c.start(true) }

func (c *Copier[T]) start(hand bool) {
	c.mu.Lock()
	if c.started == len(c.queue) {
		c.mu.Unlock()
		return
	}
	c.started = len(c.queue)
	now := time.Now()
	if hand {
		// A pause after which the workers stopped polling is not a gap
		// between Hands: folded in, it would make them poll too rarely for
		// the copies of the next Hands (a request's first tokens after an
		// idle spell), which the caller's Wait would then run itself.
		if d := now.Sub(c.last); !c.last.IsZero() && (c.gap == 0 || d <= c.lapse()) {
			c.gap = ewma(c.gap, min(d, maxGap))
		}
		c.last = now
	}
	wake := c.sleepers > 0
	c.mu.Unlock()
	if !hand {
		select { // a polling worker: Start's copies are needed soon
		case c.nudge <- struct{}{}:
		default:
		}
	}
	if wake {
		c.work.Broadcast()
		d := time.Since(now)
		c.mu.Lock()
		c.wake = ewma(c.wake, d)
		c.wakes++
		c.mu.Unlock()
	}
}

// ewma is avg moved a quarter of the way to d (d itself at first).
func ewma(avg, d time.Duration) time.Duration {
	if avg == 0 {
		return d
	}
	return avg + (d-avg)/4
}

// poll is the polling period while wakes are dear and Hands keep coming
// (the last one within lapse), else 0: the workers sleep until woken.
// c.mu is held.
func (c *Copier[T]) poll() time.Duration {
	if c.closed || c.wake <= c.dear || c.gap == 0 {
		return 0
	}
	if time.Since(c.last) > c.lapse() {
		return 0
	}
	return c.period()
}

// period is the polling period for the recent gap between Hands.
func (c *Copier[T]) period() time.Duration { return max(c.gap/4, minPoll) }

// lapse is how long after the last Hand the workers poll on: two recent
// gaps and a period.
func (c *Copier[T]) lapse() time.Duration { return 2*c.gap + c.period() }

// Submit is Queue and Start.
func (c *Copier[T]) Submit(ts ...T) {
	c.Queue(ts...)
	c.Start()
}

// Wait returns when every queued copy of keys has finished, running the
// oldest queued copies on the calling goroutine meanwhile. It reports
// whether it had to wait.
func (c *Copier[T]) Wait(keys []int) bool {
	return c.waitUntil(func() bool {
		for _, k := range keys {
			if c.busy[k] > 0 {
				return false
			}
		}
		return true
	})
}

// WaitAll is Wait for every key.
func (c *Copier[T]) WaitAll() bool { return c.waitUntil(func() bool { return c.pending == 0 }) }

// waitUntil runs queued copies, or waits for running ones, until done
// (called with c.mu held) holds.
func (c *Copier[T]) waitUntil(done func() bool) bool {
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

// Pending is the number of copies queued or running.
func (c *Copier[T]) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending
}

// OffPath is the workers' cumulative time copying: the write-back's time
// off the critical path.
func (c *Copier[T]) OffPath() time.Duration { return time.Duration(c.off.Load()) }

// Close finishes the queued copies and stops the workers.
func (c *Copier[T]) Close() {
	c.WaitAll()
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	close(c.kick)
	c.work.Broadcast()
	c.exited.Wait()
}
