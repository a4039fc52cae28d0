package server

import (
	"net/http"
	"time"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/grammar"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/openai"
)

// chatCompletions is POST /v1/chat/completions.
func (s *Server) chatCompletions(c *call, req *openai.ChatCompletionRequest) error {
	return openAIChunks(c, "chatcmpl-", func(p apiconv.Params) (*openai.Generation, error) {
		return openai.FromChatCompletionRequest(req, p)
	}, openai.ToChatCompletion, openai.NewChatStream)
}

// completions is POST /v1/completions.
func (s *Server) completions(c *call, req *openai.CompletionRequest) error {
	return openAIChunks(c, "cmpl-", func(p apiconv.Params) (*openai.Generation, error) {
		return openai.FromCompletionRequest(req, p)
	}, openai.ToCompletion, openai.NewCompletionStream)
}

// openAIChunks converts a chat or completions request on c's model and
// answers it: the whole response, or the stream of its chunks (ids with
// prefix).
func openAIChunks[T any](c *call, prefix string, convert func(apiconv.Params) (*openai.Generation, error),
	whole func(*openai.Generation, openai.Meta, inference.Result) T, stream func(*openai.Generation, openai.Meta) *openai.Stream) error {
	m, err := c.model()
	if err != nil {
		return err
	}
	g, err := convert(c.params())
	if err != nil {
		return err
	}
	meta := openai.NewMeta(prefix, m.ID, time.Now())
	return c.generate(&g.Request, g.Stream, reply{
		whole:  func(res inference.Result) any { return whole(g, meta, res) },
		stream: func() eventStream { return chunkStream{c.sse(), stream(g, meta)} },
	})
}

// params are the conversion parameters for request r on model m; rendering
// stops when r's client goes away or the prompt cannot fit m's context.
func (s *Server) params(r *http.Request, m *Model) apiconv.Params {
	return apiconv.Params{Tokenizer: m.Tokenizer, Template: m.Template, Defaults: s.samplingFor(m), MaxTokens: s.opts.MaxTokens,
		ContextLen: m.ContextLen, Date: s.opts.DateString(), Context: r.Context(), Vocab: m.grammar, Compiled: s.compiled,
		Grammar:    grammar.Options{Limits: s.opts.Structured, Cache: s.grammars},
		ToolFormat: m.ToolFormat,
		Reasoning:  m.Reasoning, ReasoningKey: s.reasoningKey,
		MaxPromptBytes: apiconv.PromptByteLimit(m.ContextLen, m.Tokenizer.MaxPieceBytes())}
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

// samplingFor is the sampling defaults of requests to m (nil: the server's).
func (s *Server) samplingFor(m *Model) sample.Params {
	if m != nil && m.Sampling != nil {
		return *m.Sampling
	}
	return s.opts.Sampling
}
