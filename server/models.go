package server

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/go-chi/chi/v5"
)

// health is GET /health: 200 {"status":"ok"} once the preloaded models are
// loaded and every loaded engine is healthy (with the sequences it is
// advancing now and at most), 503 with "loading" or "unhealthy" otherwise. With several models, "models" gives each one's
// state; a model that failed to load or is unloaded does not fail the health
// of the others. With API keys set, a request without one learns only the
// status (ok, loading or unhealthy): the rest tells of traffic.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	code, body := s.healthBody(r)
	if code == http.StatusServiceUnavailable && body["status"] == "loading" {
		w.Header().Set("Retry-After", "5")
	}
	if !s.authorized(r) {
		body = map[string]any{"status": body["status"]}
	}
	writeJSON(w, code, body)
}

// healthBody is /health's status code and full body.
func (s *Server) healthBody(r *http.Request) (int, map[string]any) {
	c, err := s.catalogOrLoading()
	ups := s.upstreamHealth(r.Context()) // reported, never failing the local models' health
	if err != nil {
		body := map[string]any{"status": "loading"}
		if ups != nil {
			body["upstreams"] = ups
		}
		return http.StatusServiceUnavailable, body
	}
	states := c.Models()
	status, code := "ok", http.StatusOK
	var firstErr error
	per := make(map[string]any, len(states))
	for _, st := range states {
		one := map[string]any{"status": st.Status}
		switch {
		case st.Status == StatusLoading && st.Preload && status == "ok":
			status, code = "loading", http.StatusServiceUnavailable
		case st.Status == StatusFailed:
			one["error"] = st.Err.Error()
		case st.Model != nil && st.Model.Health != nil:
			if err := st.Model.Health(); err != nil {
				one["status"], one["error"] = "unhealthy", err.Error()
				if firstErr == nil {
					firstErr = err
				}
			}
		}
		if st.Model != nil && st.Model.Engine != nil && one["status"] == StatusLoaded {
			one["active_sequences"] = st.Model.Engine.ActiveSequences()
			one["max_sequences"] = st.Model.Engine.MaxSequences()
			if kv, ok := st.Model.Engine.KVStats(); ok {
				one["kv_cache"] = kv
			}
		}
		per[st.ID] = one
	}
	if firstErr != nil {
		status, code = "unhealthy", http.StatusServiceUnavailable
	}
	body := map[string]any{"status": status}
	if firstErr != nil {
		body["error"] = firstErr.Error()
	}
	if len(states) == 1 { // one model: its engine's fields at the top, as before several models
		if firstErr != nil {
			return code, map[string]any{"status": status, "error": firstErr.Error()}
		}
		for _, k := range []string{"active_sequences", "max_sequences", "kv_cache"} {
			if v, ok := per[states[0].ID].(map[string]any)[k]; ok {
				body[k] = v
			}
		}
	} else {
		body["models"] = per
	}
	if ups != nil {
		body["upstreams"] = ups
	}
	return code, body
}

// modelObject is OpenAI's model object.
type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// MaxModelLen is the context length in tokens (vLLM's field); absent
	// while it is unknown (a model not loaded yet).
	MaxModelLen int `json:"max_model_len,omitempty"`
	// Status is loaded, loading, unloaded or failed; Loaded is Status ==
	// loaded.
	Status string `json:"status"`
	Loaded bool   `json:"loaded"`
	// Upstream marks a model served by another server (status "upstream").
	Upstream bool `json:"upstream,omitempty"`
}

func stateObject(st ModelState, id string) modelObject {
	var created int64
	if st.Model != nil {
		created = st.Model.Created.Unix()
	} else if !st.Details.ModifiedAt.IsZero() {
		created = st.Details.ModifiedAt.Unix()
	}
	return modelObject{ID: id, Object: "model", Created: created, OwnedBy: "hexserve", MaxModelLen: st.ContextLen,
		Status: st.Status, Loaded: st.Status == StatusLoaded}
}

