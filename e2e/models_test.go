package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// Several models side by side (config models:): the tiny QHexRT bundle and tiny .pte files in
// one server, loaded on demand, unloaded by keep_alive and by server.max_loaded_models.

// modelsConfig writes a config serving the YAML list entries through hostsim, with extra
// server: keys (indented by two spaces) and extra top-level YAML.
func modelsConfig(t testing.TB, entries []string, server, extra string) string {
	t.Helper()
	libs := hostsimLibs(t)
	y := fmt.Sprintf(`server:
  listen: 127.0.0.1:0
%s
model:
  libraries:
    backend: %q
    system: %q
    rpcmem: %q
models:
%s
chat:
  date: 26 Jul 2024
log:
  level: info
  format: json
%s
`, server, filepath.Join(libs, "libQnnHtp.so"), filepath.Join(libs, "libQnnSystem.so"), filepath.Join(libs, "libcdsprpc.so"),
		"  - "+strings.Join(entries, "\n  - "), extra)
	p := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// greedy asks model for the greedy continuation of c and returns the ids and the reply.
func (s *hexserve) greedy(t *testing.T, model string, c goldenCase) ([]int64, reply) {
	t.Helper()
	got, r := s.complete(t, model, c.PromptIDs, len(goldenWant(c)))
	served := map[string]string{"fast": "tiny-1b", "chat": "tiny-3b"}[model]
	if served == "" {
		served = model
	}
	if got.Model != served {
		t.Fatalf("completion on %s served by %s: %s", model, got.Model, r.Body)
	}
	return got.Choices[0].TokenIDs, r
}

// states is /v1/models as id → status.
func (s *hexserve) states(t *testing.T) map[string]string {
	t.Helper()
	var list struct {
		Data []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Loaded bool   `json:"loaded"`
		} `json:"data"`
	}
	r := s.do(t, "GET", "/v1/models", "")
	if r.Status != 200 || json.Unmarshal([]byte(r.Body), &list) != nil {
		t.Fatalf("/v1/models: %d %s", r.Status, r.Body)
	}
	out := map[string]string{}
	for _, d := range list.Data {
		out[d.ID] = d.Status
		if d.Loaded != (d.Status == "loaded") {
			t.Errorf("%s: loaded %v with status %s", d.ID, d.Loaded, d.Status)
		}
	}
	return out
}

// checkProbedContext checks /v1/models' max_model_len, /api/show's llama.context_length and
// /api/tags' context_length of each model in want (broken stays without one).
func checkProbedContext(t *testing.T, s *hexserve, want map[string]int) {
	t.Helper()
	var list struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen *int   `json:"max_model_len"`
		} `json:"data"`
	}
	if r := s.do(t, "GET", "/v1/models", ""); r.Status != 200 || json.Unmarshal([]byte(r.Body), &list) != nil {
		t.Fatalf("/v1/models: %d %s", r.Status, r.Body)
	}
	got := map[string]int{}
	for _, d := range list.Data {
		if d.MaxModelLen != nil {
			got[d.ID] = *d.MaxModelLen
		}
	}
	var tags struct {
		Models []struct {
			Name    string `json:"name"`
			Details struct {
				ContextLength int `json:"context_length"`
			} `json:"details"`
		} `json:"models"`
	}
	if r := s.do(t, "GET", "/api/tags", ""); r.Status != 200 || json.Unmarshal([]byte(r.Body), &tags) != nil {
		t.Fatalf("/api/tags: %d %s", r.Status, r.Body)
	}
	tagged := map[string]int{}
	for _, m := range tags.Models {
		tagged[m.Name] = m.Details.ContextLength
	}
	for id, n := range want {
		if got[id] != n {
			t.Errorf("/v1/models: %s max_model_len %d, want %d", id, got[id], n)
		}
		if tagged[id] != n {
			t.Errorf("/api/tags: %s context_length %d, want %d", id, tagged[id], n)
		}
		var show struct {
			ModelInfo map[string]any `json:"model_info"`
		}
		r := s.post(t, "/api/show", fmt.Sprintf(`{"model":%q}`, id))
		if r.Status != 200 || json.Unmarshal([]byte(r.Body), &show) != nil || show.ModelInfo["llama.context_length"] != float64(n) {
			t.Errorf("/api/show %s: want llama.context_length %d: %d %s", id, n, r.Status, r.Body)
		}
	}
	if _, ok := got["broken"]; ok {
		t.Errorf("/v1/models: broken has max_model_len %d; its files say nothing", got["broken"])
	}
}

