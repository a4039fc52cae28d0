package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestKVStoreAcrossConversationsAndRestart: two conversations take turns
// through the API; each turn's cached_tokens covers its own history
// although the other evicted it from the NPU's cache (max_sequences 1: the
// engine keeps one finished sequence's rows in the pool). After a restart
// the entries saved at shutdown are found in engine.kv_cache.dir.
func TestKVStoreAcrossConversationsAndRestart(t *testing.T) {
	libs := hostsimLibs(t)
	dir := filepath.Join(t.TempDir(), "kv")
	cfg := config{Bundle: bundle(t), Extra: fmt.Sprintf("engine:\n  max_sequences: 1\n  kv_cache:\n    memory: 16MiB\n    dir: %q\n    disk: 64MiB\n", dir)}.write(t, libs)

	prompt := func(base, n int) []int {
		p := make([]int, n)
		for i := range p {
			p[i] = base + i
		}
		return p
	}
	complete := func(s *hexserve, p []int, key string) int {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"model": "tinyllama-public", "prompt": p, "max_tokens": 2, "temperature": 0, "prompt_cache_key": key})
		rep := s.post(t, "/v1/completions", string(body))
		if rep.Status != 200 {
			t.Fatalf("completion: %d %s", rep.Status, rep.Body)
		}
		var r struct {
			Usage struct {
				Details struct {
					Cached int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(rep.Body), &r); err != nil {
			t.Fatal(err)
		}
		return r.Usage.Details.Cached
	}
	a, b := prompt(1000, 150), prompt(5000, 140) // both past one prefill window: shorter prompts always re-prefill from row 0 (seeded reproducibility)

	s := serve(t, cfg, true)
	complete(s, a, "a")
	complete(s, b, "b")
	if got := complete(s, append(a, 7, 8, 9), "a"); got != len(a) {
		t.Errorf("conversation a, turn 2: cached_tokens %d, want %d", got, len(a))
	}
	if got := complete(s, append(b, 7, 8, 9), "b"); got != len(b) {
		t.Errorf("conversation b, turn 2: cached_tokens %d, want %d", got, len(b))
	}
	if h := s.health(t); !strings.Contains(h.Body, `"kv_cache":{"entries":2,`) {
		t.Errorf("/health: %s", h.Body)
	}
	if m := s.metrics(t); !regexp.MustCompile(`(?m)^hexserve_kv_store_hits_total{model="[^"]+"} 2$`).MatchString(m) ||
		!regexp.MustCompile(`(?m)^hexserve_kv_store_restored_tokens_total{model="[^"]+"} 290$`).MatchString(m) {
		t.Errorf("metrics lack the store's hits and restored tokens:\n%s", grepLines(m, "hexserve_kv_store"))
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*.kv")); len(files) != 2 {
		t.Fatalf("%d files in %s after shutdown, want 2", len(files), dir)
	}

	s = serve(t, cfg, true)
	if h := s.health(t); !strings.Contains(h.Body, `"disk_entries":2,`) {
		t.Errorf("/health after the restart: %s", h.Body)
	}
	if got := complete(s, append(b, 7, 8, 9, 10), "b"); got < len(b)+3 {
		t.Errorf("after the restart: cached_tokens %d, want >= %d", got, len(b)+3)
	}
	// A file of another model is dropped with a log line, not restored.
	os.WriteFile(filepath.Join(dir, "0123456789abcdef0123456789abcdef.kv"), []byte("HXKVSNP1\x02\x00\x00\x00{}"), 0o600)
	s.stop()
	s = serve(t, cfg, true)
	if !strings.Contains(s.log.String(), "kvstore: dropping a saved entry") {
		t.Errorf("no log line for the bad file:\n%s", s.log)
	}
	if _, err := os.Stat(filepath.Join(dir, "0123456789abcdef0123456789abcdef.kv")); err == nil {
		t.Error("the bad file was kept")
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
