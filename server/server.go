// Package server is hexserve's HTTP layer: the chi router, with one route
// group per client API (OpenAI's, Anthropic's Messages API under
// /v1/messages, Ollama's under /api) that decides, at routing, how the API
// writes errors, which field holds a prompt, its 404 for an unknown model
// and how a request naming an upstream model is relayed; the middleware
// (request id, access log, metrics, panic recovery, CORS, API keys, body
// limit); the handlers, which share one preamble (modelRoute) and one
// submit path (generate); the relay to upstream models and fallbacks; and
// the one mapping from errors to statuses.
package server

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/grammar"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/ollama"
	"github.com/hexserve/hexserve/openai"
	"github.com/hexserve/hexserve/overflow"
	"github.com/hexserve/hexserve/respstore"
	"github.com/hexserve/hexserve/tokenizer"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
)

// Options configure a Server.
type Options struct {
	Logger zerolog.Logger
	// Registry receives the HTTP metrics and is served on /metrics; pass the
	// same registry to the engine. nil: a new registry.
	Registry *prometheus.Registry
	// APIKeys, when not empty, are required on every route except /health.
	APIKeys []string
	// CORSOrigins are the allowed browser origins; "*" allows any. A
	// request from any other origin than these and the server's own is
	// refused (403): a web page cannot make the server work for it.
	CORSOrigins []string
	// AllowedHosts, when not nil, are the Host names a request may name
	// besides the loopback ones (localhost, *.localhost, 127.0.0.0/8, ::1);
	// others are refused (403), which stops DNS rebinding. nil: any Host.
	AllowedHosts []string
	// BodyLimit caps request bodies in bytes; <= 0 means 1 MiB.
	BodyLimit int64
	// BodyMemory caps the bytes of all request bodies read and held at
	// once (each until its request ends); <= 0 means 128 MiB. Past it a
	// request gets 503 server_overloaded.
	BodyMemory int64
	// BodyTimeout bounds the time to read a request body, so a client that
	// trickles one cannot hold a connection; <= 0 means 30 s.
	BodyTimeout time.Duration
	// PingInterval is how long an Anthropic stream may send nothing (a
	// long prompt being read) before a ping event; <= 0 means 10 s.
	PingInterval time.Duration
	// StreamWriteTimeout drops a response whose next write cannot finish
	// for this long (the client stopped reading): a stream's frame (its
	// generation is cancelled) or a whole reply; <= 0 means 30 s.
	StreamWriteTimeout time.Duration
	// DateString gives the chat template's date when a request has none.
	// nil: today's local date.
	DateString func() string
	// Sampling and MaxTokens are the defaults for parameters a completion
	// request leaves out (config `sampling`).
	Sampling  sample.Params
	MaxTokens int
	// WebUI serves the chat page at / (config server.web_ui).
	WebUI bool
	// ResponseStore keeps stored /v1/responses responses; nil: an
	// in-memory store with the default limits.
	ResponseStore *respstore.Store
	// Version is hexserve's version (/api/version's "hexserve").
	Version string
	// Structured bounds compiling each structured-output grammar and each
	// token's mask (config `structured`); zero fields take grammar's
	// defaults.
	Structured grammar.Limits
	// StructuredCache is the byte budget of the cache of compiled patterns
	// and masks shared by all requests; <= 0: grammar.DefaultCacheBytes.
	StructuredCache int64
	// StructuredCompiles bounds the schemas compiled at once (<= 0:
	// grammar.DefaultMaxCompiles); one that waits a second more gets 503.
	StructuredCompiles int
	// Upstreams are models served by other servers; requests naming them
	// on the OpenAI endpoints are forwarded (config models[].upstream).
	Upstreams []Upstream
	// Fallbacks send local models' requests to an upstream when the model
	// cannot serve them (config fallback).
	Fallbacks []Fallback
}

