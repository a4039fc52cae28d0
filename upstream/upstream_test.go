package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hexserve/hexserve/internal/testhttp"
)

const testKey = "sk-up-7f3a"

// front serves c's relay for path at /v1/x, as hexserve's server does.
func front(t testing.TB, c *Client, path string) *httptest.Server {
	t.Helper()
	f := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := c.Forward(w, r, path, body, "local"); err != nil {
			var e *Error
			status := 499
			if errors.As(err, &e) {
				status = e.Status
			}
			w.WriteHeader(status)
			fmt.Fprint(w, err.Error())
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func newClient(t testing.TB, base string, opts Options) *Client {
	t.Helper()
	opts.ID, opts.BaseURL, opts.APIKey, opts.Model = "local", base, testKey, "remote"
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func post(t testing.TB, url, body string, header ...string) (int, http.Header, string) {
	t.Helper()
	r := testhttp.Do(t, "POST", url, body, header...)
	return r.Status, r.Header, string(r.Body)
}

// TestForward checks what goes up (the model renamed, the upstream's key
// and not the client's, the request id) and what comes back (the status,
// the body with the model renamed back, scrubbed errors).
func TestForward(t *testing.T) {
	var got struct {
		auth, id, model, path string
	}
	var addr string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Model, Prompt string }
		json.NewDecoder(r.Body).Decode(&req)
		got.auth, got.id, got.model, got.path = r.Header.Get("Authorization"), r.Header.Get("X-Request-Id"), req.Model, r.URL.Path
		switch req.Prompt {
		case "ok":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"x","model":"remote","choices":[{"text":"\"model\":\"remote\" stays"}]}`)
		case "spaced":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id": "x", "model": "remote", "choices": []}`)
		case "bad":
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"error":{"message":"key %s at http://%s/v1 or 10.1.2.3:8000 refused","param":"temperature"}}`, testKey, addr)
		case "denied":
			w.WriteHeader(401)
			fmt.Fprint(w, `{"error":{"message":"Incorrect API key provided."}}`)
		case "crash":
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(500)
			fmt.Fprint(w, `<html>nginx at `+addr+`</html>`)
		}
	}))
	defer up.Close()
	addr = up.Listener.Addr().String()
	f := front(t, newClient(t, up.URL+"/v1", Options{}), "/completions")
	cases := []struct {
		prompt string
		status int
		want   string
	}{
		{"ok", 200, `{"id":"x","model":"local","choices":[{"text":"\"model\":\"remote\" stays"}]}`},
		{"spaced", 200, `{"id": "x", "model":"local", "choices": []}`},
		{"bad", 400, `{"error":{"message":"key [upstream] at [upstream] or [upstream] refused","param":"temperature"}}`},
		{"crash", 502, "The model `local` failed with status 500."},
		{"denied", 502, "The model `local` refused this server's upstream key (status 401); check upstream.api_key_env or api_key_file."},
	}
	for _, c := range cases {
		t.Run(c.prompt, func(t *testing.T) {
			status, _, body := post(t, f.URL, fmt.Sprintf(`{"model":"local","prompt":%q}`, c.prompt),
				"Authorization", "Bearer client-key", "X-Request-Id", "rid-1")
			if status != c.status || body != c.want {
				t.Errorf("got %d %s\nwant %d %s", status, body, c.status, c.want)
			}
			if got.auth != "Bearer "+testKey || got.id != "rid-1" || got.model != "remote" || got.path != "/v1/completions" {
				t.Errorf("the upstream got %+v", got)
			}
		})
	}
}

// TestStreamUnbuffered checks that each SSE event reaches the client
// before the upstream sends the next: the upstream waits for the client to
// see event i before it writes event i+1.
func TestStreamUnbuffered(t *testing.T) {
	seen := make(chan int)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < 3; i++ {
			fmt.Fprintf(w, "data: {\"model\":\"remote\",\"i\":%d}\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-seen:
			case <-time.After(5 * time.Second):
				return
			}
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer up.Close()
	f := front(t, newClient(t, up.URL, Options{}), "/chat/completions")
	resp, err := http.Post(f.URL, "application/json", strings.NewReader(`{"model":"local","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var got []string
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			got = append(got, line)
			if strings.Contains(line, `"i":`) {
				seen <- len(got)
			}
		}
	}
	want := []string{`data: {"model":"local","i":0}`, `data: {"model":"local","i":1}`, `data: {"model":"local","i":2}`, "data: [DONE]"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stream:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestFailures checks the errors before a reply (no address in them) and
// a stream the timeout cuts.
func TestFailures(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	down := "http://" + ln.Addr().String()
	ln.Close()
	block := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if strings.Contains(r.URL.Path, "stream") {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {}\n\n")
			w.(http.Flusher).Flush()
		}
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer func() { close(block); slow.Close() }()
	cases := []struct {
		name, base, path string
		opts             Options
		status           int
		want             string
	}{
		{"down", down, "/completions", Options{}, 502, "The model `local` could not be reached."},
		{"timeout", slow.URL, "/completions", Options{Timeout: 200 * time.Millisecond}, 504, "The model `local` did not answer within 200ms."},
		{"stream timeout", slow.URL, "/stream", Options{Timeout: 200 * time.Millisecond}, 200,
			"data: {}\n\ndata: {\"error\":{\"code\":\"upstream_timeout\",\"message\":\"The model `local` did not finish within 200ms.\",\"param\":null,\"type\":\"server_error\"}}\n\ndata: [DONE]\n\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := front(t, newClient(t, c.base, c.opts), c.path)
			status, _, body := post(t, f.URL, `{"model":"local"}`)
			if status != c.status || body != c.want {
				t.Errorf("got %d %q\nwant %d %q", status, body, c.status, c.want)
			}
		})
	}
}

