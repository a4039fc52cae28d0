package e2e

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hexserve/hexserve/internal/testjson"
)

// editManifest rewrites a bundle's manifest through edit.
func editManifest(t *testing.T, bundle string, edit func(m map[string]any)) {
	t.Helper()
	testjson.Edit(t, filepath.Join(bundle, "v79", "manifest.json"), edit)
}

// editParam sets params.key in a bundle's manifest.
func editParam(t *testing.T, bundle, key string, v any) {
	editManifest(t, bundle, func(m map[string]any) { m["params"].(map[string]any)[key] = v })
}

// editArtifact sets artifacts.key in a bundle's manifest.
func editArtifact(t *testing.T, bundle, key string, v any) {
	editManifest(t, bundle, func(m map[string]any) { m["artifacts"].(map[string]any)[key] = v })
}

// TestStartupFailures runs `hexserve serve` on broken set-ups: each must
// exit non-zero within the timeout with one error line naming the file (and
// the graph and tensor where there is one).
func TestStartupFailures(t *testing.T) {
	libs := hostsimLibs(t)
	tiny := bundle(t)
	v79 := func(b, f string) string { return filepath.Join(b, "v79", f) }
	cases := []struct {
		name    string
		backend string                       // "": hostsim's
		breakIt func(t *testing.T, b string) // breaks the bundle copy b
		bundle  string                       // "": the tiny bundle (or its broken copy)
		want    func(b string) []string      // fragments of the error line
	}{
		{name: "missing library", backend: "/nonexistent/libQnnHtp.so",
			want: func(string) []string { return []string{"/nonexistent/libQnnHtp.so", "cannot open shared object"} }},
		{name: "missing symbol", backend: filepath.Join(libs, "libcdsprpc.so"),
			want: func(string) []string {
				return []string{filepath.Join(libs, "libcdsprpc.so"), "QnnInterface_getProviders", "undefined symbol"}
			}},
		{name: "truncated context binary",
			breakIt: func(t *testing.T, b string) {
				if err := os.Truncate(v79(b, "decode.bin"), 1000); err != nil {
					t.Fatal(err)
				}
			},
			want: func(b string) []string { return []string{v79(b, "decode.bin"), "MALFORMED_BINARY"} }},
		{name: "bad manifest JSON",
			breakIt: func(t *testing.T, b string) {
				os.WriteFile(v79(b, "manifest.json"), []byte(`{"schema_version": 1, "model": {`), 0o644)
			},
			want: func(b string) []string { return []string{v79(b, "manifest.json"), "not valid JSON"} }},
		{name: "manifest names a missing graph",
			breakIt: func(t *testing.T, b string) {
				editManifest(t, b, func(m map[string]any) {
					m["plan"].(map[string]any)["params"].(map[string]any)["decode"] = "nosuchgraph"
				})
			},
			want: func(b string) []string { return []string{v79(b, "manifest.json"), "decode.bin", `\"nosuchgraph\"`} }},
		{name: "manifest names a missing tensor",
			breakIt: func(t *testing.T, b string) {
				editManifest(t, b, func(m map[string]any) {
					hx := m["hexserve"].(map[string]any)
					tensors, _ := hx["tensors"].(map[string]any)
					if tensors == nil {
						tensors = map[string]any{}
						hx["tensors"] = tensors
					}
					tensors["cos"] = "nosuch_cos"
				})
			},
			want: func(b string) []string {
				return []string{v79(b, "manifest.json"), "decode.bin", `graph \"decode\"`, `\"nosuch_cos\"`}
			}},
		{name: "wrong arch folder",
			breakIt: func(t *testing.T, b string) {
				if err := os.Rename(filepath.Join(b, "v79"), filepath.Join(b, "v73")); err != nil {
					t.Fatal(err)
				}
			},
			want: func(b string) []string { return []string{b, "no v79 folder", "v73"} }},
		{name: "missing tokenizer",
			breakIt: func(t *testing.T, b string) { os.Remove(v79(b, "tokenizer.json")) },
			want:    func(b string) []string { return []string{v79(b, "tokenizer.json"), "artifacts.tokenizer"} }},
		{name: "short embedding table",
			breakIt: func(t *testing.T, b string) { os.Truncate(v79(b, "embed_f16.bin"), 100) },
			want:    func(b string) []string { return []string{v79(b, "embed_f16.bin"), "100 bytes"} }},
		// Hostile manifests and paths (issue 20): refused before anything is
		// allocated or read, with one line saying what is wrong.
		{name: "a billion layers",
			breakIt: func(t *testing.T, b string) { editParam(t, b, "n_layers", 1e9) },
			want: func(b string) []string {
				return []string{v79(b, "manifest.json"), "params.n_layers is 1000000000, more than hexserve supports"}
			}},
		{name: "2^31 context",
			breakIt: func(t *testing.T, b string) { editParam(t, b, "max_ctx", 1<<31) },
			want:    func(b string) []string { return []string{v79(b, "manifest.json"), "params.max_ctx is 2147483648"} }},
		{name: "tokenizer outside the bundle",
			breakIt: func(t *testing.T, b string) { editArtifact(t, b, "tokenizer", "../../../../etc/passwd") },
			want: func(string) []string {
				return []string{"artifacts.tokenizer", "../../../../etc/passwd", "outside the model's folder"}
			}},
		{name: "absolute embedding path",
			breakIt: func(t *testing.T, b string) { editArtifact(t, b, "embed", "/etc/passwd") },
			want: func(string) []string {
				return []string{"artifacts.embed", "/etc/passwd", "outside the model's folder"}
			}},
		{name: "bundle is /dev/zero", bundle: "/dev/zero",
			want: func(string) []string {
				return []string{"neither a bundle folder nor a manifest file: /dev/zero: not a regular file (a device)"}
			}},
		{name: "symlink loop",
			breakIt: func(t *testing.T, b string) {
				os.RemoveAll(filepath.Join(b, "v79"))
				if err := os.Symlink("v79", filepath.Join(b, "v79")); err != nil {
					t.Fatal(err)
				}
			},
			want: func(string) []string { return []string{"too many levels of symbolic links"} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := tiny
			if c.breakIt != nil {
				b = copyBundle(t, tiny)
				c.breakIt(t, b)
			}
			if c.bundle != "" {
				b = c.bundle
			}
			cfg := config{Bundle: b, Backend: c.backend}.write(t, libs)
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, binary(t), "serve", "--config", cfg).CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() <= 0 {
				t.Fatalf("want a non-zero exit, got %v (ctx %v):\n%s", err, ctx.Err(), out)
			}
			var errLines []string
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, `"level":"error"`) {
					errLines = append(errLines, line)
				}
			}
			if len(errLines) != 1 {
				t.Fatalf("want one error line, got %d:\n%s", len(errLines), out)
			}
			for _, w := range c.want(b) {
				if !strings.Contains(errLines[0], w) {
					t.Errorf("error line lacks %q:\n%s", w, errLines[0])
				}
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("the error took %v", d)
			}
			t.Logf("exit %d after %v: %s", exit.ExitCode(), time.Since(start).Round(time.Millisecond), errLines[0])
		})
	}
}

