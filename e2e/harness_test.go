package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hexserve/hexserve/internal/hostsimtest"
	"github.com/hexserve/hexserve/internal/syncbuf"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// The helpers in this file start the real binary against the hostsim
// libraries and a tiny bundle for every e2e test. All traffic stays on
// 127.0.0.1.

// apiKey protects the shared server, so the 401 path is exercised too.
const apiKey = "sk-e2e-test"

var (
	root    = func() string { d, _ := filepath.Abs(".."); return d }()
	tmpRoot string

	binOnce sync.Once
	binPath string
	binErr  error

	bundleOnce sync.Once
	bundlePath string
	bundleErr  error

	sharedOnce sync.Once
	shared     *hexserve
	sharedErr  error
)

func TestMain(m *testing.M) {
	var err error
	if tmpRoot, err = os.MkdirTemp("", "hexserve-e2e-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if shared != nil {
		if err := shared.stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.RemoveAll(tmpRoot)
	os.Exit(code)
}

// binary returns $HEXSERVE_BIN (relative paths are from the repository
// root), or builds ./cmd/server once when it is unset.
func binary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("HEXSERVE_BIN"); bin != "" {
		if !filepath.IsAbs(bin) {
			bin = filepath.Join(root, bin)
		}
		if _, err := os.Stat(bin); err != nil {
			t.Skipf("HEXSERVE_BIN %s is missing (run make build): %v", bin, err)
		}
		return bin
	}
	binOnce.Do(func() {
		binPath = filepath.Join(tmpRoot, "hexserve")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/server")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// hostsimLibs returns the hostsim library directory (hostsimtest.Dir).
func hostsimLibs(t testing.TB) string {
	t.Helper()
	return hostsimtest.Dir(t)
}

// bundle returns build/models/tiny when it exists, else a tiny bundle
// generated once with `hexserve mkmodel --preset tiny`. Tests must not
// modify it (copyBundle makes a private copy).
// tinyFlags are the mkmodel flags of the tiny bundle (the Makefile's TINY_FLAGS):
// f16 weights with float32 I/O and KV reproduce the golden logits exactly.
var tinyFlags = []string{"--preset", "tiny", "--weights", "f16", "--io", "f32", "--kv", "f32"}

// bundle returns the tiny bundle: build/models/tiny when make built it, else
// one generated once for the run.
func bundle(t testing.TB) string {
	t.Helper()
	bin := binary(t)
	if _, err := os.Stat(filepath.Join(root, "build", "models", "tiny", "v79", "manifest.json")); err == nil {
		return filepath.Join(root, "build", "models", "tiny")
	}
	bundleOnce.Do(func() {
		bundlePath = filepath.Join(tmpRoot, "tiny")
		// The same flags as the Makefile's build/models/tiny: the exact float32 path.
		bundleErr = runMkmodel(bin, bundlePath, tinyFlags)
	})
	if bundleErr != nil {
		t.Fatal(bundleErr)
	}
	return bundlePath
}

// runMkmodel runs bin's mkmodel from the repository root, where the default
// tokenizer path is relative to.
func runMkmodel(bin, dir string, args []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"mkmodel", "--out", dir}, args...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mkmodel %v: %v\n%s", args, err, out)
	}
	return nil
}

var (
	modelsMu sync.Mutex
	models   = map[string]string{}
)

// mkmodelOnce writes a model with mkmodel args once per run (and argument
// list) into a new folder under tmpRoot, and returns the folder. Tests must
// not modify it.
func mkmodelOnce(t testing.TB, args ...string) string {
	t.Helper()
	key := strings.Join(args, " ")
	modelsMu.Lock()
	defer modelsMu.Unlock()
	if dir, ok := models[key]; ok {
		return dir
	}
	dir, err := os.MkdirTemp(tmpRoot, "model-")
	if err != nil {
		t.Fatal(err)
	}
	if err := runMkmodel(binary(t), dir, args); err != nil {
		t.Fatal(err)
	}
	models[key] = dir
	return dir
}

// config is a serve config for bundle through the hostsim libraries,
// listening on a free port of 127.0.0.1 and logging JSON at info level.
type config struct {
	Bundle  string
	Backend string // "": hostsim's libQnnHtp.so
	Server  string // extra server: keys, indented by two spaces
	Model   string // extra model: keys, indented by two spaces
	Extra   string // extra top-level YAML (engine, sampling)
}

// write writes the config into the run's temp dir and returns its path.
func (c config) write(t testing.TB, libs string) string {
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
%s
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
`, c.Server, c.Bundle, c.Model, backend, filepath.Join(libs, "libQnnSystem.so"), filepath.Join(libs, "libcdsprpc.so"), c.Extra)
	f, err := os.CreateTemp(tmpRoot, "config-*.yaml")
	if err == nil {
		_, err = f.WriteString(y)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// copyBundle copies a bundle so a test can break its copy.
func copyBundle(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "bundle")
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// hexserve is a running `hexserve serve`.
type hexserve struct {
	URL    string // http://127.0.0.1:PORT
	Model  string // the served model id (set by start)
	cmd    *exec.Cmd
	log    *syncbuf.Buffer // stdout and stderr
	exited chan struct{}
	err    error // the exit status, once exited is closed
}

// spawn starts cmd with its output in s.log, passing each line of it to
// onLine as well (when not nil); s.exited closes when cmd ends.
func spawn(cmd *exec.Cmd, onLine func(line []byte)) (*hexserve, error) {
	s := &hexserve{cmd: cmd, log: &syncbuf.Buffer{}, exited: make(chan struct{})}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			s.log.Write(line)
			s.log.Write([]byte{'\n'})
			if onLine != nil {
				onLine(line)
			}
		}
		io.Copy(io.Discard, pr)
	}()
	go func() {
		s.err = cmd.Wait()
		pw.Close()
		close(s.exited)
	}()
	return s, nil
}

// launch runs `hexserve serve --config cfg` with extra environment and
// waits until its log says where it listens.
func launch(bin, cfg string, env ...string) (*hexserve, error) {
	cmd := exec.Command(bin, "serve", "--config", cfg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	addr := make(chan string, 1)
	s, err := spawn(cmd, func(line []byte) {
		var l struct{ Message, Addr string }
		if json.Unmarshal(line, &l) == nil && l.Message == "hexserve started" && l.Addr != "" {
			select {
			case addr <- l.Addr:
			default:
			}
		}
	})
	if err != nil {
		return nil, err
	}
	select {
	case a := <-addr:
		s.URL = "http://" + a
		return s, nil
	case <-s.exited:
		return nil, fmt.Errorf("hexserve exited before listening: %v\n%s", s.err, s.log)
	case <-time.After(20 * time.Second):
		s.stop()
		return nil, fmt.Errorf("hexserve did not listen within 20s:\n%s", s.log)
	}
}

// waitHealthy polls /health until it answers 200.
func (s *hexserve) waitHealthy(timeout time.Duration) error {
	end := time.Now().Add(timeout)
	for {
		resp, err := http.Get(s.URL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("hexserve exited while loading: %v\n%s", s.err, s.log)
		default:
		}
		if time.Now().After(end) {
			return fmt.Errorf("hexserve was not healthy within %v:\n%s", timeout, s.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits; after 20 s it kills the process and
// reports that it did not stop.
func (s *hexserve) stop() error {
	select {
	case <-s.exited:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return nil
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("hexserve did not stop within 20s of SIGTERM:\n%s", s.log)
	}
}

// serve starts a server for one test (stopped at its end); with ready it
// also waits for /health 200.
func serve(t *testing.T, cfg string, ready bool, env ...string) *hexserve {
	t.Helper()
	s, err := launch(binary(t), cfg, env...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Error(err)
		}
	})
	if ready {
		if err := s.waitHealthy(90 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// start runs a healthy server for the SDK tests: the tiny bundle, apiKey
// required, gpt-4o-mini as an alias, Model set from /v1/models. The caller
// stops it.
func start(t testing.TB, env ...string) (*hexserve, error) {
	t.Helper()
	libs := hostsimLibs(t)
	cfg := config{
		Bundle: bundle(t),
		Server: fmt.Sprintf("  api_keys: [%q]", apiKey),
		Model:  "  aliases: [gpt-4o-mini]",
	}.write(t, libs)
	s, err := launch(binary(t), cfg, env...)
	if err != nil {
		return nil, err
	}
	if err := s.waitHealthy(90 * time.Second); err != nil {
		s.stop()
		return nil, err
	}
	c := s.client()
	models, err := c.Models.List(context.Background())
	if err != nil || len(models.Data) != 1 {
		s.stop()
		return nil, fmt.Errorf("list models: %v %+v", err, models)
	}
	s.Model = models.Data[0].ID
	return s, nil
}

func (s *hexserve) client(opts ...option.RequestOption) openai.Client {
	base := []option.RequestOption{option.WithBaseURL(s.URL + "/v1/"), option.WithAPIKey(apiKey), option.WithMaxRetries(0)}
	return openai.NewClient(append(base, opts...)...)
}

// sharedServer is one server for the tests that need no special environment.
func sharedServer(t *testing.T) *hexserve {
	t.Helper()
	hostsimLibs(t)
	binary(t)
	sharedOnce.Do(func() { shared, sharedErr = start(t) })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	if shared == nil {
		t.Fatal("the shared server failed to start (see the first test's failure)")
	}
	return shared
}

// reply is an HTTP response read in full.
type reply struct {
	Status int
	Header http.Header
	Body   string
}

func (s *hexserve) do(t testing.TB, method, path, body string, header ...string) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1] // the client sends req.Host, not a Host header
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", method, path, err, s.log)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// post sends a JSON body without a key.
func (s *hexserve) post(t testing.TB, path, body string) reply {
	t.Helper()
	return s.do(t, "POST", path, body, "Content-Type", "application/json")
}

func (s *hexserve) health(t testing.TB) reply {
	t.Helper()
	return s.do(t, "GET", "/health", "")
}

func (s *hexserve) metrics(t testing.TB) string {
	t.Helper()
	return s.do(t, "GET", "/metrics", "").Body
}

// errorCase is a call the server must refuse with an OpenAI error of this
// status, code and param (and a message).
type errorCase struct {
	name        string
	call        func() error
	status      int
	code, param string
}

// checkErrors makes each case's call and checks the error it returns.
func checkErrors(t *testing.T, cases []errorCase) {
	t.Helper()
	for _, tc := range cases {
		err := tc.call()
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Errorf("%s: error %v is not an *openai.Error", tc.name, err)
			continue
		}
		if apiErr.StatusCode != tc.status || apiErr.Code != tc.code || apiErr.Param != tc.param || apiErr.Message == "" {
			t.Errorf("%s: %d code=%q param=%q: %s", tc.name, apiErr.StatusCode, apiErr.Code, apiErr.Param, apiErr.RawJSON())
		}
	}
}
