package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hexserve/hexserve/internal/syncbuf"
	"github.com/hexserve/hexserve/tokenizer/tokenizertest"
	"github.com/rs/zerolog"
)

var testTokenizer = tokenizertest.Llama32

func testModel(t testing.TB) *Model {
	return &Model{ID: model, Aliases: []string{"gpt-4o-mini"}, Created: time.Unix(1700000000, 0),
		ContextLen: 512, Tokenizer: testTokenizer(t)}
}

// newTest returns a server with the model loaded and a buffer holding its log.
func newTest(t *testing.T, opts Options) (*Server, *syncbuf.Buffer) {
	t.Helper()
	var logBuf syncbuf.Buffer
	opts.Logger = zerolog.New(&logBuf).Level(zerolog.DebugLevel)
	s := New(opts)
	s.SetModel(testModel(t))
	return s, &logBuf
}

func do(h http.Handler, method, path, body string, hdr ...string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// apiErr decodes an OpenAI error response, failing the test if it is not one.
func apiErr(t *testing.T, rec *httptest.ResponseRecorder) errorFields {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, body %s", ct, rec.Body)
	}
	return apiErrBody(t, rec.Body.Bytes())
}

// apiErrBody decodes an OpenAI error body, failing the test if it is not
// one (an error object with message, type, param and code).
func apiErrBody(t *testing.T, body []byte) errorFields {
	t.Helper()
	var raw map[string]map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	e, ok := raw["error"]
	if !ok {
		t.Fatalf("no error object in %s", body)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e[k]; !ok {
			t.Fatalf("error object lacks %q: %s", k, body)
		}
	}
	var eb errorBody
	_ = json.Unmarshal(body, &eb)
	return eb.Error
}

