package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/server"
)

var overloadLong = flag.Bool("overload.long", false, "run the long overload test (also HEXSERVE_LONG_TESTS=1)")

func longTests() bool { return *overloadLong || os.Getenv("HEXSERVE_LONG_TESTS") == "1" }

// cancelWatch wraps a model and records when a Step returned because its
// context ended.
type cancelWatch struct {
	inference.Model
	mu        sync.Mutex
	cancelled []time.Time
	started   []time.Time
}

func (c *cancelWatch) Step(ctx context.Context, runs []inference.Run) ([]inference.Rows, error) {
	c.mu.Lock()
	c.started = append(c.started, time.Now())
	c.mu.Unlock()
	rows, err := c.Model.Step(ctx, runs)
	if err != nil && ctx.Err() != nil {
		c.mu.Lock()
		c.cancelled = append(c.cancelled, time.Now())
		c.mu.Unlock()
	}
	return rows, err
}

// lastStart is when the most recent Step began.
func (c *cancelWatch) lastStart() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.started) == 0 {
		return time.Time{}
	}
	return c.started[len(c.started)-1]
}

func (c *cancelWatch) cancels() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.cancelled...)
}

type outcome int

const (
	complete  outcome = iota
	refused           // 503 with Retry-After
	abandoned         // the client went away
)

// streamClient posts a streaming chat request. disconnectAfter < 0 reads the
// whole stream; 0 cancels the request after delay (possibly before any
// response); k > 0 closes the connection after k frames.
func streamClient(ctx context.Context, client *http.Client, url string, disconnectAfter int, delay time.Duration) (outcome, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if disconnectAfter == 0 {
		t := time.AfterFunc(delay, cancel)
		defer t.Stop()
	}
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v1/chat/completions",
		strings.NewReader(chatBody(`"stream":true,"max_tokens":64`)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		if disconnectAfter >= 0 && errors.Is(err, context.Canceled) {
			return abandoned, nil
		}
		return 0, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusServiceUnavailable:
		b, _ := io.ReadAll(resp.Body)
		if resp.Header.Get("Retry-After") == "" || !bytes.Contains(b, []byte(`"server_overloaded"`)) {
			return 0, fmt.Errorf("503 without Retry-After or code: %v %s", resp.Header, b)
		}
		return refused, nil
	default:
		b, _ := io.ReadAll(resp.Body)
		return 0, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	frames, finished, done := 0, false, false
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			return 0, fmt.Errorf("not an SSE data line: %q", line)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		if done {
			return 0, fmt.Errorf("frame after [DONE]: %s", data)
		}
		var f struct {
			Error   json.RawMessage
			Choices []struct {
				FinishReason *string `json:"finish_reason"`
			}
		}
		if err := json.Unmarshal([]byte(data), &f); err != nil {
			return 0, fmt.Errorf("frame %q: %v", data, err)
		}
		if f.Error != nil {
			return 0, fmt.Errorf("error frame: %s", data)
		}
		for _, c := range f.Choices {
			if c.FinishReason != nil {
				finished = true
			}
		}
		frames++
		if disconnectAfter > 0 && frames >= disconnectAfter {
			return abandoned, nil // the deferred Close and cancel drop the connection
		}
	}
	if err := sc.Err(); err != nil {
		if disconnectAfter == 0 && ctx.Err() != nil {
			return abandoned, nil
		}
		return 0, err
	}
	if !done || !finished {
		if disconnectAfter == 0 && ctx.Err() != nil {
			return abandoned, nil
		}
		return 0, fmt.Errorf("incomplete stream: %d frames, finish %v, [DONE] %v", frames, finished, done)
	}
	return complete, nil
}

