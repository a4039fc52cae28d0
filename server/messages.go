package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/hexserve/hexserve/anthropic"
	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
)

func messagesModel(req *anthropic.MessagesRequest) string { return req.Model }

// messages is POST /v1/messages, the Anthropic Messages API.
func (s *Server) messages(c *call, req *anthropic.MessagesRequest) error {
	g, err := convertMessages(c, req, anthropic.FromMessagesRequest)
	if err != nil {
		return err
	}
	id := anthropic.NewMessageID()
	return c.generate(&g.Request, g.Stream, reply{
		whole:  func(res inference.Result) any { return anthropic.ToMessage(g, id, res) },
		stream: func() eventStream { return messageStream{c.sse(), anthropic.NewStream(g, id)} },
	})
}

// countTokens is POST /v1/messages/count_tokens: the prompt tokens
// /v1/messages would feed the model for the same body.
func (s *Server) countTokens(c *call, req *anthropic.MessagesRequest) error {
	n, err := convertMessages(c, req, anthropic.CountTokens)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, anthropic.TokenCount{InputTokens: n})
	return nil
}

// convertMessages holds c's model and converts req with convert; a prompt
// past the window's byte bound is Anthropic's prompt-too-long error.
func convertMessages[T any](c *call, req *anthropic.MessagesRequest, convert func(*anthropic.MessagesRequest, apiconv.Params) (T, error)) (T, error) {
	var zero T
	m, err := c.model()
	if err != nil {
		return zero, err
	}
	out, err := convert(req, c.params())
	if err != nil {
		return zero, windowError(err, m)
	}
	return out, nil
}

// messageStream is the Messages stream: named events, a ping while
// nothing else is sent, and an error event when generation fails.
type messageStream struct {
	*sseWriter
	st *anthropic.Stream
}

// start sends nothing: message_start waits for the first event, which
// says how much of the prompt was read from the cache (or for a ping or a
// failure, whichever comes first).
func (c messageStream) start() {}

func (c messageStream) event(ev inference.Event) { sendNamed(c.sseWriter, c.st.Event(ev)) }

func (c messageStream) ping() {
	if evs := c.st.Start(); evs != nil {
		sendNamed(c.sseWriter, evs) // message_start, then its ping
		return
	}
	sendNamed(c.sseWriter, []anthropic.Event{anthropic.Ping()})
}

func (messageStream) committed() bool { return true } // message_start goes out first, whatever comes

func (c messageStream) fail(api *APIError) {
	sendNamed(c.sseWriter, append(c.st.Start(), anthropic.Fail(anthropicBody(api).Error)))
}

func (messageStream) finish() {}

func sendNamed(sse *sseWriter, evs []anthropic.Event) {
	for _, e := range evs {
		_ = sse.SendEvent(e.Type, e)
	}
}

// anthropicErrorFor is errorFor with Anthropic's conventions: a full queue
// is 529 overloaded_error, and a prompt over the window is a 400 in
// Anthropic's own words ("prompt is too long: N tokens > M maximum"), which
// Claude Code reads to compact its history.
func anthropicErrorFor(err error, promptParam string) (*APIError, bool) {
	var (
		ctxLen  *inference.ContextLengthError
		tooLong *promptTooLong
	)
	switch {
	case errors.Is(err, inference.ErrBusy):
		return &APIError{Status: anthropic.StatusOverloaded, Type: TypeServer, Code: "server_overloaded",
			Message: "Overloaded: the server is busy with other requests, please retry shortly.", RetryAfter: 1}, false
	case errors.As(err, &ctxLen):
		msg := fmt.Sprintf("prompt is too long: %d tokens > %d maximum", ctxLen.PromptTokens, ctxLen.ContextLen-1)
		if ctxLen.Kept != "" {
			msg += fmt.Sprintf(" (context_overflow kept %s)", ctxLen.Kept)
		}
		return &APIError{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Code: "context_length_exceeded", Message: msg}, false
	case errors.As(err, &tooLong):
		return &APIError{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Code: "context_length_exceeded",
			Message: fmt.Sprintf("prompt is too long: more than %d tokens > %d maximum", tooLong.contextLen, tooLong.contextLen-1)}, false
	}
	return errorFor(err, promptParam)
}

// promptTooLong is a prompt that rendered past the bytes the window can
// hold (chat.LengthError), with the window it was checked against: since
// no token is longer than the tokenizer's longest piece, it has more tokens
// than the window.
type promptTooLong struct{ contextLen int }

func (e *promptTooLong) Error() string {
	return fmt.Sprintf("the prompt has more than %d tokens", e.contextLen)
}

// windowError turns a render past the window's byte bound into
// promptTooLong for m's window.
func windowError(err error, m *Model) error {
	var le *chat.LengthError
	if errors.As(err, &le) {
		return &promptTooLong{contextLen: m.ContextLen}
	}
	return err
}