// Model is what the server needs from a loaded model. A Catalog hands one
// to each request (SetModel serves one fixed model); until one is set model
// routes answer 503.
type Model struct {
	ID      string   // served model id
	Aliases []string // other ids that resolve to ID
	// AliasGlobs map path.Match patterns of requested names to ID or one
	// of Aliases (config server.model_aliases); other targets never match.
	AliasGlobs map[string]string
	Created    time.Time
	ContextLen int // tokens the KV cache holds (max_model_len)
	Tokenizer  *tokenizer.Tokenizer
	// Template is the model's chat template; nil is the built-in Llama-3.2 one.
	Template *chat.Template
	// Engine runs generation requests (the completion endpoints).
	Engine *inference.Engine
	// Health reports a failed engine; nil means always healthy.
	Health func() error
	// Details describe the model's files (the Ollama listings show them).
	Details ModelDetails
	// Sampling, when set, are the model's own defaults for the sampling
	// parameters a request leaves out (a Genie bundle's dialog.sampler),
	// in place of Options.Sampling.
	Sampling *sample.Params
	// ToolFormat is how the model writes tool calls; nil: Llama 3's.
	ToolFormat apiconv.ToolFormat
	// Overflow is the model's context_overflow policy (config
	// engine.context_overflow, models[].context_overflow); "": each API's
	// default.
	Overflow overflow.Policy
	// Shift is the model's context_shift (config engine.context_shift,
	// models[].context_shift); nil: each API's default.
	Shift *bool
	// Reasoning is the model's reasoning parser (model.reasoning_parser);
	// nil: none.
	Reasoning *apiconv.ReasoningParser

	grammarOnce  sync.Once
	grammarVocab atomic.Pointer[grammar.Vocab] // built on the first structured output
}

// ModelDetails describe the served model's files.
type ModelDetails struct {
	Format        string // "qhexrt" (a bundle) or "pte" (ExecuTorch)
	Family        string // "llama"
	ParameterSize string // "3.2B"; "" is unknown
	Quantization  string // "W8A16"; "" is unknown
	Size          int64  // bytes of the model's files
	Digest        string // "sha256:…" of the files' identity
	ModifiedAt    time.Time
	Arch          ModelArch
}

// ModelArch is the model's shape, as its config says; 0 is unknown. Its
// one reader is Ollama's /api/show model_info, so it is ollama's type.
type ModelArch = ollama.Arch

// grammar returns the vocabulary index for structured outputs.
func (m *Model) grammar() *grammar.Vocab {
	m.grammarOnce.Do(func() {
		var eos []int32
		var pieces grammar.Pieces = m.Tokenizer
		if m.Engine != nil {
			info := m.Engine.Info()
			if eos = info.EOS; info.VocabSize > 0 {
				pieces = logitRows{m.Tokenizer, info.VocabSize}
			}
		}
		m.grammarVocab.Store(grammar.VocabOf(pieces, eos))
	})
	return m.grammarVocab.Load()
}

// logitRows is a tokenizer's vocabulary cut at the model's logits (n-vocab may be smaller than the
// tokenizer: ids past it are never sampled).
type logitRows struct {
	grammar.Pieces
	n int
}

func (v logitRows) VocabSize() int { return min(v.Pieces.VocabSize(), v.n) }

// Server routes HTTP requests. It is an http.Handler.
type Server struct {
	bodies  atomic.Int64 // bytes of request bodies read and held now (BodyMemory)
	opts    Options
	log     zerolog.Logger
	reg     *prometheus.Registry
	metrics *metrics
	router  *chi.Mux
	catalog atomic.Pointer[Catalog]
	// grammars caches compiled patterns and masks for all requests.
	grammars *grammar.Cache
	// store keeps stored /v1/responses responses.
	store *respstore.Store
	// leftOut holds the hosted tool types already logged as left out.
	leftOut sync.Map
	// reasoningKey signs the thinking blocks of this server's Anthropic
	// replies (random per process: a block from before a restart does not
	// verify).
	reasoningKey []byte
}

// New builds the router and its middleware.
func New(opts Options) *Server {
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	if opts.BodyMemory <= 0 {
		opts.BodyMemory = DefaultBodyMemory
	}
	if opts.BodyLimit <= 0 {
		opts.BodyLimit = 1 << 20
	}
	if opts.DateString == nil {
		opts.DateString = func() string { return time.Now().Format("02 Jan 2006") }
	}
	if opts.ResponseStore == nil {
		opts.ResponseStore = defaultResponseStore()
	}
	s := &Server{opts: opts, log: opts.Logger, reg: opts.Registry, store: opts.ResponseStore,
		grammars: grammar.NewCache(opts.StructuredCache), reasoningKey: make([]byte, 32)}
	_, _ = rand.Read(s.reasoningKey) // crypto/rand never fails
	s.grammars.LimitCompiles(opts.StructuredCompiles)
	s.metrics = newMetrics(opts.Registry, s.grammars, s.vocabBytes)
	s.routes()
	return s
}