// TestMaxInFlight checks the in-flight cap: a second request while one is
// forwarded gets 503 with Retry-After.
func TestMaxInFlight(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		fmt.Fprint(w, `{"choices":[]}`)
	}))
	defer up.Close()
	c := newClient(t, up.URL, Options{MaxInFlight: 1})
	f := front(t, c, "/completions")
	done := make(chan int)
	go func() { s, _, _ := post(t, f.URL, `{"model":"local"}`); done <- s }()
	<-entered
	rec := httptest.NewRecorder()
	err := c.Forward(rec, httptest.NewRequest("POST", "/", nil), "/completions", []byte(`{}`), "local")
	var e *Error
	if !errors.As(err, &e) || e.Status != 503 || e.RetryAfter != 1 {
		t.Errorf("second request: %v", err)
	}
	close(release)
	if s := <-done; s != 200 {
		t.Errorf("first request: %d", s)
	}
}

// TestClientGone checks that a client leaving cancels the upstream request.
func TestClientGone(t *testing.T) {
	cancelled := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // net/http notices a closed connection once the body is read
		<-r.Context().Done()
		close(cancelled)
	}))
	defer up.Close()
	f := front(t, newClient(t, up.URL, Options{}), "/completions")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", f.URL, strings.NewReader(`{"model":"local"}`))
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("the request did not fail")
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not cancelled")
	}
}

