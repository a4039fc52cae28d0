package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Qualcomm AI Hub Genie bundles of the public tiny model (mkmodel --format genie) served through
// the real binary: detection of a folder holding genie_config.json, the runner behind the engine.

// mkgenie writes (once per flag set) a tiny Genie bundle with float16 weights and returns its folder.
func mkgenie(t testing.TB, flags ...string) string {
	t.Helper()
	hostsimLibs(t)
	return mkmodelOnce(t, append([]string{"--preset", "tiny", "--format", "genie", "--weights", "f16", "--name", "tiny",
		"--ctx", "1024"}, flags...)...)
}

// serveGenie serves a Genie bundle folder through model.path.
func serveGenie(t *testing.T, dir string) *hexserve {
	t.Helper()
	cfg := config{Model: fmt.Sprintf("  path: %q\n  aliases: [x]", dir)}.write(t, hostsimLibs(t))
	s := serve(t, cfg, true)
	s.Model = "x"
	return s
}

// TestGenieGolden: the f32 precision's greedy output equals the golden cases with 3 parts (the
// embedding, one layer, the other layer and the head), 4 parts (the head alone) and AR 32.
func TestGenieGolden(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"parts3", []string{"--precision", "f32", "--parts", "3", "--prefill-chunk", "16"}},
		{"parts4", []string{"--precision", "f32", "--parts", "4", "--prefill-chunk", "16"}},
		{"ar32", []string{"--precision", "f32", "--prefill-chunk", "32"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := serveGenie(t, mkgenie(t, tc.flags...))
			checkGolden(t, s)
		})
	}
}

// TestGenieAPIs: a w4a16 Genie bundle beside a .pte in one server (models:), through the OpenAI,
// Anthropic and Ollama endpoints; its context is probed from genie_config before it loads; a bad
// bundle fails with an error naming its file and field, and the others keep serving.
func TestGenieAPIs(t *testing.T) {
	g := mkgenie(t, "--prefill-chunk", "32")
	pte := mkpte(t, "--kv", "f32", "--logits", "f32", "--ctx", "512")
	bad := t.TempDir()
	for _, name := range []string{"genie_config.json", "tokenizer.json", "config.json", "htp_backend_ext_config.json",
		"tiny_part_1_of_3.bin", "tiny_part_2_of_3.bin", "tiny_part_3_of_3.bin"} {
		b, err := os.ReadFile(filepath.Join(g, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "genie_config.json" {
			b = []byte(strings.Replace(string(b), `"type": "basic"`, `"type": "ssd"`, 1))
		}
		if err := os.WriteFile(filepath.Join(bad, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := modelsConfig(t, []string{
		fmt.Sprintf("{path: %q, id: genie}", g),
		fmt.Sprintf("{path: %q, id: pte, preload: true}", pte),
		fmt.Sprintf("{path: %q, id: bad-genie}", bad),
	}, "", "")
	s := serve(t, cfg, true)
	checkProbedContext(t, s, map[string]int{"genie": 1023, "pte": 511})
	chat := s.post(t, "/v1/chat/completions", `{"model":"genie","messages":[{"role":"user","content":"Say hello"}],"max_tokens":8}`)
	if chat.Status != 200 || !strings.Contains(chat.Body, `"completion_tokens":8`) {
		t.Errorf("OpenAI chat: %d %s", chat.Status, chat.Body)
	}
	msg := s.do(t, "POST", "/v1/messages", `{"model":"genie","max_tokens":6,"messages":[{"role":"user","content":"Say hello"}]}`,
		"Content-Type", "application/json", "anthropic-version", "2023-06-01")
	if msg.Status != 200 || !strings.Contains(msg.Body, `"output_tokens":6`) {
		t.Errorf("Anthropic messages: %d %s", msg.Status, msg.Body)
	}
	ol := s.post(t, "/api/chat", `{"model":"genie","stream":false,"messages":[{"role":"user","content":"Say hello"}],"options":{"num_predict":5}}`)
	if ol.Status != 200 || !strings.Contains(ol.Body, `"eval_count":5`) {
		t.Errorf("Ollama chat: %d %s", ol.Status, ol.Body)
	}
	if show := s.post(t, "/api/show", `{"model":"genie"}`); show.Status != 200 || !strings.Contains(show.Body, `"format":"genie"`) {
		t.Errorf("/api/show: %d %s", show.Status, show.Body)
	}
	// dialog.sampler (temp 0.8, top-k 40, top-p 0.95, seed 42) are the bundle's defaults, shown by
	// /api/show; the .pte keeps the server's (TestGenieSamplerDefaults checks that they apply).
	if show := s.post(t, "/api/show", `{"model":"genie"}`); !strings.Contains(show.Body, `temperature 0.8`) || !strings.Contains(show.Body, `top_k 40`) {
		t.Errorf("/api/show of the Genie bundle lacks dialog.sampler's defaults: %s", show.Body)
	}
	if show := s.post(t, "/api/show", `{"model":"pte"}`); strings.Contains(show.Body, `temperature 0.8`) {
		t.Errorf("/api/show of the .pte shows the Genie bundle's defaults: %s", show.Body)
	}
	short := goldenCases(t)[0]
	if got, _ := s.greedy(t, "pte", short); !slices.Equal(got, goldenWant(short)) {
		t.Errorf("the .pte beside the Genie bundle: %v", got)
	}
	r := s.post(t, "/v1/chat/completions", `{"model":"bad-genie","messages":[{"role":"user","content":"hi"}]}`)
	if r.Status != 503 || !strings.Contains(r.Body, "dialog.type") || !strings.Contains(r.Body, "genie_config.json") || !strings.Contains(r.Body, "ssd") {
		t.Errorf("bad bundle: %d %s", r.Status, r.Body)
	}
	if chat := s.post(t, "/v1/chat/completions", `{"model":"genie","messages":[{"role":"user","content":"Again"}],"max_tokens":4}`); chat.Status != 200 {
		t.Errorf("genie after the bad bundle: %d %s", chat.Status, chat.Body)
	}
}

// TestGenieSamplerDefaults: dialog.sampler's values apply to a request that sets none: its seed
// 42 repeats a sampled text (on the float32 bundle, where a reused prompt row is bit-identical),
// a request's own seed or temperature 0 overrides them.
func TestGenieSamplerDefaults(t *testing.T) {
	s := serveGenie(t, mkgenie(t, "--precision", "f32", "--prefill-chunk", "32"))
	sampled := func(extra string) string {
		r := s.post(t, "/v1/completions", `{"model":"x","prompt":"Once upon a time","max_tokens":24`+extra+`}`)
		if r.Status != 200 {
			t.Fatalf("completion: %d %s", r.Status, r.Body)
		}
		var c struct{ Choices []struct{ Text string } }
		if err := json.Unmarshal([]byte(r.Body), &c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("completion: %v %s", err, r.Body)
		}
		return c.Choices[0].Text
	}
	a, b := sampled(""), sampled("")
	if a != b {
		t.Errorf("without a seed, dialog.sampler's seed 42 should repeat the text: %q, then %q", a, b)
	}
	if c := sampled(`,"seed":42,"temperature":0.8,"top_k":40,"top_p":0.95`); c != a {
		t.Errorf("dialog.sampler's values given explicitly: %q, by default: %q", c, a)
	}
	if g := sampled(`,"temperature":0`); g == a {
		t.Errorf("temperature 0 gave the sampled text %q", g)
	}
}