// SetModel serves one loaded model (a catalog of one that is never
// unloaded); /health turns 200.
func (s *Server) SetModel(m *Model) { s.SetCatalog(fixed{m}) }

// Registry is the Prometheus registry served on /metrics.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// routes builds the router. The API of a request is decided here, once: the
// OpenAI routes (and the server's own) are one group, Anthropic's Messages
// API and Ollama's API subrouters, each with its api (error shape, 404 of
// an unknown model) and each endpoint with its prompt field and upstream
// mapping (endpoint).
func (s *Server) routes() {
	r := chi.NewRouter()
	r.Use(routedAPI, s.requestID, s.accessLog, s.writeDeadline, s.recoverer, s.cors)
	unknown := s.group(openAIAPI, false)
	r.NotFound(unknown(http.HandlerFunc(s.notFound)).ServeHTTP)
	r.MethodNotAllowed(unknown(methodNotAllowed(r)).ServeHTTP)

	r.Group(func(r chi.Router) { // no key needed
		r.Use(s.group(openAIAPI, true))
		r.Get("/health", s.health)
		r.Head("/health", s.health) // health checkers probe with HEAD; net/http drops the body
		s.webUIRoutes(r)
	})
	r.Group(func(r chi.Router) {
		r.Use(s.group(openAIAPI, false))
		r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
		r.Post("/v1/chat/completions", s.endpoint("messages", s.forwardTo("/chat/completions"),
			modelRoute(s, func(req *openai.ChatCompletionRequest) string { return req.Model }, s.chatCompletions)))
		r.Post("/v1/completions", s.endpoint("prompt", s.forwardTo("/completions"),
			modelRoute(s, func(req *openai.CompletionRequest) string { return req.Model }, s.completions)))
		r.Post("/v1/responses", s.endpoint("input", s.forwardTo("/responses"),
			modelRoute(s, func(req *openai.ResponseRequest) string { return req.Model }, s.createResponse)))
		r.Get("/v1/responses/{id}", s.handle(s.getResponse))
		r.Delete("/v1/responses/{id}", s.handle(s.deleteResponse))
		r.Get("/v1/responses/{id}/input_items", s.handle(s.listInputItems))
		r.Post("/tokenize", s.handle(
			modelRoute(s, func(req *tokenizeRequest) string { return s.defaultModel(req.Model) }, s.tokenize)))
		r.Post("/detokenize", s.handle(
			modelRoute(s, func(req *detokenizeRequest) string { return s.defaultModel(req.Model) }, s.detokenize)))
		r.Post("/apply-template", s.handle(
			modelRoute(s, func(req *applyTemplateRequest) string { return s.defaultModel(req.Model) }, s.applyTemplate)))
	})
	r.Group(func(r chi.Router) { // OpenAI's model objects, or Anthropic's to its clients
		r.Use(s.groupFor(modelsAPI, false))
		r.Get("/v1/models", s.handle(s.listModels))
		r.Get("/v1/models/{id}", s.handle(s.getModel))
	})
	r.Route("/v1/messages", s.apiRouter(anthropicAPI, func(r chi.Router) {
		r.Post("/", s.endpoint("messages", s.anthropicUpstream, modelRoute(s, messagesModel, s.messages)))
		r.Post("/count_tokens", s.handle(modelRoute(s, messagesModel, s.countTokens)))
	}))
	r.Route("/api", s.apiRouter(ollamaAPI, s.ollamaRoutes))
	s.router = r
}

// defaultModel is the model name of a request to the routes whose requests
// may name none (tokenize, detokenize, apply-template): name, or the first
// configured model when name is "".
func (s *Server) defaultModel(name string) string {
	if c, err := s.catalogOrLoading(); err == nil && name == "" {
		if ms := c.Models(); len(ms) > 0 {
			return ms[0].ID
		}
	}
	return name
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	writeAPIError(w, r, &APIError{Status: http.StatusNotFound, Type: TypeInvalidRequest, Code: "not_found",
		Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)})
}

