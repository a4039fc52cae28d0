package upstream

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// echoing is an upstream that names its key and address in everything it
// sends: error events inside a 200 stream, a whole reply's error member, a
// streamed chunk's text. The path picks the reply; a path ending in
// "-escaped" writes the JSON strings with every other letter and digit as
// a \uXXXX escape (and "/" as "\/"), as an encoder may.
func echoing(t *testing.T) (*httptest.Server, *string) {
	t.Helper()
	addr := new(string)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		leak := fmt.Sprintf("key=Bearer %s url=http://%s/v1 at %s, escaped http:\\/\\/%s\\/v1", testKey, *addr, *addr, *addr)
		quote := strconv.Quote
		path, escaped := strings.CutSuffix(r.URL.Path, "-escaped")
		if escaped {
			quote = uEscape
		}
		switch {
		case strings.HasSuffix(path, "/stream-error"):
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n")
			fmt.Fprintf(w, "data: {\"error\":{\"message\":%s}}\n\n", quote(leak))
			fmt.Fprint(w, "data: [DONE]\n\n")
		case strings.HasSuffix(path, "/stream-text"):
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, ": comment %s\n\n", leak)
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":%s}}]}\n\n", quote(leak))
			fmt.Fprint(w, "data: [DONE]\n\n")
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"choices":[],"error":{"message":%s}}`, quote(leak))
		}
	}))
	t.Cleanup(up.Close)
	*addr = up.Listener.Addr().String()
	return up, addr
}

// uEscape is s as a JSON string with every other letter or digit written
// as a \uXXXX escape (in both hex cases) and each "/" as "\/".
func uEscape(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i, c := range []byte(strconv.Quote(s)[1 : len(strconv.Quote(s))-1]) {
		switch {
		case c == '/':
			b.WriteString(`\/`)
		case i%2 == 0 && ('a' <= c && c <= 'z' || '0' <= c && c <= '9'):
			fmt.Fprintf(&b, `\u%04x`, c)
		case i%2 == 0 && 'A' <= c && c <= 'Z':
			fmt.Fprintf(&b, `\u%04X`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// jsonEscape matches a JSON \uXXXX or \/ escape.
var jsonEscape = regexp.MustCompile(`\\u[0-9a-fA-F]{4}|\\/`)

// leaks reports what of the key and the address s holds, as written or
// with JSON escapes.
func leaks(s, addr string) []string {
	host, port, _ := strings.Cut(addr, ":")
	decoded := jsonEscape.ReplaceAllStringFunc(s, func(e string) string {
		if e == `\/` {
			return "/"
		}
		r, _ := strconv.ParseUint(e[2:], 16, 32)
		return string(rune(r))
	})
	var out []string
	for _, secret := range []string{testKey, addr, host, ":" + port} {
		if strings.Contains(s, secret) || strings.Contains(decoded, secret) {
			out = append(out, secret)
		}
	}
	return out
}

// TestNoLeak: an upstream that echoes its key and address in a 200 stream's
// error event, a streamed chunk, a comment line and a whole reply: neither
// reaches the client (Forward) or the caller of Chunks (who may log it),
// nor the text of a transport error.
func TestNoLeak(t *testing.T) {
	up, addr := echoing(t)
	c := newClient(t, up.URL+"/v1", Options{})
	for _, path := range []string{"/stream-error", "/stream-text", "/whole", "/stream-error-escaped", "/stream-text-escaped", "/whole-escaped"} {
		t.Run("forward"+path, func(t *testing.T) {
			status, hdr, body := post(t, front(t, c, path).URL, `{"model":"local"}`)
			if status != 200 || !strings.Contains(body, "[upstream]") {
				t.Fatalf("%d %s", status, body)
			}
			if l := leaks(body+fmt.Sprint(hdr), *addr); l != nil {
				t.Errorf("the client saw %q in %s", l, body)
			}
		})
		t.Run("chunks"+path, func(t *testing.T) {
			var got strings.Builder
			err := c.Chunks(httptest.NewRecorder(), httptest.NewRequest("POST", "/x", nil), path, []byte(`{"model":"local","stream":true}`),
				func(b []byte) error { got.Write(b); return nil })
			if err != nil {
				got.WriteString(err.Error())
				var e *Error
				if errors.As(err, &e) && e.Unwrap() != nil {
					got.WriteString(e.Unwrap().Error())
				}
			}
			if l := leaks(got.String(), *addr); l != nil {
				t.Errorf("Chunks passed on %q in %s", l, got.String())
			}
		})
	}
	t.Run("transport error", func(t *testing.T) {
		down := newClient(t, "http://127.0.0.1:1/v1", Options{})
		err := down.Forward(httptest.NewRecorder(), httptest.NewRequest("POST", "/x", nil), "/completions", []byte(`{}`), "local")
		var e *Error
		if !errors.As(err, &e) || e.Unwrap() == nil {
			t.Fatalf("err %v", err)
		}
		if l := leaks(e.Error()+e.Unwrap().Error(), "127.0.0.1:1"); l != nil {
			t.Errorf("the logged cause names %q: %s", l, e.Unwrap())
		}
	})
}

// TestBrokenReply: a 2xx reply that cannot be what was asked for is a 502
// (before the reply started) or an error frame (inside a stream), never an
// empty success.
func TestBrokenReply(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch strings.TrimPrefix(r.URL.Path, "/v1") {
		case "/json/chat/completions":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"x","choices":[]}`)
		case "/empty/chat/completions":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{}`)
		case "/invalid/chat/completions":
			fmt.Fprint(w, `{"id":"x","choi`)
		case "/no-events/chat/completions":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, ": nothing\n\n")
		case "/bad-event/chat/completions":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"choices\":[]}\n\ndata: {nope\n\ndata: [DONE]\n\n")
		}
	}))
	defer up.Close()
	c := newClient(t, up.URL+"/v1", Options{})
	cases := []struct {
		prefix, body string
		status       int
		want         string // in the body
	}{
		{"/json", `{"model":"local","stream":true}`, 502, "a reply that is not a stream"},
		{"/empty", `{"model":"local","stream":true}`, 502, "a reply that is not a stream"},
		{"/empty", `{"model":"local"}`, 502, "a reply without choices"},
		{"/invalid", `{"model":"local"}`, 502, "not a JSON object"},
		{"/bad-event", `{"model":"local","stream":true}`, 200, `"message":"The model ` + "`local`" + ` sent an event that is not JSON."`},
		{"/json", `{"model":"local"}`, 200, `"choices":[]`},
	}
	for _, tc := range cases {
		t.Run("forward"+tc.prefix+tc.body, func(t *testing.T) {
			status, _, body := post(t, front(t, c, tc.prefix+"/chat/completions").URL, tc.body)
			if status != tc.status || !strings.Contains(body, tc.want) {
				t.Errorf("got %d %s, want %d with %q", status, body, tc.status, tc.want)
			}
		})
	}
	for _, prefix := range []string{"/json", "/empty", "/invalid", "/no-events"} {
		t.Run("chunks"+prefix, func(t *testing.T) {
			events := 0
			err := c.Chunks(httptest.NewRecorder(), httptest.NewRequest("POST", "/x", nil), prefix+"/chat/completions",
				[]byte(`{"model":"local","stream":true}`), func([]byte) error { events++; return nil })
			var e *Error
			if !errors.As(err, &e) || e.Status != http.StatusBadGateway || events != 0 {
				t.Errorf("err %v after %d events, want a 502", err, events)
			}
		})
	}
}