func str(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

func TestHealth(t *testing.T) {
	s := New(Options{Logger: zerolog.Nop()})
	rec := do(s, "GET", "/health", "")
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), `"status":"loading"`) {
		t.Fatalf("loading: %d %s", rec.Code, rec.Body)
	}
	if rec := do(s, "GET", "/v1/models", ""); rec.Code != 503 || apiErr(t, rec).Type != TypeServer || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("models while loading: %d %s", rec.Code, rec.Body)
	}
	m := testModel(t)
	var fail error
	m.Health = func() error { return fail }
	s.SetModel(m)
	if rec := do(s, "GET", "/health", ""); rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"status":"ok"}` {
		t.Fatalf("ok: %d %s", rec.Code, rec.Body)
	}
	if rec := do(s, "HEAD", "/health", ""); rec.Code != 200 {
		t.Fatalf("HEAD ok: %d %s", rec.Code, rec.Body)
	}
	fail = errors.New("graph execute failed")
	rec = do(s, "GET", "/health", "")
	if rec.Code != 503 || strings.TrimSpace(rec.Body.String()) != `{"error":"graph execute failed","status":"unhealthy"}` {
		t.Fatalf("unhealthy: %d %s", rec.Code, rec.Body)
	}
	if rec := do(s, "HEAD", "/health", ""); rec.Code != 503 {
		t.Fatalf("HEAD unhealthy: %d %s", rec.Code, rec.Body)
	}
}

func TestModels(t *testing.T) {
	s, _ := newTest(t, Options{})
	rec := do(s, "GET", "/v1/models", "")
	want := `{"object":"list","data":[{"id":"llama-3.2-1b-instruct","object":"model","created":1700000000,"owned_by":"hexserve","max_model_len":512,"status":"loaded","loaded":true}]}`
	if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != want {
		t.Fatalf("list: %d %s", rec.Code, rec.Body)
	}
	for _, id := range []string{"llama-3.2-1b-instruct", "gpt-4o-mini"} {
		rec := do(s, "GET", "/v1/models/"+id, "")
		var obj modelObject
		if err := json.Unmarshal(rec.Body.Bytes(), &obj); rec.Code != 200 || err != nil || obj.ID != id || obj.Object != "model" || obj.MaxModelLen != 512 {
			t.Errorf("get %s: %d %s", id, rec.Code, rec.Body)
		}
	}
	rec = do(s, "GET", "/v1/models/gpt-5", "")
	e := apiErr(t, rec)
	if rec.Code != 404 || str(e.Code) != "model_not_found" || e.Message != "The model `gpt-5` does not exist or you do not have access to it. This server serves llama-3.2-1b-instruct; server.model_aliases maps other names to them." {
		t.Fatalf("unknown: %d %s", rec.Code, rec.Body)
	}
}

func TestAuth(t *testing.T) {
	s, logs := newTest(t, Options{APIKeys: []string{"sk-one", "sk-two"}})
	tests := []struct {
		name   string
		method string
		path   string
		hdr    []string
		status int
	}{
		{"missing", "GET", "/v1/models", nil, 401},
		{"wrong bearer", "GET", "/v1/models", []string{"Authorization", "Bearer sk-nope"}, 401},
		{"bearer", "GET", "/v1/models", []string{"Authorization", "Bearer sk-two"}, 200},
		{"bearer lower case scheme", "GET", "/v1/models", []string{"Authorization", "bearer sk-one"}, 200},
		{"x-api-key", "GET", "/v1/models", []string{"x-api-key", "sk-one"}, 200},
		{"wrong x-api-key", "GET", "/v1/models", []string{"x-api-key", "sk-one "}, 401},
		{"prefix of a key", "GET", "/v1/models", []string{"Authorization", "Bearer sk-"}, 401},
		{"health is public", "GET", "/health", nil, 200},
		{"metrics needs a key", "GET", "/metrics", nil, 401},
		{"metrics with key", "GET", "/metrics", []string{"Authorization", "Bearer sk-one"}, 200},
		{"unknown route without key", "GET", "/nope", nil, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := do(s, tt.method, tt.path, "", tt.hdr...)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if tt.status == 401 {
				if e := apiErr(t, rec); str(e.Code) != "invalid_api_key" || e.Type != TypeInvalidRequest {
					t.Fatalf("body %s", rec.Body)
				}
			}
		})
	}
	if strings.Contains(logs.String(), "sk-one") || strings.Contains(logs.String(), "sk-two") {
		t.Error("an API key reached the log")
	}
}

func TestBodyLimit(t *testing.T) {
	s, _ := newTest(t, Options{BodyLimit: 64})
	big := `{"content":"` + strings.Repeat("a", 100) + `"}`
	// Content-Length known up front.
	rec := do(s, "POST", "/tokenize", big)
	if e := apiErr(t, rec); rec.Code != 413 || str(e.Code) != "request_too_large" || e.Type != TypeInvalidRequest {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	// Chunked body: the limit trips while decoding.
	req := httptest.NewRequest("POST", "/tokenize", io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != 413 {
		t.Fatalf("chunked: %d %s", rec.Code, rec.Body)
	}
	if rec := do(s, "POST", "/tokenize", `{"content":"hi"}`); rec.Code != 200 {
		t.Fatalf("small: %d %s", rec.Code, rec.Body)
	}
}

func TestRouting(t *testing.T) {
	s, _ := newTest(t, Options{})
	rec := do(s, "GET", "/v2/engines", "")
	if e := apiErr(t, rec); rec.Code != 404 || e.Type != TypeInvalidRequest || !strings.Contains(e.Message, "/v2/engines") {
		t.Fatalf("404: %d %s", rec.Code, rec.Body)
	}
	rec = do(s, "DELETE", "/v1/models", "")
	if e := apiErr(t, rec); rec.Code != 405 || str(e.Code) != "method_not_allowed" || rec.Header().Get("Allow") != "GET" {
		t.Fatalf("405: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	for _, path := range []string{"/tokenize", "/v1/messages", "/v1/messages/count_tokens", "/api/chat"} {
		if rec := do(s, "GET", path, ""); rec.Code != 405 || strings.Join(rec.Header().Values("Allow"), ",") != "POST" {
			t.Errorf("GET %s: %d, Allow %q", path, rec.Code, rec.Header().Values("Allow"))
		}
	}
	for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
		if rec := do(s, "POST", path, "{}"); rec.Code == 404 || rec.Code == 405 {
			t.Errorf("%s not routed: %d", path, rec.Code)
		}
	}
}

func TestPanicAndUnexpectedError(t *testing.T) {
	s, logs := newTest(t, Options{})
	s.router.Get("/test/panic", func(http.ResponseWriter, *http.Request) { panic("boom") })
	s.router.Get("/test/err", s.handle(func(http.ResponseWriter, *http.Request) error {
		return errors.New("secret detail")
	}))
	rec := do(s, "GET", "/test/panic", "")
	if e := apiErr(t, rec); rec.Code != 500 || e.Type != TypeServer {
		t.Fatalf("panic: %d %s", rec.Code, rec.Body)
	}
	if !strings.Contains(logs.String(), "handler panic") || !strings.Contains(logs.String(), "stack") {
		t.Errorf("panic not logged with its stack: %s", logs)
	}
	rec = do(s, "GET", "/test/err", "")
	if e := apiErr(t, rec); rec.Code != 500 || strings.Contains(e.Message, "secret") {
		t.Fatalf("error: %d %s", rec.Code, rec.Body)
	}
	if !strings.Contains(logs.String(), "secret detail") {
		t.Error("unexpected error details not logged")
	}
}

func TestCORS(t *testing.T) {
	tests := []struct {
		name      string
		origins   []string
		method    string
		hdr       []string
		status    int
		wantAllow string
	}{
		{"allowed", []string{"http://app.test"}, "GET", []string{"Origin", "http://app.test"}, 200, "http://app.test"},
		{"denied", []string{"http://app.test"}, "GET", []string{"Origin", "http://evil.test"}, 403, ""},
		{"not configured", nil, "GET", []string{"Origin", "http://app.test"}, 403, ""},
		{"same origin, not configured", nil, "GET", []string{"Origin", "http://example.com"}, 200, ""},
		{"wildcard", []string{"*"}, "GET", []string{"Origin", "http://any.test"}, 200, "*"},
		{"preflight allowed", []string{"http://app.test"}, "OPTIONS",
			[]string{"Origin", "http://app.test", "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type"},
			204, "http://app.test"},
		{"preflight denied", []string{"http://app.test"}, "OPTIONS",
			[]string{"Origin", "http://evil.test", "Access-Control-Request-Method", "POST"}, 204, ""},
		{"no origin, configured", []string{"http://app.test"}, "GET", nil, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Keys are set: a preflight carries none and must still pass.
			s, _ := newTest(t, Options{CORSOrigins: tt.origins, APIKeys: []string{"k"}})
			rec := do(s, tt.method, "/v1/models", "", append(tt.hdr, "Authorization", "Bearer k")...)
			if tt.method == "OPTIONS" {
				rec = do(s, tt.method, "/v1/models", "", tt.hdr...)
			}
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d", rec.Code, tt.status)
			}
			if got := rec.Header().Get("Access-Control-Allow-Origin"); got != tt.wantAllow {
				t.Fatalf("Allow-Origin %q, want %q", got, tt.wantAllow)
			}
			if tt.status == 204 && tt.wantAllow != "" {
				if rec.Header().Get("Access-Control-Allow-Methods") == "" ||
					rec.Header().Get("Access-Control-Allow-Headers") != corsHeaders {
					t.Fatalf("preflight headers: %v", rec.Header())
				}
			}
			if vary := rec.Header().Values("Vary"); (len(tt.origins) > 0) != slices.Contains(vary, "Origin") {
				t.Fatalf("Vary %q with origins %q", vary, tt.origins)
			}
		})
	}
}

// TestCORSAllowHeaders: a preflight allows the fixed list of headers the
// OpenAI SDKs send, whatever it asks for; a browser then refuses a request
// carrying any other (a cookie, "*"), and each SDK header is in the list.
func TestCORSAllowHeaders(t *testing.T) {
	s, _ := newTest(t, Options{CORSOrigins: []string{"http://app.test"}})
	allowed := make(map[string]bool)
	for _, h := range strings.Split(corsHeaders, ", ") {
		allowed[strings.ToLower(h)] = true
	}
	for _, asked := range []string{"cookie", "*", "authorization, cookie", "x-evil", "authorization,content-type,x-stainless-os,x-stainless-retry-count"} {
		rec := do(s, "OPTIONS", "/v1/chat/completions", "", "Origin", "http://app.test",
			"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", asked)
		if got := rec.Header().Get("Access-Control-Allow-Headers"); got != corsHeaders {
			t.Errorf("asked %q: allowed %q, want the fixed list", asked, got)
		}
	}
	for _, h := range []string{"cookie", "*", "x-evil"} {
		if allowed[h] {
			t.Errorf("%q is allowed", h)
		}
	}
	// Sent by the official JS and Python SDKs.
	for _, h := range []string{"authorization", "content-type", "accept", "x-api-key", "openai-organization", "openai-project",
		"x-stainless-lang", "x-stainless-package-version", "x-stainless-os", "x-stainless-arch", "x-stainless-runtime",
		"x-stainless-runtime-version", "x-stainless-retry-count", "x-stainless-timeout", "x-stainless-helper-method"} {
		if !allowed[h] {
			t.Errorf("SDK header %q not allowed", h)
		}
	}
}

func TestRequestID(t *testing.T) {
	s, logs := newTest(t, Options{})
	rec := do(s, "GET", "/v1/models", "", "X-Request-Id", "abc-123")
	if got := rec.Header().Get("X-Request-Id"); got != "abc-123" {
		t.Fatalf("echo: %q", got)
	}
	if !strings.Contains(logs.String(), `"request_id":"abc-123"`) {
		t.Errorf("access log lacks the id: %s", logs)
	}
	for _, bad := range []string{"", "has space", strings.Repeat("x", 200), "<script>"} {
		rec := do(s, "GET", "/v1/models", "", "X-Request-Id", bad)
		if got := rec.Header().Get("X-Request-Id"); got == bad || len(got) != 36 {
			t.Errorf("incoming %q: got %q, want a fresh UUID", bad, got)
		}
	}
}

func TestMetrics(t *testing.T) {
	s, _ := newTest(t, Options{})
	do(s, "GET", "/v1/models", "")
	do(s, "GET", "/v1/models/x", "")
	do(s, "GET", "/nope", "")
	do(s, "BREW", "/nope", "")
	do(s, "HEAD", "/health", "")
	rec := do(s, "GET", "/metrics", "")
	body := rec.Body.String()
	for _, want := range []string{
		`hexserve_http_requests_total{method="GET",route="/v1/models",status="200"} 1`,
		`hexserve_http_requests_total{method="GET",route="/v1/models/{id}",status="404"} 1`,
		`hexserve_http_requests_total{method="GET",route="unmatched",status="404"} 1`,
		`hexserve_http_request_duration_seconds_count{method="GET",route="/v1/models"} 1`,
		`hexserve_http_requests_in_flight 1`, // the /metrics request itself
		`hexserve_http_requests_total{method="other",route="unmatched",status="405"} 1`,
		`hexserve_http_requests_total{method="HEAD",route="/health",status="200"} 1`,
		`hexserve_structured_cache_bytes{kind="pattern"} 0`,
		`hexserve_structured_cache_bytes{kind="vocab"} 0`,
		`hexserve_structured_cache_limit_bytes 6.7108864e+07`,
		`hexserve_schema_compile_steps_count 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
}