// waitGoroutines polls until the goroutine count is back to base.
func waitGoroutines(t *testing.T, base int, deadline time.Duration) {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		n := runtime.NumGoroutine()
		if n <= base {
			t.Logf("goroutines back to %d (baseline %d)", n, base)
			return
		}
		if time.Now().After(end) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines after %v, baseline %d:\n%s", n, deadline, base, buf)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOverload runs many concurrent streaming clients against a small
// queue, a third of them disconnecting at random (seeded) points. Every
// request completes, is refused with 503 + Retry-After, or was abandoned by
// its client; afterwards the engine is idle and healthy, a request
// succeeds, and the goroutine count returns to its baseline.
func TestOverload(t *testing.T) {
	clients, rounds, latency := 64, 1, 2*time.Millisecond
	if longTests() {
		clients, rounds, latency = 128, 10, time.Millisecond
	}
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	client := &http.Client{Transport: tr}
	r := newRig(t, rigOptions{opts: server.Options{}, engine: inference.Config{QueueLen: 4}})
	r.Model.SetLatency(latency)
	r.Model.Record(false)

	// Baseline after a warm-up request, with no idle connections left.
	if o, err := streamClient(context.Background(), client, r.URL, -1, 0); err != nil || o != complete {
		t.Fatalf("warm-up: %v %v", o, err)
	}
	tr.CloseIdleConnections()
	time.Sleep(50 * time.Millisecond)
	base := runtime.NumGoroutine()

	rng := rand.New(rand.NewPCG(20261130, 1))
	var counts [3]atomic.Int64
	for round := range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		for i := range clients {
			disc, delay := -1, time.Duration(0)
			if rng.IntN(3) == 0 {
				if rng.IntN(2) == 0 {
					disc, delay = 0, time.Duration(rng.IntN(40))*time.Millisecond
				} else {
					disc = 1 + rng.IntN(12)
				}
			}
			start := time.Duration(rng.IntN(300)) * time.Millisecond // arrivals spread over 0.3 s
			wg.Go(func() {
				time.Sleep(start)
				o, err := streamClient(context.Background(), client, r.URL, disc, delay)
				if err != nil {
					errs <- fmt.Errorf("round %d client %d (disconnect %d/%v): %w", round, i, disc, delay, err)
					return
				}
				counts[o].Add(1)
			})
		}
		// /health keeps answering 200 during the storm.
		stopProbe := make(chan struct{})
		probeErr := make(chan error, 1)
		go func() {
			defer close(probeErr)
			for {
				select {
				case <-stopProbe:
					return
				case <-time.After(20 * time.Millisecond):
				}
				resp, err := client.Get(r.URL + "/health")
				if err != nil {
					probeErr <- err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					probeErr <- fmt.Errorf("/health during the storm: %d", resp.StatusCode)
					return
				}
			}
		}()
		wg.Wait()
		close(stopProbe)
		if err := <-probeErr; err != nil {
			t.Error(err)
		}
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if t.Failed() {
			return
		}
	}
	t.Logf("%d requests: %d complete, %d refused (503), %d abandoned", clients*rounds,
		counts[complete].Load(), counts[refused].Load(), counts[abandoned].Load())
	if counts[complete].Load() == 0 || counts[refused].Load() == 0 {
		t.Errorf("expected both completed and refused requests with a queue of 4")
	}

	// The engine drains: queue empty, healthy, and a request runs.
	end := time.Now().Add(5 * time.Second)
	for r.Engine.QueueDepth() > 0 && time.Now().Before(end) {
		time.Sleep(10 * time.Millisecond)
	}
	if d := r.Engine.QueueDepth(); d != 0 {
		t.Fatalf("queue depth %d after the storm", d)
	}
	if err := r.Engine.Healthy(); err != nil {
		t.Fatalf("unhealthy after the storm: %v", err)
	}
	if o, err := streamClient(context.Background(), client, r.URL, -1, 0); err != nil || o != complete {
		t.Fatalf("request after the storm: %v %v", o, err)
	}
	tr.CloseIdleConnections()
	waitGoroutines(t, base, 5*time.Second)
}

// TestDisconnectFreesModel checks that a client that goes away mid-stream
// frees the model within one graph call: the model sees its context end
// during the Eval in flight, and the next request starts at once.
func TestDisconnectFreesModel(t *testing.T) {
	const latency = 100 * time.Millisecond
	tok := loadTok(t)
	long := tok.Encode(strings.Repeat(" word", 100), false, false)
	var watch *cancelWatch
	r := newRig(t, rigOptions{script: long, wrap: func(m inference.Model) inference.Model {
		watch = &cancelWatch{Model: m}
		return watch
	}})
	r.Model.SetLatency(latency)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			disconnectFreesModel(t, r, watch, client, stream, latency)
		})
	}
}

func disconnectFreesModel(t *testing.T, r *rig, watch *cancelWatch, client *http.Client, stream bool, latency time.Duration) {
	before := len(watch.cancels())
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", r.URL+"/v1/chat/completions",
		strings.NewReader(chatBody(fmt.Sprintf(`"stream":%v,"max_tokens":100`, stream))))
	var closed time.Time
	if stream {
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		for frames := 0; frames < 3 && sc.Scan(); {
			if sc.Text() != "" {
				frames++
			}
		}
		closed = time.Now()
		cancel()
		resp.Body.Close()
	} else {
		// A non-streamed request: the client gives up while it generates.
		time.AfterFunc(3*latency, func() { closed = time.Now(); cancel() })
		if _, err := client.Do(req); !errors.Is(err, context.Canceled) {
			t.Fatalf("want the request cancelled, got %v", err)
		}
	}

	// The model is freed within one graph call: either the Eval in flight
	// sees the context end, or the cancel lands between two calls and the
	// engine starts no further call for the request.
	time.Sleep(2 * latency)
	if seen := watch.cancels()[before:]; len(seen) > 0 {
		if d := seen[0].Sub(closed); d > latency {
			t.Errorf("model saw the disconnect after %v, more than one graph call (%v)", d, latency)
		} else {
			t.Logf("model saw the disconnect %v after the client closed", d)
		}
	} else if last := watch.lastStart(); last.After(closed) {
		t.Fatalf("the model never saw the disconnect and a call started %v after the client closed (calls %d)",
			last.Sub(closed), len(r.Model.Calls()))
	} else {
		t.Logf("the disconnect landed between calls; no call started after it")
	}
	// The next request gets its first token after about one call, not after
	// the abandoned request's remaining ~97 calls.
	start := time.Now()
	rep := r.do(t, "POST", "/v1/chat/completions", chatBody(`"max_tokens":1`))
	if rep.Status != 200 {
		t.Fatalf("next request: %d %s", rep.Status, rep.Body)
	}
	if d := time.Since(start); d > 4*latency {
		t.Errorf("next request took %v (latency %v per call)", d, latency)
	}
}
