package server

import (
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/ollama"
)

// ollamaRoutes are the Ollama API (the routes of the /api subrouter).
func (s *Server) ollamaRoutes(r chi.Router) {
	r.Post("/chat", s.endpoint("messages", s.ollamaUpstream(false),
		modelRoute(s, func(req *ollama.ChatRequest) string { return req.Model }, s.ollamaChat)))
	r.Post("/generate", s.endpoint("prompt", s.ollamaUpstream(true),
		modelRoute(s, func(req *ollama.GenerateRequest) string { return req.Model }, s.ollamaGenerate)))
	r.Get("/tags", s.handle(s.ollamaTags))
	r.Head("/tags", s.handle(s.ollamaTags))
	r.Get("/ps", s.handle(s.ollamaPs))
	r.Post("/show", s.handle(s.ollamaShow))
	version := func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, ollama.VersionResponse{Version: ollama.Version, Hexserve: s.opts.Version})
	}
	r.Get("/version", version)
	r.Head("/version", version)
	for _, p := range []string{"/pull", "/push", "/create", "/copy", "/blobs/{digest}"} {
		r.Post(p, s.handle(errModelFiles))
	}
	r.Head("/blobs/{digest}", s.handle(errModelFiles))
	r.Delete("/delete", s.handle(errModelFiles))
	r.Post("/embed", s.handle(errNoEmbeddings))
	r.Post("/embeddings", s.handle(errNoEmbeddings))
}

func errModelFiles(_ http.ResponseWriter, r *http.Request) error {
	return &APIError{Status: http.StatusNotImplemented, Type: TypeInvalidRequest, Message: fmt.Sprintf(
		"%s is not supported: hexserve serves the model files on the device and does not pull, push, create, copy "+
			"or delete models; copy a model onto the device and point model.bundle at it", r.URL.Path)}
}

func errNoEmbeddings(_ http.ResponseWriter, r *http.Request) error {
	return &APIError{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Message: fmt.Sprintf(
		"%s is not supported: the served model is a chat model, there is no embedding model", r.URL.Path)}
}

// ollamaChat is POST /api/chat.
func (s *Server) ollamaChat(c *call, req *ollama.ChatRequest) error {
	return s.ollamaReply(c, ollama.Meta{Model: req.Model, Start: c.start}, len(req.Messages) == 0,
		func(p apiconv.Params) (*ollama.Generation, error) { return ollama.FromChatRequest(req, p) })
}

// ollamaGenerate is POST /api/generate.
func (s *Server) ollamaGenerate(c *call, req *ollama.GenerateRequest) error {
	return s.ollamaReply(c, ollama.Meta{Model: req.Model, Start: c.start}, req.Prompt == "",
		func(p apiconv.Params) (*ollama.Generation, error) { return ollama.FromGenerateRequest(req, p) })
}

// ollamaReply converts an Ollama request and answers it. A request with
// nothing to generate (load) loads the model and keeps it for keep_alive,
// or, with keep_alive 0, unloads it if it is loaded and idle (without
// loading one that is not). The others go through the one submit path,
// whole or as an NDJSON stream: errors before the first line go back to the
// handler (a status and an error body), after it they are a last
// {"error": …} line. The model is released with the request's keep_alive.
func (s *Server) ollamaReply(c *call, meta ollama.Meta, load bool, convert func(apiconv.Params) (*ollama.Generation, error)) error {
	if load { // no tokenizer needed
		g, err := convert(apiconv.Params{})
		if err != nil {
			return err
		}
		c.keepAlive = g.KeepAlive
		if g.KeepAlive == nil || *g.KeepAlive != 0 || c.state.Status == StatusLoaded {
			if _, err := c.model(); err != nil {
				return err
			}
		}
		writeJSON(c.w, http.StatusOK, ollama.NewStream(g, meta).Load())
		return nil
	}
	if _, err := c.model(); err != nil {
		return err
	}
	g, err := convert(c.params())
	if err != nil {
		return err
	}
	c.keepAlive = g.KeepAlive
	st := ollama.NewStream(g, meta)
	return c.generate(&g.Request, g.Stream, reply{
		whole:  func(res inference.Result) any { return st.Response(res) },
		stream: func() eventStream { return ollamaStream{newNDJSON(c.w), st} },
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
		ContextLen: st.ContextLen, VocabSize: vocab, Defaults: s.samplingFor(st.Model), Date: s.opts.DateString(),
		ExpiresAt: st.ExpiresAt, Arch: d.Arch}
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
	st, err := s.resolveFor(r, name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ollama.Show(s.card(st)))
	return nil
}
