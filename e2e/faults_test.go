package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The helpers in this file (prefixed rel) start the real binary against the
// hostsim libraries and a tiny generated bundle, for the fault and start-up
// tests. All traffic stays on 127.0.0.1.

var (
	relBinOnce sync.Once
	relBinPath string
	relBinErr  error
)

// relBinary returns $HEXSERVE_BIN, or builds ./cmd/server once.
func relBinary(t *testing.T) string {
	t.Helper()
	relBinOnce.Do(func() {
		if p := os.Getenv("HEXSERVE_BIN"); p != "" {
			relBinPath = p
			return
		}
		dir, err := os.MkdirTemp("", "hexserve-e2e-bin")
		if err != nil {
			relBinErr = err
			return
		}
		relBinPath = filepath.Join(dir, "hexserve")
		out, err := exec.Command("go", "build", "-o", relBinPath, "../cmd/server").CombinedOutput()
		if err != nil {
			relBinErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if relBinErr != nil {
		t.Fatal(relBinErr)
	}
	return relBinPath
}

// relLibs returns the hostsim library directory, skipping without it.
func relLibs(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "build", "hostsim", runtime.GOARCH))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "libQnnHtp.so")); err != nil {
		t.Skipf("hostsim libraries not built (%v); run make", err)
	}
	return dir
}

// relBundle writes the tiny bundle (hexserve mkmodel) into a temp dir and
// returns the bundle dir (holding v79/).
func relBundle(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, relBinary(t), "mkmodel", "--preset", "tiny", "--out", dir)
	cmd.Dir = ".." // mkmodel reads testdata/tokenizer from the repository root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mkmodel: %v\n%s", err, out)
	}
	return dir
}

// relConfig writes a config serving bundle through hostsim; extra is
// appended YAML (top-level keys not used here: engine, log, sampling).
type relConfig struct {
	Bundle  string
	Backend string // "" : hostsim's libQnnHtp.so
	Server  string // extra server: keys, indented by two spaces
	Extra   string
}

func (c relConfig) write(t *testing.T, libs string) string {
	t.Helper()
	backend := c.Backend
	if backend == "" {
		backend = filepath.Join(libs, "libQnnHtp.so")
	}
	y := fmt.Sprintf(`server:
  listen: 127.0.0.1:0
%s
model:
  bundle: %q
  libraries:
    backend: %q
    system: %q
    rpcmem: %q
chat:
  date: 26 Jul 2024
log:
  level: info
  format: json
%s
`, c.Server, c.Bundle, backend, filepath.Join(libs, "libQnnSystem.so"), filepath.Join(libs, "libcdsprpc.so"), c.Extra)
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// relProc is a running `hexserve serve`.
type relProc struct {
	URL    string
	cmd    *exec.Cmd
	stderr *relBuf
	exited chan struct{}
	err    error // the exit status, once exited is closed
}

type relBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *relBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *relBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// relStart runs `hexserve serve --config cfg` with extra environment and
// waits until it listens; with ready it also waits for /health 200.
func relStart(t *testing.T, cfg string, ready bool, env ...string) *relProc {
	t.Helper()
	p := &relProc{stderr: &relBuf{}, exited: make(chan struct{})}
	p.cmd = exec.Command(relBinary(t), "serve", "--config", cfg)
	p.cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	p.cmd.Stderr = pw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			p.stderr.Write(append(line, '\n'))
			var l struct{ Message, Addr string }
			if json.Unmarshal(line, &l) == nil && l.Message == "listening" && l.Addr != "" {
				select {
				case addr <- l.Addr:
				default:
				}
			}
		}
		io.Copy(io.Discard, pr)
	}()
	go func() {
		p.err = p.cmd.Wait()
		pw.Close()
		close(p.exited)
	}()
	t.Cleanup(func() { p.stop(t) })
	select {
	case a := <-addr:
		p.URL = "http://" + a
	case <-p.exited:
		t.Fatalf("hexserve exited before listening: %v\n%s", p.err, p.stderr)
	case <-time.After(20 * time.Second):
		t.Fatalf("hexserve did not listen within 20s:\n%s", p.stderr)
	}
	if ready {
		end := time.Now().Add(30 * time.Second)
		for {
			resp, err := http.Get(p.URL + "/health")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
			select {
			case <-p.exited:
				t.Fatalf("hexserve exited while loading: %v\n%s", p.err, p.stderr)
			default:
			}
			if time.Now().After(end) {
				t.Fatalf("not ready within 30s:\n%s", p.stderr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return p
}

// stop sends SIGTERM and waits (killing after 15 s).
func (p *relProc) stop(t *testing.T) {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("hexserve did not stop within 15s of SIGTERM:\n%s", p.stderr)
	}
}

type relReply struct {
	Status int
	Header http.Header
	Body   string
}

func (p *relProc) post(t *testing.T, path, body string) relReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", p.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v\n%s", path, err, p.stderr)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return relReply{resp.StatusCode, resp.Header, string(b)}
}

