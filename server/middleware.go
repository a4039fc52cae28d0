package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

type requestIDKey struct{}

// RequestID returns the id of the request carrying ctx ("" outside one).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// requestID takes a sane incoming X-Request-Id or makes a UUID, echoes it,
// and puts it and a logger tagged with it into the request context.
func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !saneRequestID(id) {
			id = uuid.NewString()
		}
		w.Header().Set("X-Request-Id", id)
		log := s.log.With().Str("request_id", id).Logger()
		ctx := context.WithValue(r.Context(), requestIDKey{}, id)
		next.ServeHTTP(w, r.WithContext(log.WithContext(ctx)))
	})
}

func saneRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range id {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.:", c)
		if !ok {
			return false
		}
	}
	return true
}

// accessLog logs one line per request and records the HTTP metrics. It logs
// no headers and no bodies: never an API key or prompt text.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		gone := new(bool)
		r = r.WithContext(context.WithValue(r.Context(), goneKey{}, gone))
		s.metrics.inFlight.Inc()
		defer func() {
			s.metrics.inFlight.Dec()
			d := time.Since(start)
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK // nothing written
			}
			if status < 300 && (*gone || r.Context().Err() != nil) {
				status = StatusClientClosedRequest // a reply the client left before its end (a stream)
			}
			route := chi.RouteContext(r.Context()).RoutePattern()
			if route == "" {
				route = "unmatched"
			}
			method := metricMethod(r.Method)
			s.metrics.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
			s.metrics.duration.WithLabelValues(route, method).Observe(d.Seconds())
			ev := zerolog.Ctx(r.Context()).Info()
			if route == "/health" || route == "/metrics" {
				ev = zerolog.Ctx(r.Context()).Debug() // probes would drown the log
			}
			if by := ww.Header().Get(HeaderServedBy); by != "" {
				ev = ev.Str("served_by", by) // an upstream model's id
			}
			ev.Str("method", method).Str("path", r.URL.Path).Int("status", status).
				Int("bytes", ww.BytesWritten()).Float64("duration_ms", float64(d.Microseconds())/1e3).Msg("request")
		}()
		next.ServeHTTP(ww, r)
	})
}

type goneKey struct{}

// writeDeadline bounds each write of every response (a whole reply as a
// stream's frames) by server.stream_write_timeout: a client that stops
// reading a reply larger than the socket buffers no longer holds its
// handler, its memory and its share of the server's budgets until it
// disconnects. A deadline that a connection's previous response left is
// cleared first; the last one set stays for the flush after the handler.
func (s *Server) writeDeadline(next http.Handler) http.Handler {
	timeout := s.opts.StreamWriteTimeout
	if timeout <= 0 {
		timeout = defaultStreamWriteTimeout
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Time{})
		dw := &deadlineWriter{ResponseWriter: w, rc: rc, timeout: timeout}
		next.ServeHTTP(dw, r)
		if dw.stalled {
			clientGone(r)
			s.metrics.streamTimeouts.Inc()
			zerolog.Ctx(r.Context()).Warn().Dur("stream_write_timeout", timeout).Msg("response dropped: the client stopped reading")
		}
	})
}

// deadlineWriter sets the write deadline before each write and records a
// write or flush that the deadline cut (stalled); after that it writes
// nothing more.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	stalled bool
}

func (d *deadlineWriter) Write(b []byte) (int, error) {
	if d.stalled {
		return 0, errStalled
	}
	start := time.Now()
	_ = d.rc.SetWriteDeadline(start.Add(d.timeout))
	n, err := d.ResponseWriter.Write(b)
	return n, d.check(start, err)
}

// FlushError flushes, as http.ResponseController asks it to.
func (d *deadlineWriter) FlushError() error {
	if d.stalled {
		return errStalled
	}
	return d.check(time.Now(), d.rc.Flush())
}

// check marks a failure that the deadline caused as stalled: HTTP/1 reports
// the deadline, HTTP/2 resets the stream instead.
func (d *deadlineWriter) check(start time.Time, err error) error {
	if err != nil && (errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) >= d.timeout) {
		d.stalled = true
		return fmt.Errorf("%w: %w", errStalled, err)
	}
	return err
}

// Unwrap lets http.ResponseController reach the connection.
func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// clientGone records that r's client went away before its reply ended (a
// write failed), for the access log and metrics: 499, not the 200 the
// stream began with.
func clientGone(r *http.Request) {
	if g, ok := r.Context().Value(goneKey{}).(*bool); ok {
		*g = true
	}
}

