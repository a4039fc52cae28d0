package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/upstream"
)

// TestRelayNoLeak: an upstream that echoes its key and address (in its
// text, and in an error event inside a 200 stream) is relayed on every
// route, streamed and not: neither reaches a byte the client sees or a
// line of the log.
func TestRelayNoLeak(t *testing.T) {
	const key = "sk-up-secret-9c1d"
	var addr string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Stream bool }
		json.NewDecoder(r.Body).Decode(&req)
		leak := fmt.Sprintf("key=Bearer %s url=http://%s%s", key, addr, r.URL.Path)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"text":%q,"message":{"role":"assistant","content":%q}}],"output":[]}`, leak, leak)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", leak)
		fmt.Fprintf(w, "data: {\"error\":{\"message\":%q}}\n\n", "upstream failed: "+leak)
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer up.Close()
	addr = up.Listener.Addr().String()
	c, err := upstream.New(upstream.Options{ID: "big", BaseURL: up.URL + "/v1", APIKey: key, Model: "remote"})
	if err != nil {
		t.Fatal(err)
	}
	s, logBuf := newTest(t, Options{Upstreams: []Upstream{{ID: "big", Relay: c}}})
	chat := `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"big",` + chat + `}`},
		{"/v1/chat/completions", `{"model":"big","stream":true,` + chat + `}`},
		{"/v1/completions", `{"model":"big","prompt":"hi"}`},
		{"/v1/completions", `{"model":"big","prompt":"hi","stream":true}`},
		{"/v1/responses", `{"model":"big","input":"hi"}`},
		{"/v1/responses", `{"model":"big","input":"hi","stream":true}`},
		{"/api/chat", `{"model":"big",` + chat + `}`},
		{"/api/chat", `{"model":"big","stream":false,` + chat + `}`},
		{"/api/generate", `{"model":"big","prompt":"hi"}`},
		{"/api/generate", `{"model":"big","prompt":"hi","stream":false}`},
		{"/v1/messages", `{"model":"big","max_tokens":5,` + chat + `}`},
		{"/v1/messages", `{"model":"big","max_tokens":5,"stream":true,` + chat + `}`},
	}
	host, port, _ := strings.Cut(addr, ":")
	for _, tc := range cases {
		t.Run(tc.path+tc.body[strings.Index(tc.body, ",")+1:][:12], func(t *testing.T) {
			logBuf.Reset()
			srv := httptest.NewServer(s)
			defer srv.Close()
			resp, err := http.Post(srv.URL+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			seen := fmt.Sprintf("%d %v %s", resp.StatusCode, resp.Header, b)
			for where, text := range map[string]string{"the client": seen, "the log": logBuf.String()} {
				for _, secret := range []string{key, addr, host, ":" + port} {
					if strings.Contains(text, secret) {
						t.Errorf("%s saw %q: %s", where, secret, text)
					}
				}
			}
		})
	}
}

// TestRelayBrokenReply: an upstream that answers a streamed request with a
// body that is not a stream (invalid JSON, or {}) is a 502 in the shape of
// the API the request came in on, never an empty success.
func TestRelayBrokenReply(t *testing.T) {
	for _, reply := range []string{`{}`, `{"choi`} {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, reply)
		}))
		defer up.Close()
		c, err := upstream.New(upstream.Options{ID: "big", BaseURL: up.URL + "/v1", Model: "remote"})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := newTest(t, Options{Upstreams: []Upstream{{ID: "big", Relay: c}}})
		chat := `"messages":[{"role":"user","content":"hi"}]`
		cases := []struct{ path, body, shape string }{
			{"/v1/chat/completions", `{"model":"big",` + chat + `}`, `{"error":{"message":`},
			{"/v1/chat/completions", `{"model":"big","stream":true,` + chat + `}`, `{"error":{"message":`},
			{"/api/chat", `{"model":"big",` + chat + `}`, `{"error":"`},
			{"/api/chat", `{"model":"big","stream":false,` + chat + `}`, `{"error":"`},
			{"/api/generate", `{"model":"big","prompt":"hi","stream":false}`, `{"error":"`},
			{"/v1/messages", `{"model":"big","max_tokens":5,` + chat + `}`, `{"type":"error","error":{"type":"api_error"`},
			{"/v1/messages", `{"model":"big","max_tokens":5,"stream":true,` + chat + `}`, `{"type":"error","error":{"type":"api_error"`},
		}
		for _, tc := range cases {
			rec := do(s, "POST", tc.path, tc.body, "Content-Type", "application/json")
			if rec.Code != http.StatusBadGateway || !strings.HasPrefix(rec.Body.String(), tc.shape) {
				t.Errorf("%s %s answered %s: %d %s", tc.path, tc.body, reply, rec.Code, rec.Body)
			}
		}
	}
}