func (p *relProc) health(t *testing.T) relReply {
	t.Helper()
	resp, err := http.Get(p.URL + "/health")
	if err != nil {
		t.Fatalf("/health: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return relReply{resp.StatusCode, resp.Header, string(b)}
}

func (p *relProc) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(p.URL + "/metrics")
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// One token prompt, one generated token: exactly two graph executes (the
// decode graph for the prompt token, then the lm-head) on the tiny bundle.
const relOneStep = `{"model":"tinyllama-public","prompt":[128000],"temperature":0,"max_tokens":1}`

// TestExecuteFailures injects graphExecute failures (HOSTSIM_FAIL_EXECUTE_AT
// counts every execute of the process from 1) into the real binary:
//
//	#1 fails at execute 1                          → 500, next request fine
//	#2 (executes 2–3) succeeds
//	#3 streams 8 tokens and fails at its 6th execute (8) → 200 stream with
//	   content, then an error frame
//	#4–#6 fail at their first execute (9, 10, 11)  → 500 ×3, /health 503
//	#7 succeeds                                    → /health 200 again
//
// for a device-restart code (1007: contexts reloaded), the fatal one (1011)
// and a plain graph error (no reload).
func TestExecuteFailures(t *testing.T) {
	libs := relLibs(t)
	bundle := relBundle(t)
	for _, tc := range []struct {
		code   string
		reload bool
	}{{"1007", true}, {"1011", true}, {"6003", false}} {
		t.Run("code"+tc.code, func(t *testing.T) {
			cfg := relConfig{Bundle: bundle}.write(t, libs)
			p := relStart(t, cfg, true, "HOSTSIM_FAIL_EXECUTE_AT=1,8,9,10,11", "HOSTSIM_FAIL_CODE="+tc.code)

			rep := p.post(t, "/v1/completions", relOneStep)
			if rep.Status != 500 || !strings.Contains(rep.Body, `"server_error"`) {
				t.Fatalf("#1 (failing execute): %d %s", rep.Status, rep.Body)
			}
			if h := p.health(t); h.Status != 200 {
				t.Fatalf("/health after one failure: %d %s", h.Status, h.Body)
			}
			if rep := p.post(t, "/v1/completions", relOneStep); rep.Status != 200 {
				t.Fatalf("#2 after the failure: %d %s\n%s", rep.Status, rep.Body, p.stderr)
			}

			rep = p.post(t, "/v1/completions", `{"model":"tinyllama-public","prompt":[128000],"temperature":0,"max_tokens":8,"stream":true}`)
			if rep.Status != 200 {
				t.Fatalf("#3 stream: %d %s", rep.Status, rep.Body)
			}
			errAt := strings.Index(rep.Body, `data: {"error":`)
			if errAt < 0 {
				t.Fatalf("#3 stream has no error frame:\n%s", rep.Body)
			}
			if !strings.Contains(rep.Body[:errAt], `"text":`) {
				t.Fatalf("#3 stream failed before any content:\n%s", rep.Body)
			}
			if !strings.Contains(rep.Body[errAt:], `"server_error"`) {
				t.Fatalf("#3 error frame is not a server_error:\n%s", rep.Body[errAt:])
			}

			for i := 4; i <= 6; i++ {
				if rep := p.post(t, "/v1/completions", relOneStep); rep.Status != 500 {
					t.Fatalf("#%d (failing execute): %d %s", i, rep.Status, rep.Body)
				}
			}
			h := p.health(t)
			if h.Status != 503 || !strings.Contains(h.Body, `"unhealthy"`) {
				t.Fatalf("/health after 3 consecutive failures: %d %s", h.Status, h.Body)
			}
			if rep := p.post(t, "/v1/completions", relOneStep); rep.Status != 200 {
				t.Fatalf("#7 after the failures: %d %s\n%s", rep.Status, rep.Body, p.stderr)
			}
			if h := p.health(t); h.Status != 200 {
				t.Fatalf("/health after recovery: %d %s", h.Status, h.Body)
			}

			logs := p.stderr.String()
			if n := strings.Count(logs, "injected failure"); n < 5 {
				t.Errorf("log names %d injected failures, want >= 5:\n%s", n, logs)
			}
			if got := strings.Contains(logs, "reloading the context binaries"); got != tc.reload {
				t.Errorf("reload logged = %v, want %v:\n%s", got, tc.reload, logs)
			}
			for _, want := range []string{`graph \"decode\"`, "decode.bin", "error " + tc.code} {
				if !strings.Contains(logs, want) {
					t.Errorf("log lacks %q", want)
				}
			}
		})
	}
}

// TestSlowNPU checks that a slow graph call does not stall the HTTP side:
// while a request generates under injected latency, /health answers at
// once, with engine.queue_length 1 a second request waits and a third gets
// 503 + Retry-After, and a client that goes away frees the model for the
// waiting one.
func TestSlowNPU(t *testing.T) {
	libs := relLibs(t)
	bundle := relBundle(t)
	cfg := relConfig{Bundle: bundle, Extra: "engine:\n  queue_length: 1"}.write(t, libs)
	p := relStart(t, cfg, true, "HOSTSIM_LATENCY_US_DECODE=50000", "HOSTSIM_LATENCY_US_LMHEAD=50000")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", p.URL+"/v1/completions",
		strings.NewReader(`{"model":"tinyllama-public","prompt":[128000],"max_tokens":200,"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "data: {") {
	}
	start := time.Now()
	if h := p.health(t); h.Status != 200 {
		t.Fatalf("/health while generating: %d %s", h.Status, h.Body)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("/health took %v while generating", d)
	}
	// With queue_length 1: one request waits, the next is refused at once.
	queued := make(chan relReply, 1)
	go func() {
		req, _ := http.NewRequest("POST", p.URL+"/v1/completions", strings.NewReader(relOneStep))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			queued <- relReply{Body: err.Error()}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		queued <- relReply{resp.StatusCode, resp.Header, string(b)}
	}()
	end := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.metrics(t), "\nhexserve_queue_depth 1\n") {
		if time.Now().After(end) {
			t.Fatalf("the second request never queued")
		}
		time.Sleep(20 * time.Millisecond)
	}
	rep := p.post(t, "/v1/completions", relOneStep)
	if rep.Status != 503 || rep.Header.Get("Retry-After") == "" || !strings.Contains(rep.Body, "server_overloaded") {
		t.Fatalf("third request with a full queue: %d %v %s", rep.Status, rep.Header, rep.Body)
	}

	cancel()
	resp.Body.Close()
	select {
	case rep := <-queued:
		if rep.Status != 200 {
			t.Fatalf("queued request: %d %s", rep.Status, rep.Body)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the queued request did not run within 5s of the disconnect")
	}
	// The abandoned request (≥ 200 × 100 ms left) frees the model: the next
	// one-token request finishes in a few graph calls.
	start = time.Now()
	if rep := p.post(t, "/v1/completions", relOneStep); rep.Status != 200 {
		t.Fatalf("request after the disconnect: %d %s", rep.Status, rep.Body)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("request after the disconnect took %v", d)
	}
}
