package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/hexserve/hexserve/anthropic"
	"github.com/hexserve/hexserve/ollama"
	"github.com/hexserve/hexserve/upstream"
	"github.com/rs/zerolog"
)

// Relay forwards requests to an upstream model (upstream.Client).
type Relay interface {
	// Chunks sends body (an OpenAI request for a stream) to path and calls
	// each with every SSE event's data; an error before the first one means
	// nothing was written.
	Chunks(w http.ResponseWriter, r *http.Request, path string, body []byte, each func([]byte) error) error
	// Forward sends body to the endpoint at path (under the upstream's
	// base URL) and writes the reply with its model named servedAs; an
	// error means nothing was written.
	Forward(w http.ResponseWriter, r *http.Request, path string, body []byte, servedAs string) error
	// Reachable reports whether the upstream answers (cached briefly).
	Reachable(ctx context.Context) error
}

// Upstream is a model served by another server (config models[].upstream).
type Upstream struct {
	ID      string
	Aliases []string
	Relay   Relay
}

// Fallback sends a local model's requests to an upstream when the model
// cannot serve them (config fallback).
type Fallback struct {
	Model   string   // the local model's id
	Aliases []string // its aliases
	To      string   // an Upstream's ID
	When    []string // reasons (config.FallbackReasons); empty: all
}

// HeaderServedBy names the upstream model that served a request;
// HeaderFallback says why a local model's request went there.
const (
	HeaderServedBy = "X-Hexserve-Served-By"
	HeaderFallback = "X-Hexserve-Fallback"
)

// upstreamFor returns the upstream that name (an id or alias) names.
func (s *Server) upstreamFor(name string) *Upstream {
	for i := range s.opts.Upstreams {
		u := &s.opts.Upstreams[i]
		if names(u.ID, u.Aliases, name) {
			return u
		}
	}
	return nil
}

// fallbackReason is the fallback.when reason of an error code; "" is none.
func fallbackReason(code string) string {
	switch code {
	case "context_length_exceeded":
		return "context_exceeded"
	case "server_overloaded":
		return "queue_full"
	case "model_loading", "model_load_failed", "model_unavailable":
		return "unavailable"
	}
	return ""
}

// fallbackFor returns the upstream a request for local model name goes to
// after err, and why; nil when no policy covers it. err is read by r's
// API's mapping (Anthropic's knows its own prompt-too-long error).
func (s *Server) fallbackFor(r *http.Request, name string, err error) (*Upstream, string) {
	api, _ := apiOf(r).mapErr(err, "")
	reason := fallbackReason(api.Code)
	if reason == "" {
		return nil, ""
	}
	id := name
	if st, ok := s.Resolve(name); ok {
		id = st.ID // an alias or a server.model_aliases glob
	}
	for _, f := range s.opts.Fallbacks {
		if f.Model != id && !names(f.Model, f.Aliases, name) {
			continue
		}
		if len(f.When) > 0 && !slices.Contains(f.When, reason) {
			return nil, ""
		}
		return s.upstreamFor(f.To), reason
	}
	return nil, ""
}

// relayFunc serves a request (its body already read) from upstream u: as
// is (forwardTo) or converted to a streamed chat request (the Anthropic
// and Ollama APIs). fallback: u serves a local model's request.
type relayFunc func(w http.ResponseWriter, r *http.Request, u *Upstream, body []byte, fallback bool) error

// forwardTo relays an OpenAI endpoint's request as is to the upstream's
// path (under /v1).
func (s *Server) forwardTo(path string) relayFunc {
	return func(w http.ResponseWriter, r *http.Request, u *Upstream, body []byte, _ bool) error {
		return s.forward(w, r, u, path, body)
	}
}

