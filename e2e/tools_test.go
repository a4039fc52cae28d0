package e2e

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// procKB reads a "Name:  N kB" line of /proc/<pid>/status.
func procKB(t *testing.T, pid int, name string) int {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatalf("%s: %q", name, v)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", name, pid)
	return 0
}

// nestedToolsBody is a chat request with n tools whose parameters nest depth
// arrays (issue 20: 100 tools, 997 deep, ≈ 205 KB took 24.7 s and 1.8 GB).
func nestedToolsBody(model string, n, depth int) string {
	var b strings.Builder
	b.WriteString(`{"model":"` + model + `","messages":[{"role":"user","content":"Hi"}],"max_tokens":1,"tools":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"function","function":{"name":"f%d","parameters":%s%s}}`, i, strings.Repeat("[", depth), strings.Repeat("]", depth))
	}
	b.WriteString("]}")
	return b.String()
}

// TestHostileTools sends tool definitions that would render to gigabytes to
// the real binary: each is refused at once (nesting bound, or the byte limit
// derived from the context), alone and six at a time, and the server's
// memory stays within a few tens of MB.
func TestHostileTools(t *testing.T) {
	cfg := config{Bundle: bundle(t)}.write(t, hostsimLibs(t))
	s := serve(t, cfg, true)
	pid := s.cmd.Process.Pid
	// Reset the peak (VmHWM) so it measures these requests, not the load.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Logf("cannot reset VmHWM (%v): the peak includes loading", err)
	}
	rss0 := procKB(t, pid, "VmRSS")
	const model = "tinyllama-public"
	deep := nestedToolsBody(model, 100, 997)
	wide := nestedToolsBody(model, 400, 60) // within the nesting bound, ≈ 5.9 MB rendered
	if len(deep) < 200_000 {
		t.Fatalf("deep body is %d bytes", len(deep))
	}
	cases := []struct{ name, path, body, param, code string }{
		{"997 deep", "/v1/chat/completions", deep, "tools[0]", ""},
		{"400 tools 60 deep", "/v1/chat/completions", wide, "messages", "context_length_exceeded"},
		{"apply-template 997 deep", "/apply-template", deep, "tools[0]", ""},
		{"apply-template 400 tools 60 deep", "/apply-template", wide, "messages", "context_length_exceeded"},
	}
	check := func(t *testing.T, name string, rep reply, param, code string) {
		if rep.Status != 400 || !strings.Contains(rep.Body, `"param":"`+param+`"`) ||
			(code != "" && !strings.Contains(rep.Body, `"code":"`+code+`"`)) {
			t.Errorf("%s: %d %s", name, rep.Status, rep.Body)
		}
	}
	for _, c := range cases {
		start := time.Now()
		rep := s.post(t, c.path, c.body)
		el := time.Since(start)
		check(t, c.name, rep, c.param, c.code)
		t.Logf("%s (%d KB body): %d in %v", c.name, len(c.body)>>10, rep.Status, el.Round(time.Millisecond))
		// Not a speed target: a generous bound that the unbounded
		// renderer (24.7 s) could not meet.
		if el > 5*time.Second {
			t.Errorf("%s took %v", c.name, el)
		}
	}
	var wg sync.WaitGroup
	start := time.Now()
	for i := range 6 {
		c := cases[i%2]
		wg.Go(func() {
			check(t, "concurrent "+c.name, s.post(t, c.path, c.body), c.param, c.code)
		})
	}
	wg.Wait()
	t.Logf("six concurrent: %v", time.Since(start).Round(time.Millisecond))
	rss1, hwm := procKB(t, pid, "VmRSS"), procKB(t, pid, "VmHWM")
	t.Logf("VmRSS %d → %d KB, VmHWM %d KB (growth to the peak %d KB)", rss0, rss1, hwm, hwm-rss0)
	if hwm-rss0 > 100<<10 {
		t.Errorf("peak RSS grew by %d MB (limit 100 MB)", (hwm-rss0)>>10)
	}
	if rep := s.post(t, "/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"Hi"}],"max_tokens":2}`); rep.Status != 200 {
		t.Fatalf("valid request afterwards: %d %s", rep.Status, rep.Body)
	}
}