// methodNotAllowed answers a request whose path routes has under other
// methods, naming them in Allow. It matches the path as routes sees it (a
// subrouter sees what follows its mount point): matched from the top, a
// mount point's own path matches every method.
func methodNotAllowed(routes chi.Routes) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Path
		if rctx := chi.RouteContext(r.Context()); rctx != nil && rctx.RoutePath != "" {
			path = rctx.RoutePath
		}
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodDelete} {
			if routes.Match(chi.NewRouteContext(), m, path) {
				allow = append(allow, m)
			}
		}
		for _, m := range allow {
			w.Header().Add("Allow", m)
		}
		writeAPIError(w, r, &APIError{Status: http.StatusMethodNotAllowed, Type: TypeInvalidRequest, Code: "method_not_allowed",
			Message: fmt.Sprintf("Method %s is not allowed for %s; allowed: %v", r.Method, r.URL.Path, allow)})
	}
}

// decodeJSON reads the request body into v. Malformed JSON, a wrong field
// type, invalid UTF-8, a null where a value is required and an oversized body
// become the matching OpenAI errors.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := s.readBody(w, r)
	var tooLarge *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &tooLarge), errors.Is(err, errBodyMemory):
		return err
	case errors.As(err, &netErr) && netErr.Timeout():
		return &APIError{Status: http.StatusRequestTimeout, Type: TypeInvalidRequest, Code: "request_timeout",
			Message: "The request body did not arrive in time; send it faster or raise server.body_timeout."}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err == nil {
		err = dec.Decode(v)
	}
	if err == nil && dec.More() {
		err = errors.New("unexpected data after the JSON value")
	}
	if err == nil {
		return checkDecoded(body, v)
	}
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &typeErr):
		return typeError(body, typeErr)
	case errors.Is(err, io.EOF):
		return invalid("", "The request body is empty; expected a JSON object.")
	}
	return invalid("", "We could not parse the JSON body of your request (%v).", err)
}

const defaultBodyTimeout = 30 * time.Second

// readBody reads the whole request body (bounded by the body limit) within
// the body timeout. After a complete read the deadline is cleared: left on
// the connection it would cancel a streaming response when it passed. After
// a failed read it stays, so the server does not wait for the rest of the
// body before answering and closes the connection.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	timeout := s.opts.BodyTimeout
	if timeout <= 0 {
		timeout = defaultBodyTimeout
	}
	rc := http.NewResponseController(w)
	deadline := rc.SetReadDeadline(time.Now().Add(timeout)) == nil
	body, err := io.ReadAll(r.Body)
	if deadline && err == nil {
		rc.SetReadDeadline(time.Time{})
	}
	return body, err
}

func lastKey(p string) string { return p[strings.LastIndexByte(p, '.')+1:] }

// jsonPathAt returns the key path, with array indices, of the JSON value that
// ends at byte offset off of data ("messages[1].content"): encoding/json's
// type errors name the field without indices. "" when it cannot tell.
func jsonPathAt(data []byte, off int64) string {
	type frame struct {
		array   bool
		index   int
		key     string
		wantKey bool
	}
	var stack []frame
	// The path is built once, when the value is found: one token costs
	// O(1), so a deep body costs no more here than to parse.
	path := func(stack []frame) string {
		var b strings.Builder
		for _, f := range stack {
			if f.array {
				fmt.Fprintf(&b, "[%d]", f.index)
			} else {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			}
		}
		return b.String()
	}
	valueDone := func() {
		if n := len(stack); n > 0 && !stack[n-1].array {
			stack[n-1].wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		if n := len(stack); n > 0 {
			top := &stack[n-1]
			if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
				stack = stack[:n-1]
				valueDone()
				continue
			}
			if !top.array && top.wantKey {
				top.key, _ = tok.(string)
				top.wantKey = false
				continue
			}
			if top.array {
				top.index++
			}
		}
		depth := len(stack) // the value's own path: stack[:depth]
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{wantKey: true})
		case json.Delim('['):
			stack = append(stack, frame{array: true, index: -1})
		default:
			valueDone()
		}
		if dec.InputOffset() >= off {
			return path(stack[:depth])
		}
	}
}

// jsonParam turns encoding/json's field path into the request's key path by
// dropping the Go names of embedded structs ("CommonParams.temperature" →
// "temperature"); the API's keys are all lower case.
func jsonParam(field string) string {
	parts := strings.Split(field, ".")
	keep := parts[:0]
	for _, p := range parts {
		if p != "" && !(p[0] >= 'A' && p[0] <= 'Z') {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, ".")
}