// relayed serves with relay a request naming an upstream model, and a local
// model's request that fails before its reply started when the model's
// fallback policy covers the failure. A request continuing a stored
// response (previous_response_id) is never relayed: the upstream does not
// have it. Without upstreams it is h.
func (s *Server) relayed(relay relayFunc, h handlerFunc) handlerFunc {
	if len(s.opts.Upstreams) == 0 {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		body, err := s.readBody(w, r)
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
		if err != nil {
			return h(w, r) // the handler reports the body's error as ever
		}
		var peek struct {
			Model    string          `json:"model"`
			Previous json.RawMessage `json:"previous_response_id"`
		}
		if json.Unmarshal(body, &peek) != nil {
			return h(w, r)
		}
		forwardable := len(peek.Previous) == 0 || string(peek.Previous) == "null"
		name := peek.Model
		if apiOf(r).latest {
			name = strings.TrimSuffix(name, ":latest")
		}
		if u := s.upstreamFor(name); u != nil {
			if !forwardable {
				return invalid("previous_response_id", "The model `%s` is served by an upstream, where hexserve keeps no responses: "+
					"previous_response_id is not supported for it; send the conversation in input.", u.ID)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			return relay(w, r, u, body, false)
		}
		err = h(w, r)
		if err == nil || started(w) || !forwardable {
			return err
		}
		u, reason := s.fallbackFor(r, peek.Model, err)
		if u == nil {
			return err
		}
		s.metrics.fallbacks.WithLabelValues(peek.Model, u.ID, reason).Inc()
		zerolog.Ctx(r.Context()).Info().Str("model", peek.Model).Str("to", u.ID).Str("reason", reason).Msg("fallback")
		w.Header().Set(HeaderFallback, reason)
		r.Body = io.NopCloser(bytes.NewReader(body))
		return relay(w, r, u, body, true)
	}
}

// forward relays the request to u; the reply names u's id as its model.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, u *Upstream, path string, body []byte) error {
	w.Header().Set(HeaderServedBy, u.ID)
	err := u.Relay.Forward(w, r, path, body, u.ID)
	var uerr *upstream.Error
	if errors.As(err, &uerr) && uerr.Unwrap() != nil {
		zerolog.Ctx(r.Context()).Warn().Err(uerr.Unwrap()).Str("model", u.ID).Msg("upstream failed")
	}
	return err
}

// started reports whether the reply has begun (no error can replace it).
func started(w http.ResponseWriter) bool {
	ww, ok := w.(middleware.WrapResponseWriter)
	return ok && ww.Status() != 0
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err == nil {
		return 0, io.EOF
	}
	return 0, e.err
}

