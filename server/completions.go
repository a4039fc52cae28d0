package server

import "net/http"

// PLACEHOLDER: the OpenAI completions engineer replaces this file (and adds
// sse.go) with the real /v1/chat/completions and /v1/completions handlers.
// Until then both routes answer 501 in the OpenAI error shape.

var errNotImplemented = &APIError{Status: http.StatusNotImplemented, Type: TypeServer, Code: "not_implemented",
	Message: "This endpoint is not implemented yet."}

// chatCompletions is POST /v1/chat/completions (placeholder).
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) error {
	return errNotImplemented
}

// completions is POST /v1/completions (placeholder).
func (s *Server) completions(w http.ResponseWriter, r *http.Request) error { return errNotImplemented }
