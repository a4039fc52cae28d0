// Package registry keeps several models and loads them on demand: a request
// for an unloaded model loads it (the request waits), an idle one is unloaded
// after its keep-alive, and a count limit and a memory budget decide which
// idle model is unloaded first (least recently used; never one with requests
// in flight). It knows nothing of what a model is: an entry's Load returns
// any io.Closer and its size (cmd/server loads an engine over a model's
// files; upstream models are no entries: the server relays them).
package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// Entry is one model the registry may load.
type Entry[T io.Closer] struct {
	ID string
	// Load loads the model and returns it with the bytes it holds (mapped
	// files, buffers, KV). It runs without the registry's lock.
	Load func(ctx context.Context) (T, int64, error)
	// Estimate is the bytes the model is expected to hold before it is
	// loaded (its files' size; 0: unknown), checked against the budget.
	Estimate int64
	// KeepAlive unloads the model this long after its last request ended;
	// 0: at once, < 0: never.
	KeepAlive time.Duration
}

// Options configure a Registry.
type Options struct {
	MaxLoaded int   // models loaded at once; 0: no limit
	Memory    int64 // bytes of the loaded models together; 0: no limit
	// OnLoad and OnUnload, when set, observe loads (the time and the error)
	// and unloads (why: "idle", "evicted", "closed").
	OnLoad   func(id string, took time.Duration, err error)
	OnUnload func(id, reason string)
}

// ErrTooLarge is wrapped by a load that cannot fit in the budget even alone.
var ErrTooLarge = errors.New("registry: the model does not fit in the memory budget")

// ErrUnknown is returned for an id that is not an entry.
var ErrUnknown = errors.New("registry: unknown model")

// ErrClosed is returned after Close.
var ErrClosed = errors.New("registry: closed")

type slot[T io.Closer] struct {
	Entry[T]
	model    T
	loaded   bool
	loading  chan struct{} // non-nil while loading or unloading; closed when done
	leaving  bool          // unloading
	mem      int64         // bytes held (Estimate while loading)
	inflight int
	lastUsed time.Time
	expires  time.Time // zero: no pending unload
	gen      int       // bumped on each use, to cancel stale unload timers
	used     uint64    // the registry's use counter at the last use (LRU order)
	loadErr  error     // the last load's error
	loadTook time.Duration
}

// Registry holds the entries and their loaded models.
type Registry[T io.Closer] struct {
	opts Options
	now  func() time.Time

	mu     sync.Mutex
	slots  []*slot[T]
	byID   map[string]*slot[T]
	room   chan struct{} // closed and replaced when a model is released or unloaded
	uses   uint64        // counts acquires and releases
	closed bool
}

// New makes a registry over entries; nothing is loaded yet.
func New[T io.Closer](opts Options, entries []Entry[T]) *Registry[T] {
	r := &Registry[T]{opts: opts, now: time.Now, byID: map[string]*slot[T]{}, room: make(chan struct{})}
	for _, e := range entries {
		s := &slot[T]{Entry: e}
		r.slots = append(r.slots, s)
		r.byID[e.ID] = s
	}
	return r
}

// Lease holds a loaded model for one request.
type Lease[T io.Closer] struct {
	Model T
	// Loaded is how long this request waited for the model to load (0: it
	// was loaded already).
	Loaded time.Duration
	r      *Registry[T]
	s      *slot[T]
	once   sync.Once
}

// Release ends the request. keepAlive, when not nil, replaces the entry's
// keep-alive after this request (the Ollama API's per-request keep_alive);
// the next request without one gets the entry's again.
func (l *Lease[T]) Release(keepAlive *time.Duration) {
	l.once.Do(func() { l.r.release(l.s, keepAlive) })
}