func TestKeyFrom(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/key"
	if err := writeFile(file, "  sk-file \nsecond line\n"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HEXSERVE_TEST_UPSTREAM_KEY", "sk-env")
	cases := []struct {
		env, path, want string
		fails           bool
	}{
		{"HEXSERVE_TEST_UPSTREAM_KEY", "", "sk-env", false},
		{"", file, "sk-file", false},
		{"", "", "", false},
		{"HEXSERVE_TEST_UNSET_KEY", "", "", true},
		{"", dir + "/missing", "", true},
	}
	for _, c := range cases {
		got, err := KeyFrom(c.env, c.path)
		if got != c.want || (err != nil) != c.fails {
			t.Errorf("KeyFrom(%q, %q) = %q, %v", c.env, c.path, got, err)
		}
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }

// TestHostileUpstream checks the bounds against an upstream that misbehaves:
// an endless line or an endless stream of events on the converted path
// (Chunks) ends at MaxResponseBytes with a 502, and a redirect, whose body
// and Location name addresses, is a 502 that says neither, on both paths.
func TestHostileUpstream(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch {
		case strings.HasSuffix(r.URL.Path, "/redirect"):
			w.Header().Set("Location", "http://10.1.2.3:9999/secret")
			w.WriteHeader(http.StatusFound)
			fmt.Fprint(w, "moved to http://10.1.2.3:9999/secret")
			return
		case strings.HasSuffix(r.URL.Path, "/line"):
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: ")
		default:
			w.Header().Set("Content-Type", "text/event-stream")
		}
		chunk := strings.Repeat("x", 32<<10)
		if strings.HasSuffix(r.URL.Path, "/events") {
			chunk = "data: {\"choices\":[]}\n\n"
		}
		for r.Context().Err() == nil {
			if _, err := fmt.Fprint(w, chunk); err != nil {
				return
			}
		}
	}))
	defer up.Close()
	c := newClient(t, up.URL, Options{MaxResponseBytes: 1 << 20, Timeout: 20 * time.Second})
	for _, path := range []string{"/line", "/events", "/redirect"} {
		t.Run("chunks"+path, func(t *testing.T) {
			var events int
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("POST", "/x", nil)
			err := c.Chunks(rec, req, path, []byte(`{"model":"local","stream":true}`), func([]byte) error { events++; return nil })
			var e *Error
			if !errors.As(err, &e) || e.Status != http.StatusBadGateway {
				t.Fatalf("err %v (after %d events), want a 502", err, events)
			}
			if strings.Contains(e.Message, "10.1.2.3") || strings.Contains(e.Message, "127.0.0.1") {
				t.Errorf("the error names an address: %q", e.Message)
			}
		})
	}
	t.Run("forward/redirect", func(t *testing.T) {
		f := front(t, c, "/redirect")
		status, h, body := post(t, f.URL, `{"model":"local"}`)
		if status != http.StatusBadGateway || strings.Contains(body, "10.1.2.3") || h.Get("Location") != "" {
			t.Errorf("got %d %q Location %q, want a 502 naming no address", status, body, h.Get("Location"))
		}
	})
}

// TestReplySizeLimit: MaxResponseBytes caps the reply's own size, a reply
// of exactly that size relays whole, one byte more is a 502; the copies
// made of it (joining its pieces, scrubbing) count toward the server's
// budget only. Before, the joined copy counted against the request's limit
// too, so a reply over about half the limit was refused.
func TestReplySizeLimit(t *testing.T) {
	const limit = 1 << 20
	var size int
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		pad := size - len(`{"choices":[],"x":""}`)
		fmt.Fprintf(w, `{"choices":[],"x":"%s"}`, strings.Repeat("a", pad))
	}))
	defer up.Close()
	budget := NewBudget(3 * limit)
	c := newClient(t, up.URL, Options{MaxResponseBytes: limit, Budget: budget, Timeout: 20 * time.Second})
	f := front(t, c, "/chat/completions")
	for _, tc := range []struct {
		size   int
		status int
	}{
		{limit * 6 / 10, 200},
		{limit, 200},
		{limit + 1, http.StatusBadGateway},
	} {
		size = tc.size
		status, _, body := post(t, f.URL, `{"model":"local"}`)
		if status != tc.status || status == 200 && len(body) != tc.size {
			t.Errorf("a %d-byte reply: %d, %d bytes; want %d", tc.size, status, len(body), tc.status)
		}
		// (The relay releases its hold as Forward returns, just after the
		// client has the reply.)
		for deadline := time.Now().Add(5 * time.Second); budget.Used() != 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if used := budget.Used(); used != 0 {
			t.Errorf("a %d-byte reply: %d bytes of the budget still held", tc.size, used)
		}
	}
}