// Streaming handlers flush through the middleware's response wrapper.
func TestFlushThroughMiddleware(t *testing.T) {
	s, _ := newTest(t, Options{})
	var flushErr error
	s.router.Get("/test/flush", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("data: x\n\n"))
		flushErr = http.NewResponseController(w).Flush()
	})
	rec := do(s, "GET", "/test/flush", "")
	if flushErr != nil || !rec.Flushed {
		t.Fatalf("flush: %v, flushed %v", flushErr, rec.Flushed)
	}
}

func TestJSONPathAt(t *testing.T) {
	tests := []struct {
		body, field, want string
	}{
		{`{"messages":[{"role":7}]}`, "7", "messages[0].role"},
		{`{"a":{"b":[1,[2,{"c":true}]]}}`, "true", "a.b[1][1].c"},
		{`{"x":[{"y":1},{"y":{"z":1}}],"t":"s"}`, `"s"`, "t"},
		{`{"stop":{"k":1}}`, `:{`, "stop"},
	}
	for _, tc := range tests {
		off := int64(strings.Index(tc.body, tc.field) + len(tc.field))
		if got := jsonPathAt([]byte(tc.body), off); got != tc.want {
			t.Errorf("jsonPathAt(%s, after %q) = %q, want %q", tc.body, tc.field, got, tc.want)
		}
	}
}