// Acquire returns a lease on model id, loading it first when needed (other
// idle models may be unloaded to make room). It waits while the model loads
// or while every loaded model is busy and there is no room; ctx ends the
// wait (with context.Cause; a load already started goes on). A failed load
// returns its error (the next Acquire tries again).
func (r *Registry[T]) Acquire(ctx context.Context, id string) (*Lease[T], error) {
	start := r.now()
	waited := false
	r.mu.Lock()
	s, ok := r.byID[id]
	if !ok {
		r.mu.Unlock()
		return nil, fmt.Errorf("%w %q", ErrUnknown, id)
	}
	for {
		if r.closed {
			r.mu.Unlock()
			return nil, ErrClosed
		}
		if s.loaded && s.loading == nil {
			s.inflight++
			s.gen++
			r.uses++
			s.used = r.uses
			s.expires = time.Time{}
			r.mu.Unlock()
			l := &Lease[T]{Model: s.model, r: r, s: s}
			if waited {
				l.Loaded = r.now().Sub(start)
			}
			return l, nil
		}
		wait := s.loading
		if wait == nil {
			var err error
			if wait, err = r.startLoad(ctx, s); err != nil {
				r.mu.Unlock()
				return nil, err
			}
		}
		waited = true
		r.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		r.mu.Lock()
		if !s.loaded && s.loadErr != nil && s.loading == nil {
			err := s.loadErr
			r.mu.Unlock()
			return nil, err
		}
	}
}

// startLoad makes room for s and starts loading it (r.mu held). It returns
// the channel closed when the load ends, or the room channel to wait on when
// every model that would have to go is busy.
func (r *Registry[T]) startLoad(ctx context.Context, s *slot[T]) (chan struct{}, error) {
	if r.opts.Memory > 0 && s.Estimate > r.opts.Memory {
		return nil, fmt.Errorf("%w: its files alone are %d bytes, more than the budget of %d", ErrTooLarge, s.Estimate, r.opts.Memory)
	}
	if !r.makeRoom(s, s.Estimate) {
		return r.room, nil // wait for a release or an unload, then look again
	}
	s.loading, s.mem, s.loadErr = make(chan struct{}), s.Estimate, nil
	done := s.loading
	go r.load(context.WithoutCancel(ctx), s, done)
	return done, nil
}

// load runs s's loader; a model whose size turns out to exceed the budget
// alone is closed again.
func (r *Registry[T]) load(ctx context.Context, s *slot[T], done chan struct{}) {
	start := r.now()
	m, mem, err := s.Load(ctx)
	if err == nil && r.opts.Memory > 0 && mem > r.opts.Memory {
		m.Close()
		err = fmt.Errorf("%w: it holds %d bytes once loaded, more than the budget of %d", ErrTooLarge, mem, r.opts.Memory)
	}
	took := r.now().Sub(start)
	r.mu.Lock()
	s.loading, s.loadTook = nil, took
	if err != nil {
		s.loadErr, s.mem = err, 0
	} else {
		s.model, s.loaded, s.mem, s.lastUsed = m, true, mem, r.now()
		r.makeRoom(s, 0) // the estimate may have been low: unload idle ones over the budget
	}
	r.signal()
	r.mu.Unlock()
	close(done) // Close, waiting for loads, unloads it when the registry closed meanwhile
	if r.opts.OnLoad != nil {
		r.opts.OnLoad(s.ID, took, err)
	}
}

// makeRoom unloads idle models, least recently used first, until one more
// model of need bytes (besides keep, which is counted already when loaded)
// fits the count limit and the budget. It reports whether it fits (r.mu
// held; the unloads finish in the background).
func (r *Registry[T]) makeRoom(keep *slot[T], need int64) bool {
	for {
		// now counts what is held, after what remains once the unloads in
		// progress finish.
		var now, after struct {
			count int
			mem   int64
		}
		for _, s := range r.slots {
			if s.loaded || s.loading != nil {
				now.count++
				now.mem += s.mem
				if !s.leaving {
					after.count++
					after.mem += s.mem
				}
			}
		}
		if !keep.loaded {
			now.count++ // the one about to load
			after.count++
		}
		now.mem += need
		after.mem += need
		over := func(count int, mem int64) bool {
			return r.opts.MaxLoaded > 0 && count > r.opts.MaxLoaded || r.opts.Memory > 0 && mem > r.opts.Memory
		}
		if !over(after.count, after.mem) {
			return !over(now.count, now.mem) // else wait for the unloads
		}
		victim := r.lru(keep)
		if victim == nil {
			return false
		}
		r.beginUnload(victim, "evicted")
	}
}

// lru is the least recently used loaded model without requests in flight,
// other than keep (r.mu held).
func (r *Registry[T]) lru(keep *slot[T]) *slot[T] {
	var best *slot[T]
	for _, s := range r.slots {
		if s == keep || !s.loaded || s.loading != nil || s.inflight > 0 {
			continue
		}
		if best == nil || s.used < best.used {
			best = s
		}
	}
	return best
}

