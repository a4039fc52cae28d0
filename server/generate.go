package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/inference"
)

// reply is how one API answers a submitted request: the whole response
// (whole), or a stream (stream: SSE or NDJSON, on the handler's writer);
// done, when set, runs once the reply is complete (the whole response
// built, or the stream ended without failing or losing its client), before
// the whole response is written.
type reply struct {
	whole  func(inference.Result) any
	stream func() eventStream
	done   func()
}

// generate is the one submit path of every API: it submits req for the
// request's owner and answers with rep, whole or streamed. Errors before the
// first byte go back to the handler (a status and the API's error body);
// after it they are the stream's error frame. The request's context cancels
// generation when the client goes away.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, m *Model, req *inference.Request,
	stream bool, rep reply) error {
	if m.Engine == nil {
		return errLoading
	}
	tokenisePrediction(req, m.Tokenizer, m.ContextLen)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	req.Owner = requestOwner(r.Context())
	events, err := m.Engine.Submit(ctx, *req)
	if err != nil {
		return err
	}
	if !stream {
		res, err := inference.Collect(events)
		if err != nil {
			return err
		}
		body := rep.whole(res)
		if rep.done != nil {
			rep.done()
		}
		writeJSON(w, http.StatusOK, body)
		return nil
	}
	es := rep.stream()
	failed, err := s.stream(r, cancel, events, es)
	if err == nil && !failed && es.failure() == nil && rep.done != nil {
		rep.done()
	}
	return err
}

// streamWriter is what the submit path needs of an SSE or NDJSON writer.
type streamWriter interface {
	failure() error // the first write failure (the client is gone or stalled)
}

func (s *sseWriter) failure() error { return s.err }

func (n *ndjsonWriter) failure() error { return n.err }

// eventStream is one API's stream over engine events, on its writer.
type eventStream interface {
	streamWriter
	start()
	event(inference.Event)
	// committed reports whether the reply is a stream already: a failure
	// is then the stream's error frame (fail), otherwise the handler's
	// error status.
	committed() bool
	fail(*APIError)
	finish()
}

// stream writes events through es and reports whether generation failed.
// A failure before es committed to a stream is returned for the handler to
// answer. A client that stops reading cancels generation; the events are
// still drained.
func (s *Server) stream(r *http.Request, cancel context.CancelFunc, events *inference.Stream, es eventStream) (failed bool, err error) {
	check := func() {
		if es.failure() != nil {
			cancel() // the client is gone: stop generating, keep draining
		}
	}
	es.start()
	check()
	keepAlive := newIdleTimer(es, s.pingInterval())
	defer keepAlive.stop()
	var genErr error
	for ch := events.Events(); ; {
		var ev inference.Event
		select {
		case e, ok := <-ch:
			ev = e
			if !ok {
				ch = nil
			}
		case <-keepAlive.c:
			keepAlive.ping()
			check()
			continue
		}
		if ch == nil {
			break
		}
		es.event(ev)
		check()
		keepAlive.reset()
		if ev.Done && ev.Err != nil {
			genErr = ev.Err
		}
	}
	if genErr != nil {
		if !es.committed() {
			return true, genErr
		}
		es.fail(mapError(r, genErr, "stream failed"))
	}
	es.finish()
	s.endStream(r, es)
	return genErr != nil, nil
}

// pinger is an eventStream with a keep-alive event, sent when nothing else
// was sent for Server.pingInterval (a long prompt being read).
type pinger interface {
	ping()
}

// pingInterval is how long a pinger's stream may send nothing before a ping.
func (s *Server) pingInterval() time.Duration {
	if s.opts.PingInterval > 0 {
		return s.opts.PingInterval
	}
	return defaultPingInterval
}

const defaultPingInterval = 10 * time.Second

// idleTimer fires a pinger's keep-alive after every interval with nothing
// sent; for other streams c is nil and never fires.
type idleTimer struct {
	p        pinger
	t        *time.Timer
	c        <-chan time.Time
	interval time.Duration
}

func newIdleTimer(es eventStream, interval time.Duration) *idleTimer {
	it := &idleTimer{interval: interval}
	if p, ok := es.(pinger); ok {
		it.p, it.t = p, time.NewTimer(interval)
		it.c = it.t.C
	}
	return it
}

func (it *idleTimer) ping() {
	it.p.ping()
	it.t.Reset(it.interval)
}

func (it *idleTimer) reset() {
	if it.t != nil {
		it.t.Reset(it.interval)
	}
}

func (it *idleTimer) stop() {
	if it.t != nil {
		it.t.Stop()
	}
}

// endStream finishes a stream after its last frame: it logs why writing
// failed, unless it stalled (writeDeadline counts and logs that).
func (s *Server) endStream(r *http.Request, w streamWriter) {
	switch writeErr := w.failure(); {
	case writeErr == nil, errors.Is(writeErr, errStalled):
	default:
		clientGone(r)
		zerolog.Ctx(r.Context()).Debug().Err(writeErr).Msg("stream write failed")
	}
}
