package server

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hexserve/hexserve/upstream"
)

// rss is this process's resident set size in bytes (Linux).
func rss(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status:", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return kb << 10
		}
	}
	t.Skip("no VmRSS")
	return 0
}

// TestRelayMemoryRSS: 40 non-streamed requests at once to an upstream
// whose reply never ends keep the process's RSS within 300 MB of idle
// (the relays' budget, server.relay_memory, at its default). It measures
// the whole process, so it runs alone: HEXSERVE_RSS=1 go test -run
// TestRelayMemoryRSS ./server/.
func TestRelayMemoryRSS(t *testing.T) {
	if os.Getenv("HEXSERVE_RSS") == "" {
		t.Skip("measures the process's RSS, which other tests disturb: set HEXSERVE_RSS=1 and run it alone")
	}
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer up.Close()
	budget := upstream.NewBudget(0) // server.relay_memory's default
	var ups []Upstream
	for i := range 4 { // several upstream models share the one budget
		c, err := upstream.New(upstream.Options{ID: fmt.Sprintf("big%d", i), BaseURL: up.URL + "/v1", Model: "remote", Budget: budget})
		if err != nil {
			t.Fatal(err)
		}
		ups = append(ups, Upstream{ID: c.ID(), Relay: c})
	}
	s, _ := newTest(t, Options{Upstreams: ups})
	srv := httptest.NewServer(s)
	defer srv.Close()
	runtime.GC()
	idle := rss(t)
	var peak int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak = max(peak, rss(t))
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	statuses := make(chan int, 40)
	for i := range 40 {
		wg.Go(func() {
			body := fmt.Sprintf(`{"model":"big%d","messages":[{"role":"user","content":"hi"}]}`, i%4)
			resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses <- resp.StatusCode
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	close(statuses)
	counts := map[int]int{}
	for st := range statuses {
		counts[st]++
	}
	t.Logf("idle RSS %d MB, peak %d MB (+%d MB), statuses %v, budget held after %d", idle>>20, peak>>20, (peak-idle)>>20, counts, budget.Used())
	if peak-idle > 300<<20 {
		t.Errorf("RSS rose %d MB above idle, want <= 300 MB", (peak-idle)>>20)
	}
	if budget.Used() != 0 {
		t.Errorf("%d bytes of the budget still held", budget.Used())
	}
}