// beginUnload marks s unloading and closes it in the background (r.mu held).
// Its memory stays counted until Close returns.
func (r *Registry[T]) beginUnload(s *slot[T], reason string) {
	s.loading, s.leaving = make(chan struct{}), true
	go r.unload(s, reason)
}

// unload closes s's model (s.loading set) and marks it unloaded.
func (r *Registry[T]) unload(s *slot[T], reason string) {
	r.mu.Lock()
	m, done := s.model, s.loading
	r.mu.Unlock()
	m.Close()
	r.mu.Lock()
	var zero T
	s.model, s.loaded, s.loading, s.leaving, s.mem, s.expires = zero, false, nil, false, 0, time.Time{}
	r.signal()
	r.mu.Unlock()
	close(done)
	if r.opts.OnUnload != nil {
		r.opts.OnUnload(s.ID, reason)
	}
}

// signal wakes Acquires waiting for room (r.mu held).
func (r *Registry[T]) signal() {
	close(r.room)
	r.room = make(chan struct{})
}

func (r *Registry[T]) release(s *slot[T], keepAlive *time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.inflight--
	s.lastUsed = r.now()
	r.uses++
	s.used = r.uses
	r.signal()
	if s.inflight > 0 || !s.loaded || r.closed {
		return
	}
	ka := s.KeepAlive
	if keepAlive != nil {
		ka = *keepAlive
	}
	switch {
	case ka == 0:
		r.beginUnload(s, "idle")
	case ka > 0:
		s.gen++
		gen := s.gen
		s.expires = s.lastUsed.Add(ka)
		time.AfterFunc(ka, func() { r.expire(s, gen) })
	}
}

// expire unloads s when it has not been used since the timer was set.
func (r *Registry[T]) expire(s *slot[T], gen int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.gen == gen && s.loaded && s.loading == nil && s.inflight == 0 && !r.closed {
		r.beginUnload(s, "idle")
	}
}

// Preload loads id in the background as a request would, without holding
// it: it stays loaded for its keep-alive.
func (r *Registry[T]) Preload(ctx context.Context, id string) error {
	l, err := r.Acquire(ctx, id)
	if err != nil {
		return err
	}
	l.Release(nil)
	return nil
}

// State describes one entry.
type State[T io.Closer] struct {
	ID       string
	Model    T // the zero T unless Loaded
	Loaded   bool
	Loading  bool  // loading or unloading
	Err      error // the last load's error, until a load succeeds
	Memory   int64
	InFlight int
	LastUsed time.Time
	Expires  time.Time // when an idle model will be unloaded; zero: not scheduled
	LoadTook time.Duration
}

// States describes every entry in configuration order.
func (r *Registry[T]) States() []State[T] {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]State[T], 0, len(r.slots))
	for _, s := range r.slots {
		out = append(out, State[T]{ID: s.ID, Model: s.model, Loaded: s.loaded && s.loading == nil, Loading: s.loading != nil,
			Err: s.loadErr, Memory: s.mem, InFlight: s.inflight, LastUsed: s.lastUsed, Expires: s.expires, LoadTook: s.loadTook})
	}
	return out
}

// IDs are the entries' ids in configuration order.
func (r *Registry[T]) IDs() []string {
	ids := make([]string, len(r.slots))
	for i, s := range r.slots {
		ids[i] = s.ID
	}
	return ids
}

// Close waits for loads and unloads in progress and unloads every model;
// call it once the requests have ended. Acquire fails with ErrClosed after.
func (r *Registry[T]) Close() {
	r.mu.Lock()
	r.closed = true
	var wait []chan struct{}
	for _, s := range r.slots {
		if s.loading != nil {
			wait = append(wait, s.loading)
		}
	}
	r.signal()
	r.mu.Unlock()
	for _, w := range wait {
		<-w
	}
	r.mu.Lock()
	var busy []chan struct{}
	for _, s := range r.slots {
		if s.loaded && s.loading == nil {
			r.beginUnload(s, "closed")
			busy = append(busy, s.loading)
		} else if s.loading != nil {
			busy = append(busy, s.loading)
		}
	}
	r.mu.Unlock()
	for _, w := range busy {
		<-w
	}
}
