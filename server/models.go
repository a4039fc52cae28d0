package server

import (
	"fmt"
	"net/http"
	"path"
	"slices"

	"github.com/go-chi/chi/v5"
)

// health is GET /health: 200 {"status":"ok"} once the model is loaded and the
// engine is healthy (with the sequences it is advancing now and at most),
// 503 with "loading" or "unhealthy" otherwise.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	m := s.model.Load()
	switch {
	case m == nil:
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "loading"})
	case m.Health != nil:
		if err := m.Health(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unhealthy", "error": err.Error()})
			return
		}
		fallthrough
	default:
		body := map[string]any{"status": "ok"}
		if m.Engine != nil {
			body["active_sequences"] = m.Engine.ActiveSequences()
			body["max_sequences"] = m.Engine.MaxSequences()
			if st, ok := m.Engine.KVStats(); ok {
				body["kv_cache"] = st
			}
		}
		writeJSON(w, http.StatusOK, body)
	}
}

// modelObject is OpenAI's model object.
type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// MaxModelLen is the context length in tokens (vLLM's field).
	MaxModelLen int `json:"max_model_len"`
}

func (m *Model) object(id string) modelObject {
	return modelObject{ID: id, Object: "model", Created: m.Created.Unix(), OwnedBy: "hexserve", MaxModelLen: m.ContextLen}
}

// Resolve maps a requested model id, alias, or name matching one of the
// AliasGlobs to the served id. ok is false for an unknown id.
func (m *Model) Resolve(id string) (string, bool) {
	if m.names(id) {
		return m.ID, true
	}
	for pat, target := range m.AliasGlobs {
		if ok, _ := path.Match(pat, id); ok && m.names(target) {
			return m.ID, true
		}
	}
	return "", false
}

// names reports whether id is the served id or one of its exact aliases.
func (m *Model) names(id string) bool { return id == m.ID || slices.Contains(m.Aliases, id) }

// ModelNotFound is the OpenAI error for an unknown model id.
func ModelNotFound(id, param string) *APIError {
	return &APIError{Status: http.StatusNotFound, Type: TypeInvalidRequest, Code: "model_not_found", Param: param,
		Message: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", id)}
}

// listModels is GET /v1/models: the served id (aliases are accepted in
// requests but not listed, so clients see one model).
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) error {
	m, err := s.loaded()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}{"list", []modelObject{m.object(m.ID)}})
	return nil
}

// getModel is GET /v1/models/{id}; an alias answers with the object under
// the id it was asked for.
func (s *Server) getModel(w http.ResponseWriter, r *http.Request) error {
	m, err := s.loaded()
	if err != nil {
		return err
	}
	id := chi.URLParam(r, "id")
	if _, ok := m.Resolve(id); !ok {
		return ModelNotFound(id, "model")
	}
	writeJSON(w, http.StatusOK, m.object(id))
	return nil
}
