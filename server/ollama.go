package server

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/hexserve/hexserve/front"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/ollama"
)

// ollamaRoutes are the Ollama API under /api/.
func (s *Server) ollamaRoutes(r chi.Router) {
	r.Post("/api/chat", s.handle(s.relayed("", s.ollamaChat)))
	r.Post("/api/generate", s.handle(s.relayed("", s.ollamaGenerate)))
	r.Get("/api/tags", s.handle(s.ollamaTags))
	r.Head("/api/tags", s.handle(s.ollamaTags))
	r.Get("/api/ps", s.handle(s.ollamaPs))
	r.Post("/api/show", s.handle(s.ollamaShow))
	version := func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, ollama.VersionResponse{Version: ollama.Version, Hexserve: s.opts.Version})
	}
	r.Get("/api/version", version)
	r.Head("/api/version", version)
	for _, p := range []string{"/api/pull", "/api/push", "/api/create", "/api/copy", "/api/blobs/{digest}"} {
		r.Post(p, s.handle(errModelFiles))
	}
	r.Head("/api/blobs/{digest}", s.handle(errModelFiles))
	r.Delete("/api/delete", s.handle(errModelFiles))
	r.Post("/api/embed", s.handle(errNoEmbeddings))
	r.Post("/api/embeddings", s.handle(errNoEmbeddings))
}

func isOllamaPath(p string) bool { return strings.HasPrefix(p, "/api/") }

// ollamaError is Ollama's error body: the message, after the name of the
// offending field when the message does not say it.
func ollamaError(api *APIError) any { return ollama.ErrorResponse{Error: paramMessage(api)} }

func errModelFiles(_ http.ResponseWriter, r *http.Request) error {
	return &APIError{Status: http.StatusNotImplemented, Type: TypeInvalidRequest, Message: fmt.Sprintf(
		"%s is not supported: hexserve serves the model files on the device and does not pull, push, create, copy "+
			"or delete models; copy a model onto the device and point model.bundle at it", r.URL.Path)}
}

func errNoEmbeddings(_ http.ResponseWriter, r *http.Request) error {
	return &APIError{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Message: fmt.Sprintf(
		"%s is not supported: the served model is a chat model, there is no embedding model", r.URL.Path)}
}

// ollamaName resolves a request's model name: a served id, an alias, or
// either with Ollama's default tag ":latest". An unknown one is Ollama's 404.
func (s *Server) ollamaName(name string) (ModelState, error) {
	if name == "" {
		return ModelState{}, invalid("model", "model is required")
	}
	if st, ok := s.Resolve(name); ok {
		return st, nil
	}
	if base, ok := strings.CutSuffix(name, ":latest"); ok {
		if st, ok := s.Resolve(base); ok {
			return st, nil
		}
	}
	return ModelState{}, errOllamaNotFound(name)
}

func errOllamaNotFound(name string) error {
	return &APIError{Status: http.StatusNotFound, Type: TypeInvalidRequest, Code: "model_not_found", Param: "model",
		Message: fmt.Sprintf("model %q not found", name)}
}

// ollamaModel holds the model an Ollama request names (loading it when
// needed).
func (s *Server) ollamaModel(w http.ResponseWriter, r *http.Request, name string) (*Lease, error) {
	st, err := s.ollamaName(name)
	if err != nil {
		return nil, err
	}
	return s.acquire(w, r, st.ID, errOllamaNotFound)
}

// ollamaChat is POST /api/chat.
func (s *Server) ollamaChat(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	if _, err := s.catalogOrLoading(); err != nil {
		return err
	}
	var req ollama.ChatRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if len(req.Messages) == 0 { // load or unload: no tokenizer needed
		g, err := ollama.FromChatRequest(&req, front.Params{})
		if err != nil {
			return err
		}
		return s.ollamaLoad(w, r, req.Model, g, ollama.Meta{Model: req.Model, Start: start})
	}
	l, err := s.ollamaModel(w, r, req.Model)
	if err != nil {
		return err
	}
	g, err := ollama.FromChatRequest(&req, s.params(r, l.Model))
	if err != nil {
		l.Release(nil)
		return err
	}
	return s.ollamaReply(w, r, l, g, ollama.Meta{Model: req.Model, Start: start})
}

// ollamaGenerate is POST /api/generate.
func (s *Server) ollamaGenerate(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	if _, err := s.catalogOrLoading(); err != nil {
		return err
	}
	var req ollama.GenerateRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Prompt == "" {
		g, err := ollama.FromGenerateRequest(&req, front.Params{})
		if err != nil {
			return err
		}
		return s.ollamaLoad(w, r, req.Model, g, ollama.Meta{Model: req.Model, Start: start})
	}
	l, err := s.ollamaModel(w, r, req.Model)
	if err != nil {
		return err
	}
	g, err := ollama.FromGenerateRequest(&req, s.params(r, l.Model))
	if err != nil {
		l.Release(nil)
		return err
	}
	return s.ollamaReply(w, r, l, g, ollama.Meta{Model: req.Model, Start: start})
}

