package server

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// ndjsonWriter writes a newline-delimited JSON stream (Ollama's): one JSON
// value per line, each flushed at once and within the write timeout, like
// sseWriter's frames. The first failure sticks: later lines are not written
// and return it.
type ndjsonWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	buf     bytes.Buffer
	err     error
}

func newNDJSON(w http.ResponseWriter) *ndjsonWriter {
	return &ndjsonWriter{w: w, rc: http.NewResponseController(w)}
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
	n.err = writeFlush(n.w, n.rc, n.buf.Bytes())
	return n.err
}
