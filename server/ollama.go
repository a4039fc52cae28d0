package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/ollama"
)

// ollamaRoutes are the Ollama API under /api/.
func (s *Server) ollamaRoutes(r chi.Router) {
	r.Post("/api/chat", s.handle(s.ollamaChat))
	r.Post("/api/generate", s.handle(s.ollamaGenerate))
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

// ollamaModel checks a request's model name: the served id, an alias, or
// either with Ollama's default tag ":latest".
func ollamaModel(m *Model, name string) error {
	if name == "" {
		return invalid("model", "model is required")
	}
	if _, ok := m.Resolve(name); ok {
		return nil
	}
	if base, ok := strings.CutSuffix(name, ":latest"); ok {
		if _, ok := m.Resolve(base); ok {
			return nil
		}
	}
	return &APIError{Status: http.StatusNotFound, Type: TypeInvalidRequest, Code: "model_not_found", Param: "model",
		Message: fmt.Sprintf("model %q not found", name)}
}

// ollamaParams are the conversion parameters for request r on model m.
func (s *Server) ollamaParams(r *http.Request, m *Model) ollama.Params {
	p := s.params(r, m)
	return ollama.Params{Tokenizer: p.Tokenizer, Defaults: p.Defaults, MaxTokens: p.MaxTokens, ContextLen: m.ContextLen,
		Constrainer: p.Constrainer, Grammar: p.Grammar, Date: p.Date, MaxPromptBytes: p.MaxPromptBytes, Context: p.Context}
}

// ollamaChat is POST /api/chat.
func (s *Server) ollamaChat(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	m, err := s.loaded()
	if err != nil {
		return err
	}
	var req ollama.ChatRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := ollamaModel(m, req.Model); err != nil {
		return err
	}
	g, err := ollama.FromChatRequest(&req, s.ollamaParams(r, m))
	if err != nil {
		return err
	}
	return s.ollamaReply(w, r, m, g, ollama.Meta{Model: req.Model, Start: start})
}

// ollamaGenerate is POST /api/generate.
func (s *Server) ollamaGenerate(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	m, err := s.loaded()
	if err != nil {
		return err
	}
	var req ollama.GenerateRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := ollamaModel(m, req.Model); err != nil {
		return err
	}
	g, err := ollama.FromGenerateRequest(&req, s.ollamaParams(r, m))
	if err != nil {
		return err
	}
	return s.ollamaReply(w, r, m, g, ollama.Meta{Model: req.Model, Start: start})
}

// ollamaReply submits g and writes the whole reply or an NDJSON stream.
// Errors before the first line go back to the handler (a status and an
// error body); after it they are a last {"error": …} line.
func (s *Server) ollamaReply(w http.ResponseWriter, r *http.Request, m *Model, g *ollama.Generation, meta ollama.Meta) error {
	st := ollama.NewStream(g, meta)
	if g.Load { // the model is always loaded
		writeJSON(w, http.StatusOK, st.Load())
		return nil
	}
	if m.Engine == nil {
		return errLoading
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	g.Request.Owner = requestOwner(r.Context())
	events, err := m.Engine.Submit(ctx, g.Request)
	if err != nil {
		return err
	}
	if !g.Stream {
		res, err := inference.Collect(events)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, st.Response(res))
		return nil
	}
	nd := newNDJSON(w, s.opts.StreamWriteTimeout)
	var failed error
	for ev := range events.Events() {
		for _, line := range st.Event(ev) {
			_ = nd.Send(line)
		}
		if nd.err != nil {
			cancel() // the client is gone: stop generating, keep draining
		}
		if ev.Done && ev.Err != nil {
			failed = ev.Err
		}
	}
	if failed != nil {
		if !nd.started {
			return failed
		}
		api, unexpected := errorFor(failed, promptParam(r))
		log := zerolog.Ctx(r.Context())
		if unexpected {
			log.Error().Err(failed).Str("path", r.URL.Path).Msg("stream failed")
		} else {
			log.Debug().Err(failed).Msg("stream ended with an error")
		}
		_ = nd.Send(ollamaError(api))
	}
	s.endStream(r, nd.end, nd.timeout, nd.err)
	return nil
}

// card describes m for the Ollama listings.
func (s *Server) card(m *Model) ollama.Card {
	d := m.Details
	if d.Family == "" {
		d.Family = "llama" // the models hexserve serves
	}
	vocab := m.Tokenizer.VocabSize()
	if m.Engine != nil {
		vocab = m.Engine.Info().VocabSize
	}
	return ollama.Card{Name: m.ID, Format: d.Format, Family: d.Family, ParameterSize: d.ParameterSize,
		Quantization: d.Quantization, Size: d.Size, Digest: d.Digest, ModifiedAt: d.ModifiedAt,
		ContextLen: m.ContextLen, VocabSize: vocab, Defaults: s.opts.Sampling, Date: s.opts.DateString()}
}

// ollamaTags is GET /api/tags: the served model.
func (s *Server) ollamaTags(w http.ResponseWriter, r *http.Request) error {
	m, err := s.loaded()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ollama.List(s.card(m)))
	return nil
}

// ollamaPs is GET /api/ps: the served model, loaded for good; while it
// loads, no model (as Ollama lists none before its first load).
func (s *Server) ollamaPs(w http.ResponseWriter, r *http.Request) error {
	m := s.model.Load()
	if m == nil {
		writeJSON(w, http.StatusOK, ollama.ProcessResponse{Models: []ollama.ProcessModel{}})
		return nil
	}
	writeJSON(w, http.StatusOK, ollama.Process(s.card(m)))
	return nil
}

// ollamaShow is POST /api/show.
func (s *Server) ollamaShow(w http.ResponseWriter, r *http.Request) error {
	m, err := s.loaded()
	if err != nil {
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
	if err := ollamaModel(m, name); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ollama.Show(s.card(m)))
	return nil
}