// recoverer turns a handler panic into a 500 error in the shape of the
// request's API and logs the stack.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			rec := recover()
			if rec == nil {
				return
			}
			if rec == http.ErrAbortHandler {
				panic(rec) // the server's own "abort the response" signal
			}
			zerolog.Ctx(r.Context()).Error().Interface("panic", rec).Bytes("stack", debug.Stack()).Msg("handler panic")
			if ww, ok := w.(middleware.WrapResponseWriter); ok && ww.Status() != 0 {
				return // the response has started; the client sees it cut short
			}
			writeAPIError(w, r, &APIError{Status: http.StatusInternalServerError, Type: TypeServer,
				Message: "The server had an error while processing your request."})
		}()
		next.ServeHTTP(w, r)
	})
}

// corsHeaders are the request headers a preflight allows: what the
// official OpenAI and Anthropic SDKs send from a browser, never whatever the
// preflight asks for (a cookie, "*").
const corsHeaders = "Accept, Anthropic-Beta, Anthropic-Dangerous-Direct-Browser-Access, Anthropic-Version, Authorization, " +
	"Content-Type, Idempotency-Key, OpenAI-Beta, OpenAI-Organization, OpenAI-Project, " +
	"X-Api-Key, X-Request-Id, X-Stainless-Arch, X-Stainless-Async, X-Stainless-Custom-Poll-Interval, X-Stainless-Helper, " +
	"X-Stainless-Helper-Method, X-Stainless-Lang, X-Stainless-OS, X-Stainless-Package-Version, X-Stainless-Poll-Helper, " +
	"X-Stainless-Retry-Count, X-Stainless-Runtime, X-Stainless-Runtime-Version, X-Stainless-Timeout"

// cors implements the allow-list: allowed origins are echoed (or "*" when
// configured), preflight requests are answered here with 204. When CORS is
// configured every response varies by Origin, so a cache never hands one
// origin's answer to another.
func (s *Server) cors(next http.Handler) http.Handler {
	anyOrigin := false
	allowed := make(map[string]bool)
	for _, o := range s.opts.CORSOrigins {
		if o == "*" {
			anyOrigin = true
		}
		allowed[o] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		preflight := r.Method == http.MethodOptions && origin != "" && r.Header.Get("Access-Control-Request-Method") != ""
		if len(allowed) > 0 {
			h := w.Header()
			h.Add("Vary", "Origin")
			if origin != "" && (anyOrigin || allowed[origin]) {
				if anyOrigin {
					h.Set("Access-Control-Allow-Origin", "*")
				} else {
					h.Set("Access-Control-Allow-Origin", origin)
				}
				h.Set("Access-Control-Expose-Headers", "X-Request-Id, Retry-After, "+HeaderTruncated)
				if preflight {
					h.Set("Access-Control-Allow-Methods", "GET, HEAD, POST, DELETE, OPTIONS")
					h.Set("Access-Control-Allow-Headers", corsHeaders)
					h.Set("Access-Control-Max-Age", "600")
				}
			}
		}
		if preflight {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// auth requires one of the API keys, as `Authorization: Bearer KEY` or
// `x-api-key: KEY`; the routes that need none (/health, the chat page) are
// a group without it. No keys: no check.
func (s *Server) auth(next http.Handler) http.Handler {
	keys := make([][]byte, 0, len(s.opts.APIKeys))
	for _, k := range s.opts.APIKeys {
		keys = append(keys, []byte(k))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(keys) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		given := apiKey(r)
		if given == "" {
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeAPIError(w, r, &APIError{Status: http.StatusUnauthorized, Type: TypeInvalidRequest, Code: "invalid_api_key",
				Message: "You didn't provide an API key. Provide it in an Authorization header using Bearer auth (Authorization: Bearer YOUR_KEY) or in an x-api-key header."})
			return
		}
		if !keyIn(keys, given) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeAPIError(w, r, &APIError{Status: http.StatusUnauthorized, Type: TypeInvalidRequest, Code: "invalid_api_key",
				Message: "Incorrect API key provided."})
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ownerKey{}, keyOwner(given))))
	})
}

// keyIn reports whether given is one of keys, in a time that does not
// depend on which one.
func keyIn(keys [][]byte, given string) bool {
	match := 0
	for _, k := range keys { // no early exit
		match |= subtle.ConstantTimeCompare([]byte(given), k)
	}
	return match == 1
}

// authorized reports whether r may see what /health tells a key holder:
// there are no keys, or it presents one.
func (s *Server) authorized(r *http.Request) bool {
	if len(s.opts.APIKeys) == 0 {
		return true
	}
	keys := make([][]byte, len(s.opts.APIKeys))
	for i, k := range s.opts.APIKeys {
		keys[i] = []byte(k)
	}
	return keyIn(keys, apiKey(r))
}

