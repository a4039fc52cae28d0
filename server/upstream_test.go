package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/upstream"
)

// fakeRelay records what it is asked to forward and answers with err or a
// fixed reply.
type fakeRelay struct {
	path, body, servedAs string
	err                  error
	down                 bool
}

func (f *fakeRelay) Forward(w http.ResponseWriter, r *http.Request, path string, body []byte, servedAs string) error {
	f.path, f.body, f.servedAs = path, string(body), servedAs
	if f.err != nil {
		return f.err
	}
	writeJSON(w, http.StatusOK, map[string]string{"model": servedAs})
	return nil
}

func (f *fakeRelay) Reachable(context.Context) error {
	if f.down {
		return errors.New("unreachable")
	}
	return nil
}

// TestUpstreamRouting: requests naming an upstream are forwarded, a local
// model's failure goes to its fallback only when the policy covers it, and
// without a policy the error is today's. testModel has no engine, so its
// requests fail with model_loading (the "unavailable" reason).
func TestUpstreamRouting(t *testing.T) {
	chat := func(m string) string {
		return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, m)
	}
	cases := []struct {
		name      string
		when      []string // nil: no fallback
		path      string
		body      string
		relayErr  error
		status    int
		forwarded string // the path forwarded; "": none
		fallback  string // X-Hexserve-Fallback
	}{
		{"upstream chat", nil, "/v1/chat/completions", chat("big"), nil, 200, "/chat/completions", ""},
		{"upstream alias", nil, "/v1/completions", `{"model":"llama-70b","prompt":"x"}`, nil, 200, "/completions", ""},
		{"upstream responses", nil, "/v1/responses", `{"model":"big","input":"x"}`, nil, 200, "/responses", ""},
		{"previous_response_id", nil, "/v1/responses", `{"model":"big","input":"x","previous_response_id":"resp_1"}`, nil, 400, "", ""},
		{"no policy", nil, "/v1/chat/completions", chat(model), nil, 503, "", ""},
		{"policy covers", []string{"unavailable"}, "/v1/chat/completions", chat(model), nil, 200, "/chat/completions", "unavailable"},
		{"policy of all", []string{}, "/v1/chat/completions", chat("gpt-4o-mini"), nil, 200, "/chat/completions", "unavailable"},
		{"policy does not cover", []string{"queue_full"}, "/v1/chat/completions", chat(model), nil, 503, "", ""},
		{"unknown model", []string{}, "/v1/chat/completions", chat("nope"), nil, 404, "", ""},
		{"bad json", []string{}, "/v1/chat/completions", `{"model":`, nil, 400, "", ""},
		{"ollama chat", []string{}, "/api/chat", chat("big:latest"), nil, 400, "", ""},
		{"ollama no fallback", []string{}, "/api/chat", chat(model), nil, 503, "", ""},
		{"anthropic", []string{}, "/v1/messages", `{"model":"big","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, nil, 400, "", ""},
		{"upstream timeout", nil, "/v1/chat/completions", chat("big"),
			&upstream.Error{Status: 504, Code: "upstream_timeout", Message: "The model `big` did not answer within 1s."}, 504, "/chat/completions", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			relay := &fakeRelay{err: c.relayErr}
			opts := Options{Upstreams: []Upstream{{ID: "big", Aliases: []string{"llama-70b"}, Relay: relay}}}
			if c.when != nil {
				opts.Fallbacks = []Fallback{{Model: model, Aliases: []string{"gpt-4o-mini"}, To: "big", When: c.when}}
			}
			s, logBuf := newTest(t, opts)
			rec := do(s, "POST", c.path, c.body, "Content-Type", "application/json")
			if rec.Code != c.status || relay.path != c.forwarded || rec.Header().Get(HeaderFallback) != c.fallback {
				t.Fatalf("%d %q (forwarded %q, fallback %q)", rec.Code, rec.Body, relay.path, rec.Header().Get(HeaderFallback))
			}
			if c.forwarded != "" && (relay.body != c.body || relay.servedAs != "big" || rec.Header().Get(HeaderServedBy) != "big") {
				t.Errorf("forwarded %q as %q, served by %q", relay.body, relay.servedAs, rec.Header().Get(HeaderServedBy))
			}
			if logged := strings.Contains(logBuf.String(), `"served_by":"big"`); logged != (c.forwarded != "") {
				t.Errorf("access log (served_by %v): %s", logged, logBuf)
			}
			if rec.Code >= 400 && strings.HasPrefix(c.path, "/v1/messages") && !strings.HasPrefix(rec.Body.String(), `{"type":"error","error":{"type":"invalid_request_error"`) {
				t.Errorf("not Anthropic's error shape: %s", rec.Body)
			}
			if rec.Code >= 400 && !strings.HasPrefix(c.path, "/api/") && !strings.HasPrefix(c.path, "/v1/messages") {
				apiErr(t, rec) // the OpenAI error shape
			}
			if rec.Code >= 400 && strings.HasPrefix(c.path, "/api/") && !strings.HasPrefix(rec.Body.String(), `{"error":"`) {
				t.Errorf("not Ollama's error shape: %s", rec.Body)
			}
		})
	}
}

// TestUpstreamListing: /v1/models marks upstreams, /health reports their
// reachability and stays 200 when one is down.
func TestUpstreamListing(t *testing.T) {
	s, _ := newTest(t, Options{Upstreams: []Upstream{{ID: "big", Relay: &fakeRelay{}}, {ID: "gone", Relay: &fakeRelay{down: true}}}})
	list := do(s, "GET", "/v1/models", "").Body.String()
	if !strings.Contains(list, `{"id":"big","object":"model","created":`) || !strings.Contains(list, `"owned_by":"upstream","status":"upstream","loaded":false,"upstream":true}`) {
		t.Errorf("/v1/models: %s", list)
	}
	if one := do(s, "GET", "/v1/models/gone", ""); one.Code != 200 || !strings.Contains(one.Body.String(), `"upstream":true`) {
		t.Errorf("/v1/models/gone: %d %s", one.Code, one.Body)
	}
	h := do(s, "GET", "/health", "")
	if h.Code != 200 || !strings.Contains(h.Body.String(), `"upstreams":{"big":{"reachable":true},"gone":{"error":"unreachable","reachable":false}}`) {
		t.Errorf("/health: %d %s", h.Code, h.Body)
	}
}