// TestBudget: replies that never end, buffered by several clients sharing
// one budget, stop at the budget (503 upstream_busy) and hand all of it
// back; a request within the budget still gets its reply.
func TestBudget(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if strings.HasSuffix(r.URL.Path, "/ok") {
			fmt.Fprint(w, `{"choices":[]}`)
			return
		}
		if strings.Contains(r.URL.Path, "stream") {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: ")
		}
		chunk := strings.Repeat("x", 32<<10)
		for r.Context().Err() == nil {
			if _, err := fmt.Fprint(w, chunk); err != nil {
				return
			}
		}
	}))
	defer up.Close()
	budget := NewBudget(4 << 20)
	a := newClient(t, up.URL, Options{Budget: budget, Timeout: 20 * time.Second})
	b := newClient(t, up.URL, Options{Budget: budget, Timeout: 20 * time.Second})
	for _, c := range []struct {
		name, path string
		client     *Client
		status     int
	}{
		{"whole", "/endless", a, 503},
		{"stream line", "/stream", b, 200}, // the stream has started: an error frame
		{"within", "/ok", a, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, _, body := post(t, front(t, c.client, c.path).URL, `{"model":"local"}`)
			if status != c.status {
				t.Errorf("got %d %.200s", status, body)
			}
			if c.status != 200 || c.path == "/stream" {
				if !strings.Contains(body, "server.relay_memory") {
					t.Errorf("body %.200s does not name the budget", body)
				}
			}
		})
	}
	events := 0
	err := a.Chunks(httptest.NewRecorder(), httptest.NewRequest("POST", "/x", nil), "/stream", []byte(`{"model":"local","stream":true}`),
		func([]byte) error { events++; return nil })
	var e *Error
	if !errors.As(err, &e) || e.Status != 503 || e.Code != "upstream_busy" {
		t.Errorf("Chunks: %v", err)
	}
	if u := budget.Used(); u != 0 {
		t.Errorf("%d bytes still held", u)
	}
}

// TestScrub: the key and the address go however JSON spells them, whole
// (a URL with its host), and nothing else does.
func TestScrub(t *testing.T) {
	c, err := New(Options{ID: "local", BaseURL: "http://10.1.2.3:8080/v1", APIKey: "sk-\u00e9\U0001F600z", Model: "remote"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{"plain sk-\u00e9\U0001F600z", "plain [upstream]"},
		{`hex \u0073k-\u00E9\ud83d\ude00\u007a`, `hex [upstream]`},
		{`url http:\/\/10.1.2.3:8080\/v1 and 10.1.2.3`, `url [upstream] and [upstream]`},
		{`esc http\u003a//\u0031\u0030.1.2.3:8080/v1!`, `esc [upstream]!`},
		{`twice 10.1.2.310.1.2.3`, `twice [upstream][upstream]`},
		{`not an escape \\u0073k-\u00e9\ud83d\ude00z`, `not an escape \\u0073k-\u00e9\ud83d\ude00z`},
		{`not json \u00zz \u0031\u0030.1.2.3 "\n"`, `not json \u00zz [upstream] "\n"`},
	} {
		if got := c.Scrub(tc.in); got != tc.want {
			t.Errorf("Scrub(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
