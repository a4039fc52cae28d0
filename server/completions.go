package server

import (
	"net/http"
	"time"

	"github.com/hexserve/hexserve/front"
	"github.com/hexserve/hexserve/grammar"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/openai"
)

// chatCompletions is POST /v1/chat/completions.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.catalogOrLoading(); err != nil {
		return err
	}
	var req openai.ChatCompletionRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	l, err := s.openAIModel(w, r, req.Model)
	if err != nil {
		return err
	}
	defer l.Release(nil)
	m := l.Model
	g, err := openai.FromChatCompletionRequest(&req, s.params(r, m))
	if err != nil {
		return err
	}
	meta := openai.NewMeta("chatcmpl-", m.ID, time.Now())
	return s.generate(w, r, m, &g.Request, g.Stream, reply{
		whole: func(res inference.Result) any { return openai.ToChatCompletion(g, meta, res) },
		stream: func() eventStream {
			return chunkStream{newSSE(w, s.opts.StreamWriteTimeout), openai.NewChatStream(g, meta)}
		},
	})
}

// completions is POST /v1/completions.
func (s *Server) completions(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.catalogOrLoading(); err != nil {
		return err
	}
	var req openai.CompletionRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	l, err := s.openAIModel(w, r, req.Model)
	if err != nil {
		return err
	}
	defer l.Release(nil)
	m := l.Model
	g, err := openai.FromCompletionRequest(&req, s.params(r, m))
	if err != nil {
		return err
	}
	meta := openai.NewMeta("cmpl-", m.ID, time.Now())
	return s.generate(w, r, m, &g.Request, g.Stream, reply{
		whole: func(res inference.Result) any { return openai.ToCompletion(g, meta, res) },
		stream: func() eventStream {
			return chunkStream{newSSE(w, s.opts.StreamWriteTimeout), openai.NewCompletionStream(g, meta)}
		},
	})
}

// openAIModel holds the model an OpenAI request names (loading it when
// needed); an unknown one is OpenAI's 404.
func (s *Server) openAIModel(w http.ResponseWriter, r *http.Request, name string) (*Lease, error) {
	if name == "" {
		return nil, invalid("model", "you must provide a model parameter")
	}
	return s.acquire(w, r, name, func(id string) error { return ModelNotFound(id, "model") })
}

// params are the conversion parameters for request r on model m; rendering
// stops when r's client goes away or the prompt cannot fit m's context.
func (s *Server) params(r *http.Request, m *Model) front.Params {
	return front.Params{Tokenizer: m.Tokenizer, Defaults: s.opts.Sampling, MaxTokens: s.opts.MaxTokens,
		ContextLen: m.ContextLen, Date: s.opts.DateString(), Context: r.Context(), Vocab: m.grammar, Compiled: s.compiled,
		Grammar:        grammar.Options{Limits: s.opts.Structured, Cache: s.grammars},
		MaxPromptBytes: front.PromptByteLimit(m.ContextLen, m.Tokenizer.MaxPieceBytes())}
}

// compiled records a structured request's compile time and steps.
func (s *Server) compiled(g *grammar.Grammar) {
	s.metrics.compile.Observe(g.CompileTime().Seconds())
	s.metrics.compileSteps.Observe(float64(g.CompileSteps()))
}

// vocabBytes is the size of the loaded models' vocabulary indexes (each 0
// until a structured output built it).
func (s *Server) vocabBytes() int64 {
	c, err := s.catalogOrLoading()
	if err != nil {
		return 0
	}
	var n int64
	for _, st := range c.Models() {
		if st.Model != nil {
			if v := st.Model.grammarVocab.Load(); v != nil {
				n += v.Bytes()
			}
		}
	}
	return n
}

// chunkStream is the chat and completions stream: data-only chunks, an
// error chunk when generation fails, and [DONE] at the end.
type chunkStream struct {
	*sseWriter
	st *openai.Stream
}

func (c chunkStream) start() { sendAll(c.sseWriter, c.st.Start()) }

func (c chunkStream) event(ev inference.Event) { sendAll(c.sseWriter, c.st.Event(ev)) }

func (chunkStream) committed() bool { return true } // an error is a data frame, even the first

func (c chunkStream) fail(api *APIError) { _ = c.Error(api) }

func (c chunkStream) finish() { _ = c.Done() }

func sendAll(sse *sseWriter, frames []openai.Frame) {
	for _, f := range frames {
		_ = sse.Send(f)
	}
}