// Resolve maps a requested model id, alias, or name matching one of the
// AliasGlobs to the served id. ok is false for an unknown id.
func (m *Model) Resolve(id string) (string, bool) {
	if names(m.ID, m.Aliases, id) || globbed(m.ID, m.Aliases, m.AliasGlobs, id) {
		return m.ID, true
	}
	return "", false
}

// ModelNotFound is the OpenAI error for an unknown model id.
func ModelNotFound(id, param string) *APIError {
	return &APIError{Status: http.StatusNotFound, Type: TypeInvalidRequest, Code: "model_not_found", Param: param,
		Message: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", id)}
}

// listModels is GET /v1/models: every served id, loaded or not (aliases are
// accepted in requests but not listed).
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) error {
	c, err := s.catalogOrLoading()
	if err != nil {
		return err
	}
	data := []modelObject{}
	for _, st := range c.Models() {
		data = append(data, stateObject(st, st.ID))
	}
	data = append(data, s.upstreamObjects()...)
	if apiOf(r) == anthropicAPI {
		return writeAnthropicModels(w, r, data)
	}
	writeJSON(w, http.StatusOK, struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}{"list", data})
	return nil
}

// getModel is GET /v1/models/{id}; an alias answers with the object under
// the id it was asked for.
func (s *Server) getModel(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.catalogOrLoading(); err != nil {
		return err
	}
	id := chi.URLParam(r, "id")
	var o modelObject
	if u := s.upstreamFor(id); u != nil {
		o = upstreamObject(id)
	} else if st, ok := s.Resolve(id); ok {
		o = stateObject(st, id)
	} else {
		return apiOf(r).notFound(id, s.servedIDs())
	}
	if apiOf(r) == anthropicAPI {
		writeJSON(w, http.StatusOK, anthropicModel(o))
		return nil
	}
	writeJSON(w, http.StatusOK, o)
	return nil
}

// anthropicModelObject is Anthropic's model object.
type anthropicModelObject struct {
	Type        string `json:"type"` // "model"
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"` // RFC 3339
}

func anthropicModel(o modelObject) anthropicModelObject {
	return anthropicModelObject{Type: "model", ID: o.ID, DisplayName: o.ID,
		CreatedAt: time.Unix(o.Created, 0).UTC().Format(time.RFC3339)}
}

// writeAnthropicModels writes Anthropic's model list: a page of at most
// limit (1–1000, default 20) objects after after_id or before before_id.
func writeAnthropicModels(w http.ResponseWriter, r *http.Request, all []modelObject) error {
	q := r.URL.Query()
	limit, err := queryLimit(q, 1000)
	if err != nil {
		return err
	}
	at := func(param string) (int, error) {
		i := slices.IndexFunc(all, func(o modelObject) bool { return o.ID == q.Get(param) })
		if i < 0 {
			return 0, invalid(param, "%s: no model with id %q", param, q.Get(param))
		}
		return i, nil
	}
	lo, hi := 0, len(all)
	switch {
	case q.Get("after_id") != "" && q.Get("before_id") != "":
		return invalid("before_id", "before_id and after_id cannot both be set")
	case q.Get("after_id") != "":
		i, err := at("after_id")
		if err != nil {
			return err
		}
		lo = i + 1
		hi = min(hi, lo+limit)
	case q.Get("before_id") != "":
		i, err := at("before_id")
		if err != nil {
			return err
		}
		hi = i
		lo = max(0, hi-limit)
	default:
		hi = min(hi, limit)
	}
	page := struct {
		Data    []anthropicModelObject `json:"data"`
		HasMore bool                   `json:"has_more"`
		FirstID *string                `json:"first_id"`
		LastID  *string                `json:"last_id"`
	}{Data: []anthropicModelObject{}}
	for _, o := range all[lo:hi] {
		page.Data = append(page.Data, anthropicModel(o))
	}
	if n := len(page.Data); n > 0 {
		page.FirstID, page.LastID = &page.Data[0].ID, &page.Data[n-1].ID
	}
	if q.Get("before_id") != "" {
		page.HasMore = lo > 0
	} else {
		page.HasMore = hi < len(all)
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
