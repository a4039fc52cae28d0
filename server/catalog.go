package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Catalog is the set of models the server serves, loaded on demand
// (cmd/server's registry implements it). SetModel serves one fixed model
// instead.
type Catalog interface {
	// Acquire holds model id (a served id, not an alias) for one request,
	// loading it first when needed.
	Acquire(ctx context.Context, id string) (*Lease, error)
	// Models describes every model in configuration order.
	Models() []ModelState
}

// Lease is a model held for one request.
type Lease struct {
	Model *Model
	// Loaded is how long the request waited for the model to load; 0: it
	// was loaded.
	Loaded time.Duration
	// Release ends the request; keepAlive, when not nil, is how long the
	// model stays loaded from now (the Ollama API's keep_alive).
	Release func(keepAlive *time.Duration)
}

// ModelState describes a model, loaded or not.
type ModelState struct {
	ID      string
	Aliases []string
	// AliasGlobs are server.model_aliases (patterns → a served id or
	// alias); a pattern names this model when its target does.
	AliasGlobs map[string]string
	Status     string // StatusLoaded, StatusLoading, StatusUnloaded or StatusFailed
	Err        error  // why the last load failed (StatusFailed)
	// Model is the loaded model (nil unless StatusLoaded).
	Model *Model
	// ContextLen is the context length in tokens: probed from the files
	// before the first load, the engine's once loaded (0: unknown).
	ContextLen int
	// Details describe the model's files.
	Details ModelDetails
	// Preload marks a model loaded at start: /health is "loading" until its
	// first load ends.
	Preload bool
	// ExpiresAt is when an idle loaded model will be unloaded; zero: not
	// scheduled.
	ExpiresAt time.Time
}

// The model states.
const (
	StatusLoaded   = "loaded"
	StatusLoading  = "loading"
	StatusUnloaded = "unloaded"
	StatusFailed   = "failed"
)

// SetCatalog serves the models of c.
func (s *Server) SetCatalog(c Catalog) { s.catalog.Store(&c) }

// fixed is the catalog of one model that is always loaded (SetModel).
type fixed struct{ m *Model }

func (f fixed) Acquire(context.Context, string) (*Lease, error) {
	return &Lease{Model: f.m, Release: func(*time.Duration) {}}, nil
}

func (f fixed) Models() []ModelState {
	m := f.m
	return []ModelState{{ID: m.ID, Aliases: m.Aliases, AliasGlobs: m.AliasGlobs, Status: StatusLoaded, Model: m, ContextLen: m.ContextLen, Details: m.Details}}
}

// catalogOrLoading returns the catalog, or errLoading before one is set.
func (s *Server) catalogOrLoading() (Catalog, error) {
	if c := s.catalog.Load(); c != nil {
		return *c, nil
	}
	return nil, errLoading
}

// names reports whether name is id or one of its exact aliases.
func names(id string, aliases []string, name string) bool {
	return name == id || slices.Contains(aliases, name)
}

// globbed reports whether name matches a pattern of globs whose target is
// id or one of its aliases (server.model_aliases).
func globbed(id string, aliases []string, globs map[string]string, name string) bool {
	for pat, target := range globs {
		if ok, _ := path.Match(pat, name); ok && names(id, aliases, target) {
			return true
		}
	}
	return false
}

// Resolve maps a requested model name to the state of the model it names:
// a served id or alias of one, else a name matching a server.model_aliases
// pattern whose target names one. It is the one place names are resolved
// ((*Model).Resolve applies the same rules to one model).
func (s *Server) Resolve(name string) (ModelState, bool) {
	c, err := s.catalogOrLoading()
	if err != nil {
		return ModelState{}, false
	}
	states := c.Models()
	for _, st := range states {
		if names(st.ID, st.Aliases, name) {
			return st, true
		}
	}
	for _, st := range states {
		if globbed(st.ID, st.Aliases, st.AliasGlobs, name) {
			return st, true
		}
	}
	return ModelState{}, false
}

// HeaderLoadTime carries the seconds a request waited for its model to load.
const HeaderLoadTime = "X-Hexserve-Model-Load-Time"

// hold holds model id (a served id, resolved by resolveFor) for r,
// loading it first when needed. The caller must call the lease's Release.
func (s *Server) hold(w http.ResponseWriter, r *http.Request, id string) (*Lease, error) {
	c, err := s.catalogOrLoading()
	if err != nil {
		return nil, err
	}
	l, err := c.Acquire(r.Context(), id)
	if err != nil {
		if ctxErr := r.Context().Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, loadFailed(id, err)
	}
	if l.Loaded > 0 {
		w.Header().Set(HeaderLoadTime, strconv.FormatFloat(l.Loaded.Seconds(), 'f', 3, 64))
		s.metrics.modelWait.WithLabelValues(id).Observe(l.Loaded.Seconds())
	}
	return l, nil
}

// loadFailed is the error for a model that could not be loaded: a 503 that
// says why (the other models keep serving).
func loadFailed(id string, err error) error {
	var api *APIError
	if errors.As(err, &api) {
		return api
	}
	msg := err.Error()
	if !strings.Contains(msg, id) {
		msg = fmt.Sprintf("model %s: %s", id, msg)
	}
	return &APIError{Status: http.StatusServiceUnavailable, Type: TypeServer, Code: "model_load_failed", Param: "model",
		Message: fmt.Sprintf("The model `%s` could not be loaded: %s", id, msg)}
}
