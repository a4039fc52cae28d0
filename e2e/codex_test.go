package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCodexCLI runs OpenAI's Codex CLI, unmodified and with its default
// tools, against hexserve serving a 32k-token tiny .pte (docs/api.md,
// "Codex CLI setup"). Opt-in: HEXSERVE_CODEX names the codex binary (npm
// @openai/codex, installed outside the repository); Codex's first prompt is
// about 9,000 tokens, which hostsim reads in one to several minutes.
//
// The random-weight model is scripted (HOSTSIM_SCRIPT) to call a function
// of Codex's multi_agent_v1 namespace, then exec_command, then answer: the
// namespace call must reach Codex in OpenAI's form (Codex sends it back
// with its namespace), the command must run, and the answer must be the
// script's third text.
func TestCodexCLI(t *testing.T) {
	codex := os.Getenv("HEXSERVE_CODEX")
	if codex == "" {
		t.Skip("set HEXSERVE_CODEX to a codex binary (npm install @openai/codex, outside the repository) to run Codex CLI against hexserve")
	}
	dir := t.TempDir()
	pte := filepath.Join(mkmodelOnce(t, "--format", "pte", "--preset", "tiny", "--ctx", "32768"), "tinyllama-public.pte")
	const answer = "The command printed hexserve-codex-ok."
	script := scriptFile(t, `{"name": "multi_agent_v1.close_agent", "parameters": {"target": "nobody"}}`,
		`{"name": "exec_command", "parameters": {"cmd": "echo hexserve-codex-ok"}}`, answer)
	s := serve(t, config{Model: fmt.Sprintf("  path: %q", pte)}.write(t, hostsimLibs(t)),
		true, "HOSTSIM_SCRIPT="+script)

	// A recording proxy in front of the server keeps what Codex sends.
	target, _ := url.Parse(s.URL)
	var mu sync.Mutex
	var bodies [][]byte
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/responses") {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			mu.Lock()
			bodies = append(bodies, b)
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()

	home, work := filepath.Join(dir, "codex-home"), filepath.Join(dir, "work")
	for _, d := range []string{home, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	toml := fmt.Sprintf("model = \"tinyllama-public\"\nmodel_provider = \"hexserve\"\n\n[model_providers.hexserve]\nname = \"hexserve\"\nbase_url = \"%s/v1\"\nwire_api = \"responses\"\n", front.URL)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	run, stop := context.WithTimeout(context.Background(), 20*time.Minute)
	defer stop()
	cmd := exec.CommandContext(run, codex, "exec", "--skip-git-repo-check", "--json", "Close agent nobody, then run echo hexserve-codex-ok")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "CODEX_HOME="+home, "OPENAI_API_KEY=dummy")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("codex: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}

	var ranCommand, answered bool
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Type string `json:"type"`
			Item struct {
				Type   string `json:"type"`
				Text   string `json:"text"`
				Output string `json:"aggregated_output"`
			} `json:"item"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Type != "item.completed" {
			continue
		}
		ranCommand = ranCommand || ev.Item.Type == "command_execution" && strings.Contains(ev.Item.Output, "hexserve-codex-ok\n") // a login shell may print more
		answered = answered || ev.Item.Type == "agent_message" && ev.Item.Text == answer
	}
	if !ranCommand || !answered {
		t.Errorf("codex ran the command: %v, answered %q: %v\n%s", ranCommand, answer, answered, out)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 3 {
		t.Fatalf("%d requests to /v1/responses, want 3 (namespace call, command, answer)", len(bodies))
	}
	var first struct {
		Tools []struct{ Type string } `json:"tools"`
	}
	if err := json.Unmarshal(bodies[0], &first); err != nil {
		t.Fatal(err)
	}
	types := map[string]bool{}
	for _, tl := range first.Tools {
		types[tl.Type] = true
	}
	if !types["namespace"] || !types["web_search"] {
		t.Errorf("Codex's first request offered tool types %v: want its defaults, a namespace and web_search", types)
	}
	var second struct {
		Input []struct {
			Type, Namespace, Name string
		} `json:"input"`
	}
	if err := json.Unmarshal(bodies[1], &second); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, it := range second.Input {
		found = found || it.Type == "function_call" && it.Namespace == "multi_agent_v1" && it.Name == "close_agent"
	}
	if !found {
		t.Errorf("Codex's second request does not send back the namespace call: %+v", second.Input)
	}
	t.Logf("codex: %d requests to /v1/responses", len(bodies))
}