// TestServeTimeouts checks the slowloris and idle defenses of the real
// binary with tiny configured timeouts: a client that sends its headers
// slowly is cut off after read_header_timeout, an idle keep-alive
// connection after idle_timeout.
func TestServeTimeouts(t *testing.T) {
	libs := hostsimLibs(t)
	cfg := config{Bundle: bundle(t), Server: "  read_header_timeout: 300ms\n  idle_timeout: 500ms"}.write(t, libs)
	p := serve(t, cfg, true)
	addr := strings.TrimPrefix(p.URL, "http://")

	// Slowloris: one header byte every 50 ms, never finishing.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"); err != nil {
		t.Fatal(err)
	}
	closed := make(chan time.Duration, 1)
	go func() {
		io.Copy(io.Discard, conn) // returns when the server closes the connection
		closed <- time.Since(start)
	}()
	var cut time.Duration
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
loop:
	for {
		select {
		case cut = <-closed:
			break loop
		case <-ticker.C:
			if time.Since(start) > 5*time.Second {
				t.Fatalf("slow-header connection still open after %v", time.Since(start))
			}
			conn.Write([]byte("X")) // errors once closed; the reader reports it
		}
	}
	if cut < 250*time.Millisecond || cut > 2*time.Second {
		t.Errorf("slow-header connection closed after %v, want about 300ms", cut)
	} else {
		t.Logf("slow-header connection closed after %v", cut)
	}

	// Idle keep-alive connection.
	conn2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	io.WriteString(conn2, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	br := bufio.NewReader(conn2)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	idleStart := time.Now()
	conn2.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = br.ReadByte()
	idle := time.Since(idleStart)
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("idle connection not closed by the server (err %v after %v)", err, idle)
	}
	if idle < 400*time.Millisecond || idle > 3*time.Second {
		t.Errorf("idle connection closed after %v, want about 500ms", idle)
	} else {
		t.Logf("idle connection closed after %v", idle)
	}
	if h := p.health(t); h.Status != 200 {
		t.Fatalf("/health: %d", h.Status)
	}
}

