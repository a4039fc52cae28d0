package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/inferencetest"
)

// fakeCatalog serves scripted models; a model "loads" on its first Acquire
// (reported as a 1.5 s load) and one can be made to fail.
type fakeCatalog struct {
	mu       sync.Mutex
	models   map[string]*Model
	order    []string
	loaded   map[string]bool
	fail     map[string]error
	releases []string // "id keep_alive" per release
}

func (c *fakeCatalog) Acquire(_ context.Context, id string) (*Lease, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fail[id]; err != nil {
		return nil, err
	}
	var took time.Duration
	if !c.loaded[id] {
		c.loaded[id], took = true, 1500*time.Millisecond
	}
	return &Lease{Model: c.models[id], Loaded: took, Release: func(ka *time.Duration) {
		c.mu.Lock()
		defer c.mu.Unlock()
		s := id + " default"
		if ka != nil {
			s = id + " " + ka.String()
			if *ka == 0 {
				c.loaded[id] = false
			}
		}
		c.releases = append(c.releases, s)
	}}, nil
}

func (c *fakeCatalog) Models() []ModelState {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []ModelState
	for _, id := range c.order {
		m := c.models[id]
		st := ModelState{ID: id, Aliases: m.Aliases, Status: StatusUnloaded, Details: ModelDetails{Format: "pte"}}
		switch {
		case c.fail[id] != nil:
			st.Status, st.Err = StatusFailed, c.fail[id]
		case c.loaded[id]:
			st.Status, st.Model, st.ContextLen = StatusLoaded, m, m.ContextLen
		}
		out = append(out, st)
	}
	return out
}

func newCatalogServer(t *testing.T) (*httptest.Server, *fakeCatalog) {
	tok := testTokenizer(t)
	c := &fakeCatalog{models: map[string]*Model{}, loaded: map[string]bool{}, fail: map[string]error{}}
	for _, m := range []struct {
		id, alias, answer string
		ctx               int
	}{{"alpha", "a", "Hello there", 512}, {"beta", "b", "Bye now", 256}, {"broken", "", "", 512}} {
		fm := inferencetest.NewScripted(inference.ModelInfo{VocabSize: tok.VocabSize(), ContextLen: m.ctx,
			BOS: 128000, EOS: []int32{eot}}, tok.Encode(m.answer, false, false))
		eng := inference.New(fm, tok, inference.Config{})
		t.Cleanup(func() { eng.Close() })
		var aliases []string
		if m.alias != "" {
			aliases = []string{m.alias}
		}
		c.models[m.id] = &Model{ID: m.id, Aliases: aliases, ContextLen: m.ctx, Tokenizer: tok, Engine: eng, Health: eng.Healthy}
		c.order = append(c.order, m.id)
	}
	c.fail["broken"] = errors.New("model broken: /m/broken.pte: not an ExecuTorch program")
	s := New(Options{Logger: zerolog.Nop(), MaxTokens: 8})
	s.SetCatalog(c)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, c
}

