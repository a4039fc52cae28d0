package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/grammar"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/openai"
)

// chatCompletions is POST /v1/chat/completions.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) error {
	m, err := s.loaded()
	if err != nil {
		return err
	}
	var req openai.ChatCompletionRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := checkModel(m, req.Model); err != nil {
		return err
	}
	g, err := openai.FromChatCompletionRequest(&req, s.params(r, m))
	if err != nil {
		return err
	}
	meta := openai.NewMeta("chatcmpl-", m.ID, time.Now())
	return s.generate(w, r, m, g, func() *openai.Stream { return openai.NewChatStream(g, meta) },
		func(res inference.Result) any { return openai.ToChatCompletion(g, meta, res) })
}

// completions is POST /v1/completions.
func (s *Server) completions(w http.ResponseWriter, r *http.Request) error {
	m, err := s.loaded()
	if err != nil {
		return err
	}
	var req openai.CompletionRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := checkModel(m, req.Model); err != nil {
		return err
	}
	g, err := openai.FromCompletionRequest(&req, s.params(r, m))
	if err != nil {
		return err
	}
	meta := openai.NewMeta("cmpl-", m.ID, time.Now())
	return s.generate(w, r, m, g, func() *openai.Stream { return openai.NewCompletionStream(g, meta) },
		func(res inference.Result) any { return openai.ToCompletion(g, meta, res) })
}

func checkModel(m *Model, id string) error {
	if id == "" {
		return invalid("model", "you must provide a model parameter")
	}
	if _, ok := m.Resolve(id); !ok {
		return ModelNotFound(id, "model")
	}
	return nil
}

// params are the conversion parameters for request r on model m; rendering
// stops when r's client goes away or the prompt cannot fit m's context.
func (s *Server) params(r *http.Request, m *Model) openai.Params {
	return openai.Params{Tokenizer: m.Tokenizer, Defaults: s.opts.Sampling, MaxTokens: s.opts.MaxTokens,
		Date: s.opts.DateString(), Context: r.Context(), Constrainer: s.constrainer(m),
		Grammar:        grammar.Options{Limits: s.opts.Structured, Cache: s.grammars},
		MaxPromptBytes: openai.PromptByteLimit(m.ContextLen, m.Tokenizer.MaxPieceBytes())}
}

// constrainer enforces structured outputs with m's vocabulary and records
// the compile time.
func (s *Server) constrainer(m *Model) openai.Constrainer {
	c := openai.NewConstrainer(m.grammar)
	return func(ctx context.Context, g *grammar.Grammar) func() inference.Constraint {
		s.metrics.compile.Observe(g.CompileTime().Seconds())
		s.metrics.compileSteps.Observe(float64(g.CompileSteps()))
		return c(ctx, g)
	}
}

// vocabBytes is the size of the loaded model's vocabulary index (0 until
// a structured output built it).
func (s *Server) vocabBytes() int64 {
	if m := s.model.Load(); m != nil {
		if v := m.grammarVocab.Load(); v != nil {
			return v.Bytes()
		}
	}
	return 0
}

// generate submits g and writes either the whole response (build) or an
// OpenAI chunk stream.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, m *Model, g *openai.Generation,
	newStream func() *openai.Stream, build func(inference.Result) any) error {
	return s.submit(w, r, m, &g.Request, g.Stream, func() eventStream { return chunkStream{newStream()} }, build)
}

// submit runs req on m's engine and writes either the whole response
// (build) or, with stream, the SSE stream newStream makes. Errors before the
// first byte go back to the handler; after it they are the stream's failure
// event. The request's context cancels generation when the client goes away.
func (s *Server) submit(w http.ResponseWriter, r *http.Request, m *Model, req *inference.Request, stream bool,
	newStream func() eventStream, build func(inference.Result) any) error {
	if m.Engine == nil {
		return errLoading
	}
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
		writeJSON(w, http.StatusOK, build(res))
		return nil
	}

	s.stream(r, newSSE(w, s.opts.StreamWriteTimeout), cancel, events, newStream())
	return nil
}

// eventStream is one API's SSE stream over engine events.
type eventStream interface {
	start(*sseWriter)
	event(*sseWriter, inference.Event)
	fail(*sseWriter, *APIError) // generation failed after the stream started
	finish(*sseWriter)
}

// pinger is an eventStream with a keep-alive event, sent when nothing else
// was sent for Server.pingInterval (a long prompt being read).
type pinger interface {
	ping(*sseWriter)
}

// stream writes events to sse through es and reports whether generation
// failed. A client that stops reading cancels generation; the events are
// still drained.
func (s *Server) stream(r *http.Request, sse *sseWriter, cancel context.CancelFunc, events *inference.Stream, es eventStream) (failed bool) {
	check := func() {
		if sse.err != nil {
			cancel() // the client is gone: stop generating, keep draining
		}
	}
	es.start(sse)
	check()
	keepAlive := newIdleTimer(es, s.pingInterval())
	defer keepAlive.stop()
	ch := events.Events()
	for {
		var ev inference.Event
		select {
		case e, ok := <-ch:
			if !ok {
				es.finish(sse)
				s.endStream(r, sse.end, sse.timeout, sse.err)
				return failed
			}
			ev = e
		case <-keepAlive.c:
			keepAlive.ping(sse)
			check()
			continue
		}
		es.event(sse, ev)
		check()
		keepAlive.reset()
		if ev.Done && ev.Err != nil {
			failed = true
			api, unexpected := shapeOf(r).mapErr(ev.Err, promptParam(r))
			log := zerolog.Ctx(r.Context())
			if unexpected {
				log.Error().Err(ev.Err).Str("path", r.URL.Path).Msg("stream failed")
			} else {
				log.Debug().Err(ev.Err).Msg("stream ended with an error")
			}
			es.fail(sse, api)
		}
	}
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

func (it *idleTimer) ping(sse *sseWriter) {
	it.p.ping(sse)
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

// chunkStream is the chat and completions stream: data-only chunks, an
// error chunk when generation fails, and [DONE] at the end.
type chunkStream struct{ st *openai.Stream }

func (c chunkStream) start(sse *sseWriter) { sendAll(sse, c.st.Start()) }

func (c chunkStream) event(sse *sseWriter, ev inference.Event) { sendAll(sse, c.st.Event(ev)) }

func (chunkStream) fail(sse *sseWriter, api *APIError) { _ = sse.Error(api) }

func (chunkStream) finish(sse *sseWriter) { _ = sse.Done() }

func sendAll(sse *sseWriter, frames []any) {
	for _, f := range frames {
		_ = sse.Send(f)
	}
}

// endStream finishes a stream after its last frame: it clears the write
// deadline (end) or logs (and counts) why writing failed (timeout is the
// writer's write timeout).
func (s *Server) endStream(r *http.Request, end func(), timeout time.Duration, writeErr error) {
	switch {
	case writeErr == nil:
		end()
	case errors.Is(writeErr, errStalled):
		s.metrics.streamTimeouts.Inc()
		zerolog.Ctx(r.Context()).Warn().Dur("stream_write_timeout", timeout).Msg("stream dropped: the client stopped reading")
	default:
		zerolog.Ctx(r.Context()).Debug().Err(writeErr).Msg("stream write failed")
	}
}
