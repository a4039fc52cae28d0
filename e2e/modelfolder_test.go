package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hexserve/hexserve/internal/testjson"
)

// A model's folder is input too (issue 55): files that never end or block are refused at once,
// the other models keep serving, memory stays flat and SIGTERM is honoured.

// copyGenie copies the tiny Genie bundle g into a fresh folder the test may break.
func copyGenie(t *testing.T, g string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(g)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// peakRSS is the process's peak resident set (VmHWM) in bytes.
func peakRSS(t *testing.T, s *hexserve) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestHostileModelFolders: Genie bundles whose config, tokenizer or part is a FIFO or /dev/zero,
// or whose part is outside the folder, preloaded in one models: list beside a good bundle: the
// server becomes healthy within 10 s, the good model serves, each bad one answers 503 with its
// reason, and the peak RSS stays within 100 MB of a server with the good model alone.
func TestHostileModelFolders(t *testing.T) {
	g := mkgenie(t, "--prefill-chunk", "32")
	good := fmt.Sprintf("{path: %q, id: good, preload: true}", bundle(t))
	idle := serve(t, modelsConfig(t, []string{good}, "", ""), true)
	base := peakRSS(t, idle)
	idle.stop()

	fifo := func(dir, name string) {
		os.Remove(filepath.Join(dir, name))
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	zero := func(dir, name string) {
		os.Remove(filepath.Join(dir, name))
		if err := os.Symlink("/dev/zero", filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	part := "tiny_part_2_of_3.bin"
	cases := []struct {
		id   string
		brk  func(dir string)
		want []string
	}{
		{"config-fifo", func(d string) { fifo(d, "genie_config.json") }, []string{"genie_config.json", "a named pipe"}},
		{"config-zero", func(d string) { zero(d, "genie_config.json") }, []string{"genie_config.json", "a device"}},
		{"hf-config-fifo", func(d string) { fifo(d, "config.json") }, []string{"config.json", "a named pipe"}},
		{"extensions-fifo", func(d string) { fifo(d, "htp_backend_ext_config.json") }, []string{"dialog.engine.backend.extensions", "a named pipe"}},
		{"extensions-zero", func(d string) { zero(d, "htp_backend_ext_config.json") }, []string{"dialog.engine.backend.extensions", "a device"}},
		{"tokenizer-fifo", func(d string) { fifo(d, "tokenizer.json") }, []string{"dialog.tokenizer.path", "a named pipe"}},
		{"tokenizer-zero", func(d string) { zero(d, "tokenizer.json") }, []string{"dialog.tokenizer.path", "a device"}},
		{"part-fifo", func(d string) { fifo(d, part) }, []string{"ctx-bins[1]", "a named pipe"}},
		{"part-zero", func(d string) { zero(d, part) }, []string{"ctx-bins[1]", "a device"}},
		{"part-outside", func(d string) {
			testjson.Edit(t, filepath.Join(d, "genie_config.json"), func(m map[string]any) {
				bin := m["dialog"].(map[string]any)["engine"].(map[string]any)["model"].(map[string]any)["binary"].(map[string]any)
				bin["ctx-bins"].([]any)[1] = filepath.Join(g, part)
			})
		}, []string{"ctx-bins[1]", "outside the model's folder", "model.allow_outside_paths"}},
	}
	entries := []string{good}
	for _, c := range cases {
		d := copyGenie(t, g)
		c.brk(d)
		entries = append(entries, fmt.Sprintf("{path: %q, id: %s, preload: true}", d, c.id))
	}
	start := time.Now()
	s, err := launch(binary(t), modelsConfig(t, entries, "", ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stop() })
	if err := s.waitHealthy(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("healthy after %v", time.Since(start).Round(time.Millisecond))
	if got, _ := s.greedy(t, "good", goldenCases(t)[0]); len(got) == 0 {
		t.Error("the good model did not answer")
	}
	for _, c := range cases {
		r := s.post(t, "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"x","max_tokens":1}`, c.id))
		if r.Status != 503 {
			t.Errorf("%s: %d %s", c.id, r.Status, r.Body)
		}
		for _, w := range c.want {
			if !strings.Contains(r.Body, w) {
				t.Errorf("%s: the reply lacks %q: %s", c.id, w, r.Body)
			}
		}
	}
	if peak := peakRSS(t, s); peak > base+100<<20 {
		t.Errorf("peak RSS %d MB, more than 100 MB over the good model alone (%d MB)", peak>>20, base>>20)
	} else {
		t.Logf("peak RSS %d MB (the good model alone: %d MB)", peak>>20, base>>20)
	}
}

// TestSIGTERMWithFIFOModel: SIGTERM right after start, while a models: list with a FIFO as a
// Genie bundle's config.json is being read, ends the process within 5 s.
func TestSIGTERMWithFIFOModel(t *testing.T) {
	d := copyGenie(t, mkgenie(t, "--prefill-chunk", "32"))
	os.Remove(filepath.Join(d, "config.json"))
	if err := syscall.Mkfifo(filepath.Join(d, "config.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := modelsConfig(t, []string{fmt.Sprintf("{path: %q, id: fifo, preload: true}", d),
		fmt.Sprintf("{path: %q, id: good}", bundle(t))}, "", "")
	s, err := launch(binary(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.cmd.Process.Kill()
	start := time.Now()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		t.Logf("exited %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatalf("hexserve did not exit within 5 s of SIGTERM:\n%s", s.log)
	}
}