func TestModelsSideBySide(t *testing.T) {
	pte := mkpte(t, "--kv", "f32", "--logits", "f32", "--ctx", "512")
	pte2 := mkpte(t, "--kv", "f32", "--logits", "f32", "--ctx", "256", "--prefill-chunk", "32")
	broken := filepath.Join(t.TempDir(), "broken.bin")
	if err := os.WriteFile(broken, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := modelsConfig(t, []string{
		fmt.Sprintf("{path: %q, id: tiny-1b, aliases: [fast], preload: true}", bundle(t)),
		fmt.Sprintf("{path: %q, id: tiny-3b, aliases: [chat]}", pte),
		fmt.Sprintf("{path: %q, id: tiny-3b-256}", pte2),
		fmt.Sprintf("{path: %q, id: broken}", broken),
	}, "  max_loaded_models: 2", "")
	s := serve(t, cfg, true)
	cases := goldenCases(t)
	short := cases[0]

	if got := s.states(t); got["tiny-1b"] != "loaded" || got["tiny-3b"] != "unloaded" || got["broken"] != "unloaded" || len(got) != 4 {
		t.Fatalf("after start: %v", got)
	}
	// Unloaded models' context lengths come from their files, probed at start (mkpte --ctx N
	// is the mask's N columns: N − 1 tokens, as the loaded runner reports).
	checkProbedContext(t, s, map[string]int{"tiny-1b": 512, "tiny-3b": 511, "tiny-3b-256": 255})
	// Each model returns the golden greedy tokens; the first request to an unloaded one loads it
	// and says how long that took.
	for i, m := range []string{"tiny-1b", "tiny-3b", "fast", "chat", "tiny-1b", "tiny-3b"} {
		c := cases[i%2]
		got, r := s.greedy(t, m, c)
		if want := goldenWant(c); !slices.Equal(got, want) {
			t.Errorf("request %d on %s (%s): got %v, want %v", i, m, c.Name, got, want)
		}
		if loadHdr := r.Header.Get("X-Hexserve-Model-Load-Time"); (loadHdr != "") != (i == 1) {
			t.Errorf("request %d on %s: load-time header %q", i, m, loadHdr)
		}
	}
	// A third model over max_loaded_models 2 unloads the least recently used (tiny-1b).
	if got, _ := s.greedy(t, "tiny-3b-256", short); !slices.Equal(got, goldenWant(short)) {
		t.Errorf("tiny-3b-256: got %v", got)
	}
	if got := s.states(t); got["tiny-1b"] != "unloaded" || got["tiny-3b"] != "loaded" || got["tiny-3b-256"] != "loaded" {
		t.Fatalf("after a third model: %v", got)
	}
	// A request to the unloaded one loads it again (and tiny-3b, now least recently used, goes).
	got, r := s.greedy(t, "tiny-1b", short)
	if !slices.Equal(got, goldenWant(short)) || r.Header.Get("X-Hexserve-Model-Load-Time") == "" {
		t.Errorf("tiny-1b reloaded: %v, header %q", got, r.Header.Get("X-Hexserve-Model-Load-Time"))
	}
	if got := s.states(t); got["tiny-1b"] != "loaded" || got["tiny-3b"] != "unloaded" {
		t.Fatalf("after reloading tiny-1b: %v", got)
	}
	// keep_alive 0 on the Ollama API unloads after the request.
	r = s.post(t, "/api/generate", `{"model":"tiny-3b-256","prompt":"Hi","stream":false,"keep_alive":0,"options":{"num_predict":2}}`)
	if r.Status != 200 {
		t.Fatalf("/api/generate keep_alive 0: %d %s", r.Status, r.Body)
	}
	waitState(t, s, "tiny-3b-256", "unloaded")
	if ps := s.do(t, "GET", "/api/ps", ""); strings.Contains(ps.Body, "tiny-3b-256") || !strings.Contains(ps.Body, `"name":"tiny-1b"`) {
		t.Errorf("/api/ps after keep_alive 0: %s", ps.Body)
	}
	// A model that fails to load: a clear error, and the others keep serving.
	r = s.post(t, "/v1/chat/completions", `{"model":"broken","messages":[{"role":"user","content":"hi"}]}`)
	if r.Status != 503 || !strings.Contains(r.Body, "The model `broken` could not be loaded") || !strings.Contains(r.Body, broken) {
		t.Errorf("broken model: %d %s", r.Status, r.Body)
	}
	if r := s.post(t, "/api/chat", `{"model":"broken","messages":[{"role":"user","content":"hi"}]}`); r.Status != 503 || !strings.HasPrefix(r.Body, `{"error":"The model`) {
		t.Errorf("broken model on the Ollama API: %d %s", r.Status, r.Body)
	}
	if got, _ := s.greedy(t, "tiny-1b", short); !slices.Equal(got, goldenWant(short)) {
		t.Errorf("tiny-1b after the failed load: %v", got)
	}
	h := s.health(t)
	var health struct {
		Status string
		Models map[string]struct{ Status, Error string }
	}
	if json.Unmarshal([]byte(h.Body), &health) != nil || h.Status != 200 || health.Status != "ok" ||
		health.Models["tiny-1b"].Status != "loaded" || health.Models["broken"].Status != "failed" ||
		!strings.Contains(health.Models["broken"].Error, "broken.bin failed to load") {
		t.Errorf("/health: %d %s", h.Status, h.Body)
	}
	// Unknown ids: each API's 404, naming the served ids.
	const served = "serves tiny-1b, tiny-3b, tiny-3b-256, broken; server.model_aliases maps other names to them"
	if r := s.post(t, "/v1/completions", `{"model":"gpt-5","prompt":"x"}`); r.Status != 404 || !strings.Contains(r.Body, `"code":"model_not_found"`) ||
		!strings.Contains(r.Body, served) {
		t.Errorf("unknown (OpenAI): %d %s", r.Status, r.Body)
	}
	if r := s.post(t, "/api/generate", `{"model":"gpt-5","prompt":"x"}`); r.Status != 404 ||
		r.Body != `{"error":"model \"gpt-5\" not found; this server `+served+`"}`+"\n" {
		t.Errorf("unknown (Ollama): %d %q", r.Status, r.Body)
	}
	// Per-model metrics.
	m := s.metrics(t)
	for _, re := range []string{
		`(?m)^hexserve_requests_total\{model="tiny-1b",outcome="length"\} [1-9]`,
		`(?m)^hexserve_model_load_seconds_count\{model="tiny-3b",outcome="ok"\} 1$`,
		`(?m)^hexserve_model_load_seconds_count\{model="broken",outcome="error"\} 2$`,
		`(?m)^hexserve_model_unloads_total\{model="tiny-1b",reason="evicted"\} 1$`,
		`(?m)^hexserve_model_unloads_total\{model="tiny-3b-256",reason="idle"\} 1$`,
		`(?m)^hexserve_model_load_wait_seconds_count\{model="tiny-1b"\} 1$`,
	} {
		if !regexp.MustCompile(re).MatchString(m) {
			t.Errorf("metrics lack %s:\n%s", re, grepLines(m, "hexserve_model"))
		}
	}
}

// TestModelTooLarge: a model that cannot fit engine.model_memory even alone fails with a clear
// error; a smaller one serves.
func TestModelTooLarge(t *testing.T) {
	cfg := modelsConfig(t, []string{
		fmt.Sprintf("{path: %q, id: big}", mkpte(t, "--kv", "f32", "--logits", "f32", "--ctx", "512")),
		fmt.Sprintf("{path: %q, id: small}", bundle(t)),
	}, "", "engine:\n  model_memory: 60MiB\n  kv_cache:\n    memory: 0\n")
	s := serve(t, cfg, true)
	r := s.post(t, "/v1/completions", `{"model":"big","prompt":"x","max_tokens":1}`)
	if r.Status != 503 || !strings.Contains(r.Body, "more than the budget of 62914560 (engine.model_memory)") {
		t.Errorf("big: %d %s", r.Status, r.Body)
	}
	if got, _ := s.greedy(t, "small", goldenCases(t)[0]); !slices.Equal(got, goldenWant(goldenCases(t)[0])) {
		t.Errorf("small: %v", got)
	}
}

// waitState polls /v1/models until model has status (unloads finish in the background).
func waitState(t *testing.T, s *hexserve, model, status string) {
	t.Helper()
	for range 200 {
		if s.states(t)[model] == status {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("%s never became %s: %v", model, status, s.states(t))
}
