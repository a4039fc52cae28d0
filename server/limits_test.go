package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hexserve/hexserve/server"
)

// raceEnabled is set under -race, whose shadow memory makes RSS meaningless.
var raceEnabled bool

// rssMB is this process's resident set (the test server runs in it), in
// MB, from /proc/self/status after a GC that returns freed memory.
func rssMB(t *testing.T) float64 {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			return float64(kb) / 1024
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// metric returns the value of the sample line starting with series in the
// /metrics text (-1 when absent).
func metric(body, series string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// TestMetricsMethodLabelBounded: unauthenticated requests with huge,
// distinct method names (all refused) add no series to /metrics and do not
// grow the server's memory: the method label takes a fixed set of values.
func TestMetricsMethodLabelBounded(t *testing.T) {
	r := newRig(t, rigOptions{opts: server.Options{APIKeys: []string{apiKey}}})
	metricsLen := func() int { return len(r.do(t, "GET", "/metrics", "", "Authorization", "Bearer "+apiKey).Body) }
	send := func(i int) {
		method := fmt.Sprintf("M%d%s", i, strings.Repeat("X", 30<<10))
		if rep := r.do(t, method, "/v1/models", ""); rep.Status != 401 && rep.Status != 405 {
			t.Fatalf("method #%d: status %d", i, rep.Status)
		}
	}
	for i := range 50 { // the series for "other" exist from now on
		send(i)
	}
	metricsLen() // and those of GET /metrics
	len0, rss0 := metricsLen(), rssMB(t)
	const n = 2000
	for i := range n {
		send(100 + i)
	}
	len1, rss1 := metricsLen(), rssMB(t)
	t.Logf("%d requests with 30 KB methods: /metrics %d → %d bytes, RSS %.1f → %.1f MB", n, len0, len1, rss0, rss1)
	if len1-len0 > 1024 { // counts grow by digits, never by series
		t.Errorf("/metrics grew %d → %d bytes", len0, len1)
	}
	switch {
	case raceEnabled:
		t.Log("RSS not checked under -race (its shadow memory grows with every allocation)")
	case rss1-rss0 > 20:
		t.Errorf("RSS grew %.1f → %.1f MB", rss0, rss1)
	}
	r.assertHealthy(t)
}

// TestPrefixCacheAcrossKeys replays the PIN guess: a victim's chat
// holds a PIN; an attacker with another key sends the same chat with a
// guessed PIN. cached_tokens (and the reuse behind it) must not tell a right
// guess from a wrong one, while the victim's own repeat still hits the cache.
func TestPrefixCacheAcrossKeys(t *testing.T) {
	const victim, attacker = "sk-victim-key-0001", "sk-attacker-key-0002"
	r := newRig(t, rigOptions{opts: server.Options{APIKeys: []string{victim, attacker}}})
	chat := func(key, pin string) int {
		t.Helper()
		body := `{"model":"` + modelID + `","max_tokens":2,"messages":[{"role":"user","content":"My bank PIN is ` + pin +
			`. Remember it for later, please."},{"role":"assistant","content":"Noted."},{"role":"user","content":"Thanks"}]}`
		rep := r.do(t, "POST", "/v1/chat/completions", body, "Authorization", "Bearer "+key)
		if rep.Status != 200 {
			t.Fatalf("status %d: %s", rep.Status, rep.Body)
		}
		var resp struct {
			Usage struct {
				PromptTokens        int `json:"prompt_tokens"`
				PromptTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(rep.Body, &resp); err != nil {
			t.Fatal(err)
		}
		return resp.Usage.PromptTokensDetails.CachedTokens
	}
	chat(victim, "4817")
	if c := chat(victim, "4817"); c == 0 {
		t.Fatal("the victim's own repeat reused nothing: the prefix cache is off, the test proves nothing")
	}
	chat(victim, "4817")
	right := chat(attacker, "4817")
	chat(victim, "4817")
	wrong := chat(attacker, "1234")
	if right != 0 || wrong != 0 {
		t.Fatalf("attacker's cached_tokens: right guess %d, wrong guess %d; want 0 for both", right, wrong)
	}
}

// TestReplyClientStopsReading: a client that stops reading a whole (not
// streamed) reply larger than the socket buffers is dropped after
// server.stream_write_timeout: the handler ends, its request body's share of
// server.body_memory is released, the drop is counted, and the server keeps
// serving. Before, the handler waited for the client as long as it stayed
// connected.
func TestReplyClientStopsReading(t *testing.T) {
	const timeout = 300 * time.Millisecond
	r := newRig(t, rigOptions{
		opts: server.Options{StreamWriteTimeout: timeout},
		configure: func(hs *httptest.Server) {
			hs.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
				if tc, ok := c.(*net.TCPConn); ok {
					tc.SetWriteBuffer(4 << 10)
				}
				return ctx
			}
		},
	})
	// /tokenize of 900 KB of text: a reply of about as many bytes of ids.
	body := `{"content":"` + strings.Repeat(" hello", 150000) + `"}`
	inFlight := func() float64 {
		return metric(string(r.do(t, "GET", "/metrics", "").Body), "hexserve_http_requests_in_flight")
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(r.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	fmt.Fprintf(conn, "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	// Never read. Once the handler is in flight (on a loaded machine the
	// first look can come before the server has read the request's
	// headers), within the timeout and some it is gone: only the /metrics
	// request itself is in flight.
	start := time.Now()
	for inFlight() < 2 {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the request never went in flight")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for inFlight() != 1 {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("reply not dropped after %v (%v requests in flight)", time.Since(start), inFlight())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("dropped after %v", time.Since(start))
	if m := metric(string(r.do(t, "GET", "/metrics", "").Body), "hexserve_http_stream_write_timeouts_total"); m != 1 {
		t.Errorf("write timeouts counted %v, want 1", m)
	}
	r.assertHealthy(t)
	if rep := r.do(t, "POST", "/tokenize", `{"content":"hi"}`); rep.Status != 200 {
		t.Fatalf("next request: %d %s", rep.Status, rep.Body)
	}
}

// TestStreamClientStopsReading: a streaming client that stops reading is
// dropped once a frame cannot be written for StreamWriteTimeout, its
// generation is cancelled, the drop is counted, and the server keeps serving.
func TestStreamClientStopsReading(t *testing.T) {
	const timeout = 300 * time.Millisecond
	tok := loadTok(t)
	r := newRig(t, rigOptions{
		opts:   server.Options{StreamWriteTimeout: timeout},
		script: tok.Encode(strings.Repeat(" word", 480), false, false),
		configure: func(hs *httptest.Server) {
			// Small socket buffers: the server blocks after a few frames
			// instead of after megabytes.
			hs.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
				if tc, ok := c.(*net.TCPConn); ok {
					tc.SetWriteBuffer(4 << 10)
				}
				return ctx
			}
		},
	})
	r.Model.SetLatency(2 * time.Millisecond)
	conn, err := net.Dial("tcp", strings.TrimPrefix(r.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	// Large frames (20 top logprobs each) fill the buffers quickly.
	body := `{"model":"` + modelID + `","stream":true,"logprobs":true,"top_logprobs":20,"max_tokens":400,"messages":[{"role":"user","content":"Hi"}]}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	br := bufio.NewReader(conn)
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("status line %q: %v", line, err)
	}
	// Stop reading. The server must give up on the stream, which also
	// cancels the generation: the model is called no more.
	start := time.Now()
	timeouts := func() float64 {
		m := string(r.do(t, "GET", "/metrics", "").Body)
		return metric(m, "hexserve_http_stream_write_timeouts_total")
	}
	for timeouts() != 1 {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("stream not dropped after %v (stream_write_timeouts_total %v)", time.Since(start), timeouts())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("dropped after %v", time.Since(start))
	calls := len(r.Model.Calls())
	time.Sleep(200 * time.Millisecond)
	if after := len(r.Model.Calls()); after != calls || calls >= 400 {
		t.Fatalf("generation not cancelled: %d model calls, then %d", calls, after)
	}
	r.assertHealthy(t)
	if rep := r.do(t, "POST", "/v1/chat/completions", chatBody(`"max_tokens":3`)); rep.Status != 200 {
		t.Fatalf("next request: %d %s", rep.Status, rep.Body)
	}
}