// upstreamHealth reports each upstream's reachability for /health.
func (s *Server) upstreamHealth(ctx context.Context) map[string]any {
	if len(s.opts.Upstreams) == 0 {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	out := make(map[string]any, len(s.opts.Upstreams))
	type result struct {
		id  string
		err error
	}
	results := make(chan result, len(s.opts.Upstreams))
	for _, u := range s.opts.Upstreams {
		go func() { results <- result{u.ID, u.Relay.Reachable(ctx)} }()
	}
	for range s.opts.Upstreams {
		res := <-results
		st := map[string]any{"reachable": res.err == nil}
		if res.err != nil {
			st["error"] = res.err.Error()
		}
		out[res.id] = st
	}
	return out
}

// upstreamObjects are the /v1/models objects of the upstream models.
func (s *Server) upstreamObjects() []modelObject {
	var out []modelObject
	for _, u := range s.opts.Upstreams {
		out = append(out, upstreamObject(u.ID))
	}
	return out
}

func upstreamObject(id string) modelObject {
	return modelObject{ID: id, Object: "model", Created: startTime.Unix(), OwnedBy: "upstream", Status: "upstream", Upstream: true}
}

// startTime is the created time of upstream models.
var startTime = time.Now()

// ollamaUpstream serves an Ollama chat (or, with generate, generate)
// request from upstream u: converted to an OpenAI chat request, streamed
// from u, its chunks turned into Ollama's lines (or, with stream false, one
// reply) naming the model as requested, or u's id for a fallback.
func (s *Server) ollamaUpstream(generate bool) relayFunc {
	return func(w http.ResponseWriter, r *http.Request, u *Upstream, _ []byte, fallback bool) error {
		return s.ollamaRelay(w, r, u, generate, fallback)
	}
}

func (s *Server) ollamaRelay(w http.ResponseWriter, r *http.Request, u *Upstream, generate, fallback bool) error {
	var (
		out    []byte
		err    error
		stream *bool
		name   string
	)
	if generate {
		var req ollama.GenerateRequest
		if err = s.decodeJSON(w, r, &req); err != nil {
			return err
		}
		stream, name = req.Stream, req.Model
		out, err = ollama.GenerateToOpenAI(&req)
	} else {
		var req ollama.ChatRequest
		if err = s.decodeJSON(w, r, &req); err != nil {
			return err
		}
		stream, name = req.Stream, req.Model
		out, err = ollama.ChatToOpenAI(&req)
	}
	if err != nil {
		return err
	}
	if fallback {
		name = u.ID
	}
	rel := &ollama.Relay{Model: name, Start: time.Now()}
	line := func(text string, done bool) any {
		if !done {
			if generate {
				return ollama.GenerateResponse{Model: name, CreatedAt: time.Now().UTC(), Response: text}
			}
			return ollama.ChatResponse{Model: name, CreatedAt: time.Now().UTC(), Message: ollama.Message{Role: "assistant", Content: text}}
		}
		reason, met := rel.Done()
		if generate {
			return ollama.GenerateResponse{Model: name, CreatedAt: time.Now().UTC(), Response: text, Done: true, DoneReason: reason, Metrics: met}
		}
		return ollama.ChatResponse{Model: name, CreatedAt: time.Now().UTC(), Done: true, DoneReason: reason, Metrics: met,
			Message: ollama.Message{Role: "assistant", Content: text, ToolCalls: rel.ToolCalls()}}
	}
	streaming := stream == nil || *stream
	nd := newNDJSON(w)
	err = s.chunks(w, r, u, out, func(data []byte) error {
		text, err := rel.Chunk(data)
		if err != nil {
			return badChunk(r, u, err)
		}
		if !streaming || text == "" {
			return nil
		}
		return nd.Send(line(text, false))
	})
	switch {
	case err != nil && !nd.started:
		return err
	case err != nil:
		_ = nd.Send(map[string]string{"error": err.Error()})
		return nil
	case !streaming:
		writeJSON(w, http.StatusOK, line(rel.Text(), true))
		return nil
	}
	_ = nd.Send(line("", true))
	return nil
}

// chunks streams body, a converted request, from u's chat completions and
// calls each with every chunk; each's error ends the stream.
func (s *Server) chunks(w http.ResponseWriter, r *http.Request, u *Upstream, body []byte, each func([]byte) error) error {
	w.Header().Set(HeaderServedBy, u.ID)
	err := u.Relay.Chunks(w, r, "/chat/completions", body, each)
	var uerr *upstream.Error
	if errors.As(err, &uerr) && uerr.Unwrap() != nil {
		zerolog.Ctx(r.Context()).Warn().Err(uerr.Unwrap()).Str("model", u.ID).Msg("upstream failed")
	}
	return err
}

// badChunk is the 502 for a chunk the upstream sent that cannot be read
// (an error chunk, or not JSON): err may name the upstream, so it goes to
// the log and the client learns only that the model failed.
func badChunk(r *http.Request, u *Upstream, err error) error {
	zerolog.Ctx(r.Context()).Warn().Err(err).Str("model", u.ID).Msg("upstream failed")
	return &APIError{Status: http.StatusBadGateway, Type: TypeServer, Code: "upstream_error",
		Message: fmt.Sprintf("The model `%s` failed while answering.", u.ID)}
}

// anthropicUpstream serves a Messages request from upstream u: converted
// to an OpenAI chat request, streamed from u, its chunks turned into
// Anthropic's events (or, without stream, one Message) naming the model as
// requested, or u's id for a fallback.
func (s *Server) anthropicUpstream(w http.ResponseWriter, r *http.Request, u *Upstream, _ []byte, fallback bool) error {
	var req anthropic.MessagesRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	out, err := anthropic.ToOpenAI(&req)
	if err != nil {
		return err
	}
	rel := &anthropic.Relay{Model: req.Model, ID: anthropic.NewMessageID(), Stops: req.StopSequences}
	if fallback {
		rel.Model = u.ID
	}
	sse := newSSE(w)
	err = s.chunks(w, r, u, out, func(data []byte) error {
		evs, err := rel.Chunk(data)
		if err != nil {
			return badChunk(r, u, err)
		}
		if req.Stream {
			sendNamed(sse, evs)
			return sse.failure() // the client is gone or stalled: stop the upstream
		}
		return nil
	})
	switch {
	case err != nil && !sse.started:
		return err
	case err != nil:
		api := mapError(r, err, "relayed stream failed")
		sendNamed(sse, []anthropic.Event{anthropic.Fail(anthropicBody(api).Error)})
		return nil
	case !req.Stream:
		writeJSON(w, http.StatusOK, rel.Message())
		return nil
	}
	sendNamed(sse, rel.End())
	return nil
}
