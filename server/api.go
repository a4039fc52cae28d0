package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/hexserve/hexserve/anthropic"
	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/ollama"
)

// api is what a request's client API decides, once, at routing: each API's
// routes are a chi group (or subrouter) whose middleware records its api
// for the request (apiOf), and an endpoint adds its prompt field
// (endpoint). Nothing else looks at the URL to tell the APIs apart.
type api struct {
	// mapErr maps an error to its status and message (errorFor, adjusted
	// to the API's conventions); body is the JSON body of the result.
	mapErr func(err error, promptParam string) (*APIError, bool)
	body   func(*APIError) any
	// prompt is the request field a prompt-length error names ("messages",
	// "prompt", "input"); endpoint sets it.
	prompt string
	// noModel is the 400 message of a request that names no model.
	noModel string
	// notFound is the 404 of a model name that names no served model;
	// served lists the ids this server serves.
	notFound func(name string, served []string) *APIError
	// latest resolves name with Ollama's default tag ":latest" as well.
	latest bool
}

var (
	openAIAPI = &api{mapErr: errorFor, body: (*APIError).Body, prompt: "messages",
		noModel: "you must provide a model parameter", notFound: openAINotFound}
	anthropicAPI = &api{mapErr: anthropicErrorFor, body: func(api *APIError) any { return anthropicBody(api) }, prompt: "messages",
		noModel: "Field required", notFound: anthropicNotFound}
	ollamaAPI = &api{mapErr: errorFor, body: ollamaError, prompt: "messages",
		noModel: "model is required", notFound: ollamaNotFound, latest: true}
)

// at is a with the endpoint's prompt field.
func (a *api) at(prompt string) *api {
	b := *a
	b.prompt = prompt
	return &b
}

type apiCtxKey struct{}

// apiCell holds the API a request was routed to, for the middleware that
// runs before routing (recoverer) as for the handlers.
type apiCell struct{ a *api }

// routedAPI gives each request an apiCell, filled in at routing.
func routedAPI(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), apiCtxKey{}, &apiCell{})))
	})
}

// apiOf is the API r was routed to; OpenAI's outside every group (an
// unknown path, or a failure before routing).
func apiOf(r *http.Request) *api {
	if c, ok := r.Context().Value(apiCtxKey{}).(*apiCell); ok && c.a != nil {
		return c.a
	}
	return openAIAPI
}

// withAPI records that r is a request of API a.
func withAPI(r *http.Request, a *api) *http.Request {
	if c, ok := r.Context().Value(apiCtxKey{}).(*apiCell); ok {
		c.a = a
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), apiCtxKey{}, &apiCell{a}))
}

// group is the middleware of API a's routes: a recorded for the request,
// then the layers whose errors are written in a's shape (API keys, the
// body limit); public routes skip the key check.
func (s *Server) group(a *api, public bool) func(http.Handler) http.Handler {
	return s.groupFor(func(*http.Request) *api { return a }, public)
}

// groupFor is group for routes that two APIs share: pick tells the
// request's.
func (s *Server) groupFor(pick func(*http.Request) *api, public bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		h := s.limitBody(next)
		if !public {
			h = s.auth(h)
		}
		h = s.browserCheck(h)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, withAPI(r, pick(r))) })
	}
}

// modelsAPI is the API of a /v1/models request: Anthropic's when it carries
// the anthropic-version header that Anthropic's SDKs and Claude Code send
// (their models endpoint has the same path), else OpenAI's.
func modelsAPI(r *http.Request) *api {
	if r.Header.Get("anthropic-version") != "" {
		return anthropicAPI
	}
	return openAIAPI
}

// apiRouter is the subrouter of an API under its own prefix: its unknown
// paths and methods are answered in its shape.
// The group's layers run once the subrouter has routed, so a 401 or 413
// is counted under its route, as the endpoint's answers are.
func (s *Server) apiRouter(a *api, routes func(chi.Router)) func(chi.Router) {
	return func(r chi.Router) {
		g := s.group(a, false)
		r.NotFound(g(http.HandlerFunc(s.notFound)).ServeHTTP)
		r.MethodNotAllowed(g(methodNotAllowed(r)).ServeHTTP)
		r.Group(func(r chi.Router) {
			r.Use(g)
			routes(r)
		})
	}
}

// handlerFunc is a handler that returns its error; handle writes it.
type handlerFunc func(http.ResponseWriter, *http.Request) error

// handle adapts h; its errors go through writeError, in the shape of the
// request's API.
func (s *Server) handle(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			writeError(w, r, err)
		}
	}
}

// endpoint adapts h, an endpoint whose prompt is in field prompt; relay,
// when not nil, serves its requests that name an upstream model, and its
// local model's requests the model's fallback covers (relayed).
func (s *Server) endpoint(prompt string, relay relayFunc, h handlerFunc) http.HandlerFunc {
	if relay != nil {
		h = s.relayed(relay, h)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		s.handle(h)(w, withAPI(r, apiOf(r).at(prompt)))
	}
}