// TestBrowserCheck: a request from another origin than the server's own and
// server.cors_origins, or (with AllowedHosts, as on a loopback listener)
// naming a Host that is neither loopback nor allowed, is a 403 in the
// shape of its API, keys or not; clients that send no Origin are served.
func TestBrowserCheck(t *testing.T) {
	s, _ := newTest(t, Options{AllowedHosts: []string{"phone.lan"}, CORSOrigins: []string{"http://app.test"}})
	chat := `{"model":"llama-3.2-1b-instruct","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name, path, host, origin string
		status                   int // 403, or 200: any other
		shape, code              string
	}{
		{"loopback IP", "/v1/chat/completions", "127.0.0.1:8080", "", 200, "", ""},
		{"localhost", "/v1/chat/completions", "localhost:8080", "", 200, "", ""},
		{"IPv6 loopback", "/v1/chat/completions", "[::1]:8080", "", 200, "", ""},
		{"a .localhost name", "/v1/chat/completions", "app.localhost", "", 200, "", ""},
		{"an allowed name", "/v1/chat/completions", "PHONE.lan:8080", "", 200, "", ""},
		{"a rebound name", "/v1/chat/completions", "attacker.example:8080", "", 403, "openai", "host_not_allowed"},
		{"a rebound name, same origin", "/v1/chat/completions", "attacker.example:8080", "http://attacker.example:8080", 403, "openai", "host_not_allowed"},
		{"a rebound name on Messages", "/v1/messages", "attacker.example", "", 403, "anthropic", ""},
		{"a rebound name on /health", "/health", "attacker.example", "", 403, "openai", "host_not_allowed"},
		{"another page", "/v1/chat/completions", "127.0.0.1:8080", "http://evil.test", 403, "openai", "origin_not_allowed"},
		{"another page on Ollama's API", "/api/chat", "127.0.0.1:8080", "http://evil.test", 403, "ollama", ""},
		{"the server's own page", "/v1/chat/completions", "127.0.0.1:8080", "http://127.0.0.1:8080", 200, "", ""},
		{"a configured origin", "/v1/chat/completions", "127.0.0.1:8080", "http://app.test", 200, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", tc.path, strings.NewReader(chat))
			if tc.path == "/health" {
				req = httptest.NewRequest("GET", tc.path, nil)
			}
			req.Host = tc.host
			req.Header.Set("Content-Type", "text/plain") // what a page sends without a preflight
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if (rec.Code == 403) != (tc.status == 403) { // (the test server has no model loaded: 503 past the check)
				t.Fatalf("%d %s, want %d", rec.Code, rec.Body, tc.status)
			}
			if tc.status == 403 {
				msg := errorMessage(t, tc.shape, rec.Body.Bytes())
				if !strings.Contains(msg, "allowed") {
					t.Errorf("message %q", msg)
				}
				if tc.code != "" && !strings.Contains(rec.Body.String(), `"code":"`+tc.code+`"`) {
					t.Errorf("code: %s", rec.Body)
				}
			}
		})
	}
	// Without AllowedHosts (a listener beyond loopback) any Host is served.
	open, _ := newTest(t, Options{})
	req := httptest.NewRequest("GET", "/v1/models", nil)
	req.Host = "phone.lan:8080"
	rec := httptest.NewRecorder()
	open.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Errorf("any Host: %d %s", rec.Code, rec.Body)
	}
}