// TestServeSecurity checks the binary's request-side limits and that keys
// and prompts stay out of its info-level log: keys from HEXSERVE_API_KEYS
// are required (except on /health), a body over server.body_limit is 413,
// no CORS headers are sent by default, and a request from another page or
// naming another Host than loopback is refused.
func TestServeSecurity(t *testing.T) {
	libs := hostsimLibs(t)
	const key = "sk-e2e-secret-9f8e7d"
	const prompt = "confidential-prompt-walrus"
	cfg := config{Bundle: bundle(t), Server: "  body_limit: 4KiB"}.write(t, libs)
	p := serve(t, cfg, true, "HEXSERVE_API_KEYS="+key)

	do := func(method, path, body string, hdr ...string) (int, http.Header, string) {
		r := p.do(t, method, path, body, hdr...)
		return r.Status, r.Header, r.Body
	}
	if st, _, _ := do("GET", "/health", ""); st != 200 {
		t.Fatalf("/health without a key: %d", st)
	}
	if st, _, b := do("GET", "/v1/models", ""); st != 401 || !strings.Contains(b, "invalid_api_key") {
		t.Fatalf("/v1/models without a key: %d %s", st, b)
	}
	if st, _, _ := do("GET", "/metrics", ""); st != 401 {
		t.Fatalf("/metrics without a key: %d", st)
	}
	auth := []string{"Authorization", "Bearer " + key, "Content-Type", "application/json"}
	chat := `{"model":"tinyllama-public","messages":[{"role":"user","content":"` + prompt + `"}],"max_tokens":3}`
	st, hdr, b := do("POST", "/v1/chat/completions", chat, append(auth, "Origin", "https://evil.example")...)
	if st != 403 || !strings.Contains(b, "origin_not_allowed") {
		t.Fatalf("chat with the key from another page: %d %s", st, b)
	}
	for k := range hdr {
		if strings.HasPrefix(strings.ToLower(k), "access-control-") {
			t.Errorf("CORS header %s sent by default", k)
		}
	}
	if st, _, b := do("POST", "/v1/chat/completions", chat, auth...); st != 200 {
		t.Fatalf("chat with the key: %d %s", st, b)
	}
	if st, _, b := do("GET", "/v1/models", "", "Authorization", "Bearer "+key, "Host", "attacker.example"); st != 403 || !strings.Contains(b, "host_not_allowed") {
		t.Fatalf("a rebound Host on a loopback listener: %d %s", st, b)
	}
	big := `{"model":"tinyllama-public","prompt":"` + strings.Repeat("a", 5000) + `"}`
	if st, _, b := do("POST", "/v1/completions", big, auth...); st != 413 || !strings.Contains(b, "request_too_large") {
		t.Fatalf("body over the limit: %d %s", st, b)
	}
	if err := p.stop(); err != nil {
		t.Error(err)
	}
	logs := p.log.String()
	if !strings.Contains(logs, `"path":"/v1/chat/completions"`) {
		t.Fatalf("no access log line:\n%s", logs)
	}
	for _, secret := range []string{key, prompt} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log contains %q:\n%s", secret, logs)
		}
	}
}
