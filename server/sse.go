package server

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// sseWriter writes a Server-Sent Events stream of OpenAI frames: each
// `data: {json}\n\n` frame is flushed at once, a failure after the stream
// started is a `data: {"error": …}` frame, and the stream ends with
// `data: [DONE]`.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	buf     bytes.Buffer
}

func newSSE(w http.ResponseWriter) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

// Send writes v as one data frame; the first call sends the headers.
func (s *sseWriter) Send(v any) error { return s.SendEvent("", v) }

// SendEvent writes v as one data frame named event (no event line when "").
func (s *sseWriter) SendEvent(event string, v any) error {
	s.buf.Reset()
	if event != "" {
		s.buf.WriteString("event: " + event + "\n")
	}
	s.buf.WriteString("data: ")
	enc := json.NewEncoder(&s.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // Encode ends with "\n"
		return err
	}
	s.buf.WriteByte('\n')
	return s.write(s.buf.Bytes())
}

// Error sends the OpenAI error body of api as a data frame.
func (s *sseWriter) Error(api *APIError) error { return s.Send(api.Body()) }

// Done ends the stream.
func (s *sseWriter) Done() error { return s.write([]byte("data: [DONE]\n\n")) }

func (s *sseWriter) write(b []byte) error {
	if !s.started {
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("Connection", "keep-alive")
		h.Set("X-Accel-Buffering", "no")
		s.w.WriteHeader(http.StatusOK)
		s.started = true
	}
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}
