package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// apiKey protects the shared server, so the 401 path is exercised too.
const apiKey = "sk-e2e-test"

var (
	root    = func() string { d, _ := filepath.Abs(".."); return d }()
	tmpRoot string

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
		shared.stop()
	}
	os.RemoveAll(tmpRoot)
	os.Exit(code)
}

// binary returns the hexserve binary or skips the test.
func binary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("HEXSERVE_BIN")
	if bin == "" {
		t.Skip("HEXSERVE_BIN is not set (make gotest sets it to bin/hexserve)")
	}
	if !filepath.IsAbs(bin) {
		bin = filepath.Join(root, bin)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("HEXSERVE_BIN %s is missing (run make build): %v", bin, err)
	}
	return bin
}

func hostsimLibs(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(root, "build", "hostsim", runtime.GOARCH)
	if _, err := os.Stat(filepath.Join(dir, "libQnnHtp.so")); err != nil {
		t.Skipf("hostsim libraries are not built in %s (run make): %v", dir, err)
	}
	return dir
}

// bundle returns build/models/tiny when it exists, else a tiny bundle
// generated once with `hexserve mkmodel --preset tiny`.
func bundle(t *testing.T) string {
	t.Helper()
	bin := binary(t)
	if _, err := os.Stat(filepath.Join(root, "build", "models", "tiny", "v79", "manifest.json")); err == nil {
		return filepath.Join(root, "build", "models", "tiny")
	}
	bundleOnce.Do(func() {
		bundlePath = filepath.Join(tmpRoot, "tiny")
		cmd := exec.Command(bin, "mkmodel", "--preset", "tiny", "--out", bundlePath)
		cmd.Dir = root // the default tokenizer path is relative to the repository
		if out, err := cmd.CombinedOutput(); err != nil {
			bundleErr = fmt.Errorf("mkmodel: %v\n%s", err, out)
		}
	})
	if bundleErr != nil {
		t.Fatal(bundleErr)
	}
	return bundlePath
}

// hexserve is a running server process.
type hexserve struct {
	URL   string // http://127.0.0.1:PORT
	Model string // the served model id
	cmd   *exec.Cmd
	log   *syncBuffer
	done  chan struct{}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs `hexserve serve` with a temp config and waits for /health.
func start(t *testing.T, name string, env ...string) (*hexserve, error) {
	bin, libs, bdir := binary(t), hostsimLibs(t), bundle(t)
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`server:
  listen: 127.0.0.1:%d
  api_keys: [%q]
model:
  bundle: %q
  aliases: [gpt-4o-mini]
  libraries:
    backend: %q
    system: %q
    rpcmem: %q
chat:
  date: 26 Jul 2024
log:
  level: info
`, port, apiKey, bdir, filepath.Join(libs, "libQnnHtp.so"), filepath.Join(libs, "libQnnSystem.so"), filepath.Join(libs, "libcdsprpc.so"))
	cfgPath := filepath.Join(tmpRoot, name+".yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	s := &hexserve{URL: fmt.Sprintf("http://127.0.0.1:%d", port), log: &syncBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(bin, "serve", "--config", cfgPath)
	s.cmd.Dir = root
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-s.done:
			return nil, fmt.Errorf("hexserve exited before it was healthy:\n%s", s.log)
		default:
		}
		resp, err := http.Get(s.URL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("hexserve was not healthy within 90s:\n%s", s.log)
		}
		time.Sleep(50 * time.Millisecond)
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

// stop sends SIGTERM and waits (SIGKILL after 20s).
func (s *hexserve) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

func (s *hexserve) client(opts ...option.RequestOption) openai.Client {
	base := []option.RequestOption{option.WithBaseURL(s.URL + "/v1/"), option.WithAPIKey(apiKey), option.WithMaxRetries(0)}
	return openai.NewClient(append(base, opts...)...)
}

// sharedServer is one server for the tests that need no special environment.
func sharedServer(t *testing.T) *hexserve {
	t.Helper()
	binary(t)
	hostsimLibs(t)
	sharedOnce.Do(func() { shared, sharedErr = start(t, "shared") })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	if shared == nil {
		t.Fatal("the shared server failed to start (see the first test's failure)")
	}
	return shared
}