// ollamaLoad answers a request with nothing to generate: it loads the model
// and keeps it for keep_alive, or, with keep_alive 0, unloads it if it is
// loaded and idle (without loading one that is not).
func (s *Server) ollamaLoad(w http.ResponseWriter, r *http.Request, name string, g *ollama.Generation, meta ollama.Meta) error {
	st, err := s.ollamaName(name)
	if err != nil {
		return err
	}
	if g.KeepAlive == nil || *g.KeepAlive != 0 || st.Status == StatusLoaded {
		l, err := s.acquire(w, r, st.ID, errOllamaNotFound)
		if err != nil {
			return err
		}
		l.Release(g.KeepAlive)
	}
	writeJSON(w, http.StatusOK, ollama.NewStream(g, meta).Load())
	return nil
}

// ollamaReply submits g through the one submit path and writes the whole
// reply or an NDJSON stream. Errors before the first line go back to the
// handler (a status and an error body); after it they are a last
// {"error": …} line. The lease is released, with the request's keep_alive,
// when the reply ends.
func (s *Server) ollamaReply(w http.ResponseWriter, r *http.Request, l *Lease, g *ollama.Generation, meta ollama.Meta) error {
	defer l.Release(g.KeepAlive)
	st := ollama.NewStream(g, meta)
	if g.Load {
		writeJSON(w, http.StatusOK, st.Load())
		return nil
	}
	return s.generate(w, r, l.Model, &g.Request, g.Stream, reply{
		whole:  func(res inference.Result) any { return st.Response(res) },
		stream: func() eventStream { return ollamaStream{newNDJSON(w, s.opts.StreamWriteTimeout), st} },
	})
}

// ollamaStream is Ollama's NDJSON stream: one JSON object per line, and a
// last {"error": …} line when generation fails after the first line.
type ollamaStream struct {
	*ndjsonWriter
	st *ollama.Stream
}

func (o ollamaStream) start() {}

func (o ollamaStream) event(ev inference.Event) {
	for _, line := range o.st.Event(ev) {
		_ = o.Send(line)
	}
}

func (o ollamaStream) committed() bool { return o.started }

func (o ollamaStream) fail(api *APIError) { _ = o.Send(ollamaError(api)) }

func (o ollamaStream) finish() {}

// card describes a model for the Ollama listings.
func (s *Server) card(st ModelState) ollama.Card {
	d := st.Details
	if d.Family == "" {
		d.Family = "llama" // the models hexserve serves
	}
	var vocab int
	if m := st.Model; m != nil {
		vocab = m.Tokenizer.VocabSize()
		if m.Engine != nil {
			vocab = m.Engine.Info().VocabSize
		}
	}
	return ollama.Card{Name: st.ID, Format: d.Format, Family: d.Family, ParameterSize: d.ParameterSize,
		Quantization: d.Quantization, Size: d.Size, Digest: d.Digest, ModifiedAt: d.ModifiedAt,
		ContextLen: st.ContextLen, VocabSize: vocab, Defaults: s.opts.Sampling, Date: s.opts.DateString(),
		ExpiresAt: st.ExpiresAt}
}

// ollamaTags is GET /api/tags: every served model.
func (s *Server) ollamaTags(w http.ResponseWriter, r *http.Request) error {
	c, err := s.catalogOrLoading()
	if err != nil {
		return err
	}
	var cards []ollama.Card
	for _, st := range c.Models() {
		cards = append(cards, s.card(st))
	}
	writeJSON(w, http.StatusOK, ollama.List(cards...))
	return nil
}

// ollamaPs is GET /api/ps: the loaded models, with when each will be
// unloaded; none while loading (as Ollama lists none before its first load).
func (s *Server) ollamaPs(w http.ResponseWriter, r *http.Request) error {
	var cards []ollama.Card
	if c, err := s.catalogOrLoading(); err == nil {
		for _, st := range c.Models() {
			if st.Status == StatusLoaded {
				cards = append(cards, s.card(st))
			}
		}
	}
	writeJSON(w, http.StatusOK, ollama.Process(cards...))
	return nil
}

// ollamaShow is POST /api/show.
func (s *Server) ollamaShow(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.catalogOrLoading(); err != nil {
		return err
	}
	var req ollama.ShowRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	name := req.Model
	if name == "" {
		name = req.Name
	}
	st, err := s.ollamaName(name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ollama.Show(s.card(st)))
	return nil
}