func TestCatalog(t *testing.T) {
	srv, c := newCatalogServer(t)
	decode := func(path string, resp *http.Response, err error) map[string]any {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return v
	}
	post := func(path, body string) (*http.Response, map[string]any) {
		t.Helper()
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		v := decode(path, resp, err)
		return resp, v
	}
	get := func(path string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		v := decode(path, resp, err)
		return resp.StatusCode, v
	}
	chat := func(model string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"stream":false}`
	}

	// /v1/models lists all three, none loaded yet.
	_, list := get("/v1/models")
	data, _ := list["data"].([]any)
	if len(data) != 3 || data[0].(map[string]any)["loaded"] != false || data[2].(map[string]any)["status"] != StatusFailed {
		t.Fatalf("/v1/models = %v", list)
	}

	tests := []struct {
		name, path, body string
		status           int
		content          string // the answer's text
		loadHeader       bool
		errText          string // in the error body
	}{
		{"alpha loads on demand", "/v1/chat/completions", chat("alpha"), 200, "Hello there", true, ""},
		{"alpha again", "/v1/chat/completions", chat("alpha"), 200, "Hello there", false, ""},
		{"beta by alias", "/v1/chat/completions", chat("b"), 200, "Bye now", true, ""},
		{"alpha after beta", "/v1/completions", `{"model":"a","prompt":"x","stream":false}`, 200, "Hello there", false, ""},
		{"unknown: OpenAI 404", "/v1/chat/completions", chat("gpt-5"), 404, "", false, "The model `gpt-5` does not exist"},
		{"failing model", "/v1/chat/completions", chat("broken"), 503, "", false, "The model `broken` could not be loaded: model broken: /m/broken.pte: not an ExecuTorch program"},
		{"Ollama chat on beta:latest", "/api/chat", `{"model":"beta:latest","messages":[{"role":"user","content":"hi"}],"stream":false}`, 200, "Bye now", false, ""},
		{"Ollama unknown: its 404", "/api/chat", `{"model":"nope","messages":[{"role":"user","content":"hi"}],"stream":false}`, 404, "", false, `model \"nope\" not found`},
		{"Ollama generate with keep_alive 0", "/api/generate", `{"model":"alpha","prompt":"hi","stream":false,"keep_alive":0}`, 200, "Hello there", false, ""},
		{"tokenize names its model", "/tokenize", `{"model":"beta","content":"hi"}`, 200, "", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, v := post(tt.path, tt.body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %v", resp.StatusCode, tt.status, v)
			}
			if got := resp.Header.Get(HeaderLoadTime) != ""; got != tt.loadHeader {
				t.Errorf("load-time header %q, want set=%v", resp.Header.Get(HeaderLoadTime), tt.loadHeader)
			}
			raw, _ := json.Marshal(v)
			if tt.content != "" && !strings.Contains(string(raw), tt.content) {
				t.Errorf("body %s lacks %q", raw, tt.content)
			}
			if tt.errText != "" && !strings.Contains(string(raw), tt.errText) {
				t.Errorf("body %s lacks %q", raw, tt.errText)
			}
			if strings.HasPrefix(tt.path, "/api/") && tt.status != 200 {
				if _, ok := v["error"].(string); !ok {
					t.Errorf("Ollama error shape: %s", raw)
				}
			}
		})
	}

	// keep_alive 0 released alpha with 0 (the catalog unloads it); the rest with the default.
	c.mu.Lock()
	rel := strings.Join(c.releases, ",")
	c.mu.Unlock()
	if want := "alpha default,alpha default,beta default,alpha default,beta default,alpha 0s,beta default"; rel != want {
		t.Errorf("releases = %s, want %s", rel, want)
	}
	// An unload request for a model that is not loaded does not load it.
	if resp, v := post("/api/generate", `{"model":"alpha","keep_alive":0}`); resp.StatusCode != 200 || v["done_reason"] != "unload" {
		t.Errorf("unload of an unloaded model: %d %v", resp.StatusCode, v)
	}
	if c.loaded["alpha"] {
		t.Error("the unload request loaded alpha")
	}

	// /health: ok, each model's state; the failed one does not fail it.
	code, h := get("/health")
	models, _ := h["models"].(map[string]any)
	if code != 200 || h["status"] != "ok" || models["beta"].(map[string]any)["status"] != StatusLoaded ||
		models["alpha"].(map[string]any)["status"] != StatusUnloaded || models["broken"].(map[string]any)["status"] != StatusFailed {
		t.Errorf("/health = %d %v", code, h)
	}
	// /api/ps lists the loaded model, /api/tags all of them.
	_, ps := get("/api/ps")
	_, tags := get("/api/tags")
	if p, _ := ps["models"].([]any); len(p) != 1 || p[0].(map[string]any)["name"] != "beta" {
		t.Errorf("/api/ps = %v", ps)
	}
	if l, _ := tags["models"].([]any); len(l) != 3 {
		t.Errorf("/api/tags = %v", tags)
	}
	// GET /v1/models/{alias} answers under the alias with the model's state.
	if code, m := get("/v1/models/b"); code != 200 || m["id"] != "b" || m["loaded"] != true || m["max_model_len"] != 256.0 {
		t.Errorf("/v1/models/b = %d %v", code, m)
	}
}
