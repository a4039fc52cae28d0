package e2e

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hexserve/hexserve/internal/testwait"
)

// One token prompt, one generated token: exactly two graph executes (the
// decode graph for the prompt token, then the lm-head) on the tiny bundle.
const oneStep = `{"model":"tinyllama-public","prompt":[128000],"temperature":0,"max_tokens":1}`

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
	libs := hostsimLibs(t)
	tiny := bundle(t)
	for _, tc := range []struct {
		code   string
		reload bool
	}{{"1007", true}, {"1011", true}, {"6003", false}} {
		t.Run("code"+tc.code, func(t *testing.T) {
			cfg := config{Bundle: tiny}.write(t, libs)
			p := serve(t, cfg, true, "HOSTSIM_FAIL_EXECUTE_AT=1,8,9,10,11", "HOSTSIM_FAIL_CODE="+tc.code)

			rep := p.post(t, "/v1/completions", oneStep)
			if rep.Status != 500 || !strings.Contains(rep.Body, `"server_error"`) {
				t.Fatalf("#1 (failing execute): %d %s", rep.Status, rep.Body)
			}
			if h := p.health(t); h.Status != 200 {
				t.Fatalf("/health after one failure: %d %s", h.Status, h.Body)
			}
			if rep := p.post(t, "/v1/completions", oneStep); rep.Status != 200 {
				t.Fatalf("#2 after the failure: %d %s\n%s", rep.Status, rep.Body, p.log)
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
				if rep := p.post(t, "/v1/completions", oneStep); rep.Status != 500 {
					t.Fatalf("#%d (failing execute): %d %s", i, rep.Status, rep.Body)
				}
			}
			h := p.health(t)
			if h.Status != 503 || !strings.Contains(h.Body, `"unhealthy"`) {
				t.Fatalf("/health after 3 consecutive failures: %d %s", h.Status, h.Body)
			}
			if rep := p.post(t, "/v1/completions", oneStep); rep.Status != 200 {
				t.Fatalf("#7 after the failures: %d %s\n%s", rep.Status, rep.Body, p.log)
			}
			if h := p.health(t); h.Status != 200 {
				t.Fatalf("/health after recovery: %d %s", h.Status, h.Body)
			}

			logs := p.log.String()
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
	libs := hostsimLibs(t)
	tiny := bundle(t)
	// One sequence at a time: the queue's one place is all there is (with
	// free sequence slots a burst is admitted beyond queue_length).
	cfg := config{Bundle: tiny, Extra: "engine:\n  queue_length: 1\n  max_sequences: 1"}.write(t, libs)
	p := serve(t, cfg, true, "HOSTSIM_LATENCY_US_DECODE=50000", "HOSTSIM_LATENCY_US_LMHEAD=50000")

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
	queued := make(chan reply, 1)
	go func() {
		req, _ := http.NewRequest("POST", p.URL+"/v1/completions", strings.NewReader(oneStep))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			queued <- reply{Body: err.Error()}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		queued <- reply{resp.StatusCode, resp.Header, string(b)}
	}()
	end := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.metrics(t), "\nhexserve_queue_depth{model=\"tinyllama-public\"} 1\n") {
		if time.Now().After(end) {
			t.Fatalf("the second request never queued")
		}
		time.Sleep(20 * time.Millisecond)
	}
	rep := p.post(t, "/v1/completions", oneStep)
	if rep.Status != 503 || rep.Header.Get("Retry-After") == "" || !strings.Contains(rep.Body, "server_overloaded") {
		t.Fatalf("third request with a full queue: %d %v %s", rep.Status, rep.Header, rep.Body)
	}

	cancel()
	resp.Body.Close()
	if rep := testwait.Recv(t, queued, 5*time.Second, "the queued request after the disconnect"); rep.Status != 200 {
		t.Fatalf("queued request: %d %s", rep.Status, rep.Body)
	}
	// The abandoned request (≥ 200 × 100 ms left) frees the model: the next
	// one-token request finishes in a few graph calls.
	start = time.Now()
	if rep := p.post(t, "/v1/completions", oneStep); rep.Status != 200 {
		t.Fatalf("request after the disconnect: %d %s", rep.Status, rep.Body)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("request after the disconnect took %v", d)
	}
}