// apiKey is the key a request presents, as `Authorization: Bearer KEY` or
// `x-api-key: KEY`; "" when it has none.
func apiKey(r *http.Request) string {
	given := r.Header.Get("x-api-key")
	if a := r.Header.Get("Authorization"); a != "" {
		if scheme, tok, ok := strings.Cut(a, " "); ok && strings.EqualFold(scheme, "Bearer") {
			given = strings.TrimSpace(tok)
		}
	}
	return given
}

type ownerKey struct{}

// keyOwner is the inference.Request.Owner of an API key: a hash, so the key
// itself never travels further than auth.
func keyOwner(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}

// requestOwner is the Owner of the request carrying ctx: the hash of its
// API key, "" when no keys are configured.
func requestOwner(ctx context.Context) string {
	o, _ := ctx.Value(ownerKey{}).(string)
	return o
}

// metricMethod maps a request method to a fixed set of label values: the
// method is client-controlled, and each new label value is a new series
// kept for the life of the process.
func metricMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// limitBody refuses bodies larger than the limit: at once when
// Content-Length says so, else when reading crosses it (decodeJSON → 413).
// Every byte read is held from the server's body memory until the request
// ends (what is decoded from it lives that long): past it, 503.
func (s *Server) limitBody(next http.Handler) http.Handler {
	limit := s.opts.BodyLimit
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			writeError(w, r, &http.MaxBytesError{Limit: limit})
			return
		}
		b := &heldBody{ReadCloser: http.MaxBytesReader(w, r.Body, limit), s: s}
		defer b.release()
		r.Body = b
		next.ServeHTTP(w, r)
	})
}

// DefaultBodyMemory is Options.BodyMemory's default (server.body_memory).
const DefaultBodyMemory = 128 << 20

// errBodyMemory is the read error of a body that would pass the server's
// body memory.
var errBodyMemory = errors.New("the server is holding too many request bodies (server.body_memory)")

// heldBody counts the bytes read of a request body against the server's
// body memory.
type heldBody struct {
	io.ReadCloser
	s    *Server
	held int64
}

func (b *heldBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.held += int64(n)
		if b.s.bodies.Add(int64(n)) > b.s.opts.BodyMemory {
			return 0, errBodyMemory
		}
	}
	return n, err
}

func (b *heldBody) release() {
	b.s.bodies.Add(-b.held)
	b.held = 0
}

// browserCheck refuses (403, in the API's shape) what a web page could make
// a browser send: a request from another origin than the server's own and
// server.cors_origins (a form post or a text/plain fetch needs no CORS
// preflight, so without this any page the user opens could run the model or
// spend an upstream key), and, with Options.AllowedHosts, a Host that is
// neither loopback nor allowed (DNS rebinding: a page whose name now
// resolves to 127.0.0.1 is same-origin to the browser). Clients that are not
// browsers send no Origin.
func (s *Server) browserCheck(next http.Handler) http.Handler {
	anyOrigin := slices.Contains(s.opts.CORSOrigins, "*")
	var hosts map[string]bool
	if s.opts.AllowedHosts != nil {
		hosts = make(map[string]bool)
		for _, h := range s.opts.AllowedHosts {
			hosts[strings.ToLower(h)] = true
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hosts != nil && !loopbackHost(r.Host) && !hosts[strings.ToLower(hostOnly(r.Host))] {
			writeAPIError(w, r, &APIError{Status: http.StatusForbidden, Type: TypeInvalidRequest, Code: "host_not_allowed",
				Message: fmt.Sprintf("Host %q is not allowed: this server answers its loopback names; add the name to server.allowed_hosts.", hostOnly(r.Host))})
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !anyOrigin && !slices.Contains(s.opts.CORSOrigins, o) && !sameOrigin(o, r) {
			writeAPIError(w, r, &APIError{Status: http.StatusForbidden, Type: TypeInvalidRequest, Code: "origin_not_allowed",
				Message: fmt.Sprintf("Origin %q is not allowed: add it to server.cors_origins to call this server from that page.", o)})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sameOrigin reports whether origin is the one r was sent to (the chat
// page's own requests).
func sameOrigin(origin string, r *http.Request) bool {
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return strings.EqualFold(origin, scheme+r.Host)
}

// hostOnly is host:port without the port (and an IPv6 literal's brackets).
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

// loopbackHost reports whether a Host header names this machine's loopback:
// localhost, a *.localhost name (RFC 6761), or a loopback IP.
func loopbackHost(hostport string) bool {
	h := strings.ToLower(strings.TrimSuffix(hostOnly(hostport), "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
