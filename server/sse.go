package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// sseWriter writes a Server-Sent Events stream of OpenAI frames: each
// `data: {json}\n\n` frame is flushed at once, a failure after the stream
// started is a `data: {"error": …}` frame, and the stream ends with
// `data: [DONE]`. Each frame must reach the connection within the write
// timeout (writeDeadline), so a client that stops reading cannot hold its
// request (and the model) forever. The first failure sticks: later frames
// are not written and return it.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	buf     bytes.Buffer
	err     error // the first failure
}

// defaultStreamWriteTimeout is Options.StreamWriteTimeout's default.
const defaultStreamWriteTimeout = 30 * time.Second

func newSSE(w http.ResponseWriter) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

// Send writes v as one data frame; the first call sends the headers.
func (s *sseWriter) Send(v any) error { return s.SendEvent("", v) }

// SendEvent writes v as one data frame named event (no event line when "").
func (s *sseWriter) SendEvent(event string, v any) error {
	if s.err != nil {
		return s.err
	}
	s.buf.Reset()
	if event != "" {
		s.buf.WriteString("event: " + event + "\n")
	}
	s.buf.WriteString("data: ")
	enc := json.NewEncoder(&s.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // Encode ends with "\n"
		s.err = err
		return err
	}
	s.buf.WriteByte('\n')
	return s.write(s.buf.Bytes())
}

// Error sends the OpenAI error body of api as a data frame.
func (s *sseWriter) Error(api *APIError) error { return s.Send(api.Body()) }

// Done ends the stream.
func (s *sseWriter) Done() error { return s.write([]byte("data: [DONE]\n\n")) }

// startStream sends a stream's 200 and headers: its content type, no
// caching, and no buffering by a proxy (nginx's X-Accel-Buffering).
func startStream(w http.ResponseWriter, contentType string) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
}

func (s *sseWriter) write(b []byte) error {
	if s.err != nil {
		return s.err
	}
	if !s.started {
		s.w.Header().Set("Connection", "keep-alive")
		startStream(s.w, "text/event-stream")
		s.started = true
	}
	s.err = writeFlush(s.w, s.rc, b)
	return s.err
}

// writeFlush writes b and flushes it; writeDeadline bounds both, and a
// write that cannot finish in time is errStalled.
func writeFlush(w http.ResponseWriter, rc *http.ResponseController, b []byte) error {
	if _, err := w.Write(b); err != nil {
		return err
	}
	return rc.Flush()
}

// errStalled is a write that could not finish within the write timeout:
// the client stopped reading.
var errStalled = errors.New("the client stopped reading")
