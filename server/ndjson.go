package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"
)

// ndjsonWriter writes a newline-delimited JSON stream (Ollama's): one JSON
// value per line, each flushed at once and within timeout, like sseWriter's
// frames. The first failure sticks: later lines are not written and return
// it.
type ndjsonWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	started bool
	buf     bytes.Buffer
	err     error
}

func newNDJSON(w http.ResponseWriter, timeout time.Duration) *ndjsonWriter {
	if timeout <= 0 {
		timeout = defaultStreamWriteTimeout
	}
	return &ndjsonWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// Send writes v as one line; the first call sends the headers.
func (n *ndjsonWriter) Send(v any) error {
	if n.err != nil {
		return n.err
	}
	n.buf.Reset()
	enc := json.NewEncoder(&n.buf)
	enc.SetEscapeHTML(false)
	if n.err = enc.Encode(v); n.err != nil { // Encode ends with "\n"
		return n.err
	}
	if !n.started {
		startStream(n.w, "application/x-ndjson")
		n.started = true
	}
	n.err = timedWrite(n.w, n.rc, n.timeout, n.buf.Bytes())
	return n.err
}

// end clears the write deadline after a complete stream.
func (n *ndjsonWriter) end() { _ = n.rc.SetWriteDeadline(time.Time{}) }
