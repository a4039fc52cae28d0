package inference

import (
	"context"
	"sync"
)

// Stream is one request's event stream.
type Stream struct {
	ctx    context.Context
	out    chan Event
	notify chan struct{} // capacity 1: "buf changed"

	mu    sync.Mutex
	buf   []Event // pushed by the worker, not yet handed to the pump
	final bool    // the Done event is in buf or delivered
}

func newStream(ctx context.Context) *Stream {
	s := &Stream{ctx: ctx, out: make(chan Event, 1), notify: make(chan struct{}, 1)}
	go s.pump()
	return s
}

// Events returns the request's events: deltas, one Finish event per
// choice and a final Done event, after which the channel is closed. Read it
// until it is closed, or end the request's context: after the context ends,
// undelivered deltas are dropped, but the Done event is still buffered in the
// channel (for a reader that is still there) and the channel is closed.
func (s *Stream) Events() <-chan Event { return s.out }

// push queues ev for the reader; it never blocks (the buffer is unbounded,
// and bounded in practice by the request's token limit).
func (s *Stream) push(ev Event) {
	s.mu.Lock()
	s.buf = append(s.buf, ev)
	if ev.Done {
		s.final = true
	}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// take hands the pushed events over and gives done, the events the pump
// has delivered, back as the buffer (emptied, its references dropped): in
// steady state a push does not allocate.
func (s *Stream) take(done []Event) ([]Event, bool) {
	clear(done)
	s.mu.Lock()
	defer s.mu.Unlock()
	evs := s.buf
	s.buf = done[:0]
	return evs, s.final
}

// pump moves events from the buffer to the channel, so the worker never
// waits for a reader.
func (s *Stream) pump() {
	defer close(s.out)
	var evs []Event
	for {
		var final bool
		evs, final = s.take(evs)
		for i, ev := range evs {
			select {
			case s.out <- ev:
			case <-s.ctx.Done():
				s.abandon(evs[i:])
				return
			}
		}
		if final {
			return
		}
		select {
		case <-s.notify:
		case <-s.ctx.Done():
			s.abandon(nil)
			return
		}
	}
}

// abandon runs once the context has ended: it waits for the Done event (the
// engine sends it promptly) and leaves only that in the channel's buffer.
func (s *Stream) abandon(rest []Event) {
	for {
		evs, final := s.take(nil)
		rest = append(rest, evs...)
		if final {
			break
		}
		<-s.notify
	}
	done := rest[len(rest)-1]
	select {
	case <-s.out: // a stale delta nobody read
	default:
	}
	s.out <- done // the pump is the only sender: the slot is free
}