// call is one request of a model route (modelRoute): the model state its
// name resolved to, and the lease once the handler asks for the model.
type call struct {
	s     *Server
	w     http.ResponseWriter
	r     *http.Request
	start time.Time // the request's arrival
	state ModelState
	lease *Lease
	// keepAlive, when set, is how long the model stays loaded after the
	// request (the Ollama API's keep_alive); the release passes it on.
	keepAlive *time.Duration
}

// model holds the resolved model for the request, loading it when needed.
func (c *call) model() (*Model, error) {
	if c.lease == nil {
		l, err := c.s.hold(c.w, c.r, c.state.ID)
		if err != nil {
			return nil, err
		}
		c.lease = l
	}
	return c.lease.Model, nil
}

// params are the conversion parameters of the request on its model (held),
// with the model's context_overflow policy and its signals on c's reply.
func (c *call) params() apiconv.Params {
	p := c.s.params(c.r, c.lease.Model)
	p.Overflow, p.Shift, p.Truncated = c.lease.Model.Overflow, c.lease.Model.Shift, truncated(c.w, c.r, c.lease.Model.ID)
	return p
}

// generate submits req to the held model and answers with rep (Server.generate).
func (c *call) generate(req *inference.Request, stream bool, rep reply) error {
	return c.s.generate(c.w, c.r, c.lease.Model, req, stream, rep)
}

// sse is an SSE writer of the reply.
func (c *call) sse() *sseWriter { return newSSE(c.w) }

func (c *call) release() {
	if c.lease != nil {
		c.lease.Release(c.keepAlive)
	}
}

// modelRoute is the one preamble of the routes that run a model: it decodes
// the body into a Req, resolves the model name it gives (name; "" is an
// error in the API's words unless name fills in a default) and calls serve,
// which takes the model with c.model() (so a request that needs none, an
// Ollama unload, loads nothing); the model is released when serve returns.
func modelRoute[Req any](s *Server, name func(*Req) string, serve func(c *call, req *Req) error) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		start := time.Now()
		if _, err := s.catalogOrLoading(); err != nil {
			return err
		}
		var req Req
		if err := s.decodeJSON(w, r, &req); err != nil {
			return err
		}
		st, err := s.resolveFor(r, name(&req))
		if err != nil {
			return err
		}
		c := &call{s: s, w: w, r: r, start: start, state: st}
		defer c.release()
		return serve(c, &req)
	}
}

// resolveFor resolves a request's model name by the rules of r's API: a
// name is required; Ollama's may carry ":latest"; a model served by an
// upstream reaches here only on an endpoint that is not relayed, which it
// cannot serve; an unknown one is the API's 404 naming the served ids.
func (s *Server) resolveFor(r *http.Request, name string) (ModelState, error) {
	a := apiOf(r)
	if name == "" {
		return ModelState{}, invalid("model", "%s", a.noModel)
	}
	if st, ok := s.Resolve(name); ok {
		return st, nil
	}
	if base, ok := strings.CutSuffix(name, ":latest"); ok && a.latest {
		if st, ok := s.Resolve(base); ok {
			return st, nil
		}
	}
	if u := s.upstreamFor(name); u != nil {
		return ModelState{}, invalid("model", "The model `%s` is served by an upstream: %s works with this server's own models "+
			"(it uses their tokenizer) and is not available for it.", u.ID, r.URL.Path)
	}
	return ModelState{}, a.notFound(name, s.servedIDs())
}

// servedIDs are the ids this server serves: its models' and its upstream
// models', in configuration order.
func (s *Server) servedIDs() []string {
	var ids []string
	if c, err := s.catalogOrLoading(); err == nil {
		for _, st := range c.Models() {
			ids = append(ids, st.ID)
		}
	}
	for _, u := range s.opts.Upstreams {
		ids = append(ids, u.ID)
	}
	return ids
}

// served words the served ids for a 404.
func served(ids []string) string {
	return fmt.Sprintf("serves %s; server.model_aliases maps other names to them", strings.Join(ids, ", "))
}

// openAINotFound is OpenAI's 404 for an unknown model, naming the served ids.
func openAINotFound(name string, ids []string) *APIError {
	e := ModelNotFound(name, "model")
	e.Message += " This server " + served(ids) + "."
	return e
}

// anthropicNotFound is Anthropic's 404 for an unknown model, naming the
// served ids.
func anthropicNotFound(name string, ids []string) *APIError {
	return &APIError{Status: http.StatusNotFound, Type: TypeInvalidRequest, Code: "model_not_found",
		Message: fmt.Sprintf("model: %s (this server %s)", name, served(ids))}
}

// ollamaNotFound is Ollama's 404 for an unknown model, naming the served ids.
func ollamaNotFound(name string, ids []string) *APIError {
	return &APIError{Status: http.StatusNotFound, Type: TypeInvalidRequest, Code: "model_not_found", Param: "model",
		Message: fmt.Sprintf("model %q not found; this server %s", name, served(ids))}
}

// ollamaError is Ollama's error body: the message, after the name of the
// offending field when the message does not say it.
func ollamaError(api *APIError) any { return ollama.ErrorResponse{Error: paramMessage(api)} }

// anthropicBody is Anthropic's error body for api (its message led by the
// field's path, paramMessage).
func anthropicBody(api *APIError) anthropic.ErrorResponse {
	return anthropic.NewError(api.Status, paramMessage(api))
}
