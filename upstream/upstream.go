// Package upstream relays requests to an OpenAI-compatible server on the
// network (vLLM, llama.cpp's server, Ollama, another hexserve) that hexserve
// serves as one of its models: the request body goes up with the model name
// replaced and the upstream's own key, the reply comes back as it arrives
// (an SSE stream frame by frame, never buffered) with the model name
// replaced back, and failures become Errors that never name the upstream's
// address or key. It uses only net/http's client, with TLS verification on.
package upstream

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options configure a Client.
type Options struct {
	ID      string // the id hexserve serves the model as
	BaseURL string // the upstream's API root, "http://gpu-box:8000/v1"
	APIKey  string // sent as Authorization: Bearer; "" sends none
	Model   string // the upstream's name for the model; "" is ID
	// Timeout bounds a whole forwarded request, its stream included;
	// ConnectTimeout bounds connecting. <= 0: 5 min and 10 s.
	Timeout        time.Duration
	ConnectTimeout time.Duration
	// MaxInFlight caps the requests forwarded at once; 0: no limit.
	MaxInFlight int
	// RootCAs, when not nil, replaces the system's certificate authorities.
	RootCAs *x509.CertPool
	// StreamWriteTimeout drops a relayed stream whose client stops reading
	// for this long; <= 0: 30 s.
	StreamWriteTimeout time.Duration
	// MaxResponseBytes caps a reply that is not a stream, and a converted one
	// (Chunks: the Ollama and Anthropic relays) in all; <= 0: 64 MiB.
	MaxResponseBytes int64
	// Metrics, when not nil, records the relay's series.
	Metrics *Metrics
	// Transport replaces the client's transport (tests); nil: one built
	// from the options above.
	Transport http.RoundTripper
}

// Client forwards requests to one upstream model. It is safe for
// concurrent use.
type Client struct {
	opts  Options
	base  *url.URL
	hc    *http.Client
	slots chan struct{} // nil: no in-flight limit
	scrub *strings.Replacer
	// health caches the last probe.
	healthMu  sync.Mutex
	healthAt  time.Time
	healthErr error
}

// KeyFrom reads an upstream key from the environment variable env or the
// file at path (its first line, trimmed); both empty is no key.
func KeyFrom(env, path string) (string, error) {
	switch {
	case env != "":
		k, ok := os.LookupEnv(env)
		if !ok || strings.TrimSpace(k) == "" {
			return "", fmt.Errorf("the environment variable %s is not set", env)
		}
		return strings.TrimSpace(k), nil
	case path != "":
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		k, _, _ := strings.Cut(string(b), "\n")
		if k = strings.TrimSpace(k); k == "" {
			return "", fmt.Errorf("%s is empty", path)
		}
		return k, nil
	}
	return "", nil
}

// LoadCAs reads a PEM bundle of certificate authorities.
func LoadCAs(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// New makes a client; nothing is sent until the first request.
func New(opts Options) (*Client, error) {
	base, err := url.Parse(strings.TrimRight(opts.BaseURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("upstream %s: base_url must be an http or https URL", opts.ID)
	}
	if opts.Model == "" {
		opts.Model = opts.ID
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 10 * time.Second
	}
	if opts.StreamWriteTimeout <= 0 {
		opts.StreamWriteTimeout = 30 * time.Second
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = 64 << 20
	}
	rt := opts.Transport
	if rt == nil {
		rt = &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: opts.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:       &tls.Config{RootCAs: opts.RootCAs, MinVersion: tls.VersionTLS12},
			TLSHandshakeTimeout:   opts.ConnectTimeout,
			ForceAttemptHTTP2:     true,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       90 * time.Second,
			ExpectContinueTimeout: time.Second,
		}
	}
	c := &Client{opts: opts, base: base, hc: &http.Client{Transport: rt,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	if opts.MaxInFlight > 0 {
		c.slots = make(chan struct{}, opts.MaxInFlight)
	}
	secrets := []string{opts.BaseURL, base.String(), base.Host, base.Hostname()}
	if opts.APIKey != "" {
		secrets = append([]string{opts.APIKey}, secrets...)
	}
	var pairs []string
	for _, s := range secrets {
		if s != "" {
			pairs = append(pairs, s, "[upstream]")
		}
	}
	c.scrub = strings.NewReplacer(pairs...)
	return c, nil
}

// ID is the id hexserve serves the model as.
func (c *Client) ID() string { return c.opts.ID }

// Error is a failure to get a reply from the upstream, in terms a client
// may see: no address, no key.
type Error struct {
	Status     int    // 502, 503 or 504
	Code       string // upstream_unreachable, upstream_timeout, upstream_busy, upstream_error
	Message    string
	RetryAfter int // seconds; 0: none
	cause      error
}

func (e *Error) Error() string { return e.Message }

// Unwrap is the transport's error (it names the address: log it only).
func (e *Error) Unwrap() error { return e.cause }

// Forward sends body, a client's JSON request to the endpoint at path under
// the base URL ("/chat/completions"), with its model replaced by the
// upstream's name, and writes the reply to w with the model named servedAs.
// The request's context cancels the upstream request. An error returned
// means nothing was written: it is an *Error, or r's context error when the
// client left. Once the reply has started, failures end it in the stream
// (OpenAI's error frame) and Forward returns nil.
func (c *Client) Forward(w http.ResponseWriter, r *http.Request, path string, body []byte, servedAs string) error {
	if c.slots != nil {
		select {
		case c.slots <- struct{}{}:
			defer func() { <-c.slots }()
		default:
			c.count("", "busy")
			return &Error{Status: http.StatusServiceUnavailable, Code: "upstream_busy", RetryAfter: 1,
				Message: fmt.Sprintf("The model `%s` is busy with other requests, please retry shortly.", c.opts.ID)}
		}
	}
	out, err := replaceModel(body, c.opts.Model)
	if err != nil {
		return &Error{Status: http.StatusBadRequest, Code: "invalid_json", Message: "We could not parse the JSON body of your request.", cause: err}
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.opts.Timeout)
	defer cancel()
	resp, err := c.send(ctx, w, r, path, out)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	rw := &relay{c: c, w: w, rc: http.NewResponseController(w), from: c.modelField(c.opts.Model), to: c.modelField(servedAs)}
	rw.spaced = bytes.Replace(rw.from, []byte(`":`), []byte(`": `), 1)
	if servedAs == c.opts.Model {
		rw.from = nil
	}
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return c.redirected(resp)
	case resp.StatusCode >= 400:
		return c.relayError(rw, r, resp)
	case strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"):
		c.count(strconv.Itoa(resp.StatusCode), "")
		return rw.stream(r, resp)
	default:
		c.count(strconv.Itoa(resp.StatusCode), "")
		return rw.whole(r, resp)
	}
}

// send posts out to path and returns the upstream's response (its
// headers read).
func (c *Client) send(ctx context.Context, w http.ResponseWriter, r *http.Request, path string, out []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.String()+path, bytes.NewReader(out))
	if err != nil {
		return nil, c.fail(r, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.APIKey)
	}
	if id := r.Header.Get("X-Request-Id"); id != "" {
		req.Header.Set("X-Request-Id", id)
	} else if id := w.Header().Get("X-Request-Id"); id != "" {
		req.Header.Set("X-Request-Id", id) // hexserve's own, so both logs share it
	}
	start := time.Now()
	resp, err := c.hc.Do(req)
	c.opts.Metrics.observeLatency(c.opts.ID, time.Since(start))
	c.opts.Metrics.addBytes(c.opts.ID, "sent", len(out))
	if err != nil {
		return nil, c.fail(r, err)
	}
	return resp, nil
}

// Chunks sends body, an OpenAI request that asks for a stream, with its
// model replaced, and calls each with the data of every SSE event as it
// arrives, up to [DONE]; each's error ends the stream. Errors before the
// first event are an *Error (an upstream that refused the request: its
// status and message, scrubbed) or r's context error; after it, an error
// that a client may see.
func (c *Client) Chunks(w http.ResponseWriter, r *http.Request, path string, body []byte, each func([]byte) error) error {
	if c.slots != nil {
		select {
		case c.slots <- struct{}{}:
			defer func() { <-c.slots }()
		default:
			c.count("", "busy")
			return &Error{Status: http.StatusServiceUnavailable, Code: "upstream_busy", RetryAfter: 1,
				Message: fmt.Sprintf("The model `%s` is busy with other requests, please retry shortly.", c.opts.ID)}
		}
	}
	out, err := replaceModel(body, c.opts.Model)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.opts.Timeout)
	defer cancel()
	resp, err := c.send(ctx, w, r, path, out)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return c.redirected(resp)
	case resp.StatusCode >= 400:
		return c.refused(r, resp)
	}
	c.count(strconv.Itoa(resp.StatusCode), "")
	// A converted reply is bounded like a whole one: a hostile upstream's
	// endless line or endless stream ends at MaxResponseBytes.
	br := bufio.NewReaderSize(io.LimitReader(resp.Body, c.opts.MaxResponseBytes+1), 64<<10)
	var total int64
	for {
		line, err := readLine(br)
		c.opts.Metrics.addBytes(c.opts.ID, "received", len(line))
		if total += int64(len(line)); total > c.opts.MaxResponseBytes {
			c.count("", "size")
			return &Error{Status: http.StatusBadGateway, Code: "upstream_error",
				Message: fmt.Sprintf("The reply of model `%s` is larger than %d bytes.", c.opts.ID, c.opts.MaxResponseBytes)}
		}
		if data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:")); ok {
			data = bytes.TrimSpace(data)
			if string(data) == "[DONE]" {
				return nil
			}
			if eachErr := each(data); eachErr != nil {
				return eachErr
			}
		}
		if err != nil {
			if cerr := r.Context().Err(); cerr != nil {
				return cerr
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			e := &Error{Status: http.StatusBadGateway, Code: "upstream_error", cause: err,
				Message: fmt.Sprintf("The model `%s` stopped answering.", c.opts.ID)}
			kind := "stream"
			if errors.Is(err, context.DeadlineExceeded) {
				e.Status, e.Code, kind = http.StatusGatewayTimeout, "upstream_timeout", "timeout"
				e.Message = fmt.Sprintf("The model `%s` did not finish within %v.", c.opts.ID, c.opts.Timeout)
			}
			c.count("", kind)
			return e
		}
	}
}

// readLine reads up to and including the next newline, like ReadBytes, but
// from a reader the caller bounds (ReadBytes itself grows without limit).
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, err := br.ReadSlice('\n')
		line = append(line, part...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

// redirected is the *Error for a 3xx answer: the client never follows an
// upstream's redirect, and its body and Location (which name addresses) stay
// here.
func (c *Client) redirected(resp *http.Response) error {
	c.count(strconv.Itoa(resp.StatusCode), "status")
	return &Error{Status: http.StatusBadGateway, Code: "upstream_error",
		Message: fmt.Sprintf("The model `%s` answered with a redirect (status %d), which is not followed.", c.opts.ID, resp.StatusCode)}
}

// refused is the *Error for an upstream's error reply: its status (5xx
// other than 503 and 504: 502) and its error message, scrubbed.
func (c *Client) refused(r *http.Request, resp *http.Response) error {
	status := relayStatus(resp.StatusCode)
	c.count(strconv.Itoa(status), "status")
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	c.opts.Metrics.addBytes(c.opts.ID, "received", len(b))
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	var msg struct {
		Message string `json:"message"`
	}
	if e := c.keyRefused(resp.StatusCode); e != nil {
		return e
	}
	e := &Error{Status: status, Code: "upstream_error", Message: fmt.Sprintf("The model `%s` failed with status %d.", c.opts.ID, resp.StatusCode)}
	if json.Unmarshal(b, &body) == nil && len(body.Error) > 0 {
		if json.Unmarshal(body.Error, &msg) != nil {
			_ = json.Unmarshal(body.Error, &msg.Message) // Ollama's {"error": "…"}
		}
		if msg.Message != "" {
			e.Message = c.Scrub(msg.Message)
		}
	}
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		e.RetryAfter = ra
	}
	return e
}

// keyRefused is the 502 for an upstream that refused hexserve's own key
// (401, 403): relayed as is, the client would take its own key for wrong.
func (c *Client) keyRefused(status int) *Error {
	if status != http.StatusUnauthorized && status != http.StatusForbidden {
		return nil
	}
	return &Error{Status: http.StatusBadGateway, Code: "upstream_auth",
		Message: fmt.Sprintf("The model `%s` refused this server's upstream key (status %d); check upstream.api_key_env or api_key_file.", c.opts.ID, status)}
}

func relayStatus(status int) int {
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return http.StatusBadGateway
	}
	if status >= 500 && status != http.StatusServiceUnavailable && status != http.StatusGatewayTimeout {
		return http.StatusBadGateway
	}
	return status
}

// fail classifies a transport error that came before any reply: the
// client leaving (its context error), the timeout (504) or anything else
// (502).
func (c *Client) fail(r *http.Request, err error) error {
	if cerr := r.Context().Err(); cerr != nil {
		c.count("499", "cancelled")
		return cerr
	}
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout() {
		c.count("504", "timeout")
		return &Error{Status: http.StatusGatewayTimeout, Code: "upstream_timeout", cause: err,
			Message: fmt.Sprintf("The model `%s` did not answer within %v.", c.opts.ID, c.opts.Timeout)}
	}
	c.count("502", "unreachable")
	return &Error{Status: http.StatusBadGateway, Code: "upstream_unreachable", cause: err,
		Message: fmt.Sprintf("The model `%s` could not be reached.", c.opts.ID)}
}

func (c *Client) count(status, errKind string) {
	if status != "" {
		c.opts.Metrics.request(c.opts.ID, status)
	}
	if errKind != "" {
		c.opts.Metrics.failure(c.opts.ID, errKind)
	}
}

// modelField is the JSON `"model":"name"` member as a compact encoder
// writes it.
func (c *Client) modelField(name string) []byte {
	b, _ := json.Marshal(name)
	return append([]byte(`"model":`), b...)
}

// replaceModel sets body's top-level "model" to name.
func replaceModel(body []byte, name string) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, err
	}
	b, _ := json.Marshal(name)
	obj["model"] = b
	return json.Marshal(obj)
}

// addrPattern matches what scrubbing the configured address could miss
// in an upstream's error text: other URLs and IP:port pairs.
var addrPattern = regexp.MustCompile(`(?i)\bhttps?://[^\s"'\\]+|\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b|\[[0-9a-f:]+\](:\d+)?`)

// Scrub removes the upstream's key and address from text.
func (c *Client) Scrub(text string) string {
	return addrPattern.ReplaceAllString(c.scrub.Replace(text), "[upstream]")
}

// relayError passes an upstream's error reply on: its status (5xx other
// than 503 and 504 become 502), Retry-After, and its body scrubbed of the
// key and address when it is JSON; other bodies (a proxy's HTML page) are
// replaced by an Error.
func (c *Client) relayError(rw *relay, r *http.Request, resp *http.Response) error {
	status := relayStatus(resp.StatusCode)
	c.count(strconv.Itoa(status), "status")
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	c.opts.Metrics.addBytes(c.opts.ID, "received", len(b))
	if err != nil {
		return c.fail(r, err)
	}
	if e := c.keyRefused(resp.StatusCode); e != nil {
		return e
	}
	clean := []byte(c.Scrub(string(b)))
	if !json.Valid(clean) {
		return &Error{Status: status, Code: "upstream_error",
			Message: fmt.Sprintf("The model `%s` failed with status %d.", c.opts.ID, resp.StatusCode)}
	}
	h := rw.w.Header()
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		h.Set("Retry-After", ra)
	}
	h.Set("Content-Type", "application/json")
	rw.w.WriteHeader(status)
	_, _ = rw.w.Write(clean)
	return nil
}

// relay writes an upstream reply to the client.
type relay struct {
	c        *Client
	w        http.ResponseWriter
	rc       *http.ResponseController
	from, to []byte // the model member to replace; from nil: none
	spaced   []byte // from with a space after the colon
}

// rename replaces the upstream's model name in one JSON text, as compact
// encoders write the member and as Python's json.dumps does.
func (rw *relay) rename(b []byte) []byte {
	if rw.from == nil {
		return b
	}
	b = bytes.ReplaceAll(b, rw.from, rw.to)
	return bytes.ReplaceAll(b, rw.spaced, rw.to)
}

// whole relays a reply that is not a stream.
func (rw *relay) whole(r *http.Request, resp *http.Response) error {
	b, err := io.ReadAll(io.LimitReader(resp.Body, rw.c.opts.MaxResponseBytes+1))
	rw.c.opts.Metrics.addBytes(rw.c.opts.ID, "received", len(b))
	if err != nil {
		return rw.c.fail(r, err)
	}
	if int64(len(b)) > rw.c.opts.MaxResponseBytes {
		return &Error{Status: http.StatusBadGateway, Code: "upstream_error",
			Message: fmt.Sprintf("The reply of model `%s` is larger than %d bytes.", rw.c.opts.ID, rw.c.opts.MaxResponseBytes)}
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		rw.w.Header().Set("Content-Type", ct)
	}
	b = rw.rename(b)
	rw.w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	rw.w.WriteHeader(resp.StatusCode)
	_, _ = rw.w.Write(b)
	return nil
}

// stream relays an SSE reply line by line, flushing at the end of each
// event, so every frame reaches the client as soon as the upstream sends
// it. A client that stops reading (the write deadline) or leaves ends the
// relay, which cancels the upstream request; an upstream that breaks off
// or times out ends the stream with an error frame.
func (rw *relay) stream(r *http.Request, resp *http.Response) error {
	h := rw.w.Header()
	h.Set("Content-Type", resp.Header.Get("Content-Type"))
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	rw.w.WriteHeader(resp.StatusCode)
	if rw.flush() != nil {
		return nil
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var pending bool // bytes written since the last flush
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) { // a frame longer than the buffer: pass it through in parts
			rw.c.opts.Metrics.addBytes(rw.c.opts.ID, "received", len(line))
			if _, werr := rw.w.Write(line); werr != nil {
				return nil
			}
			pending = true
			continue
		}
		if len(line) > 0 {
			rw.c.opts.Metrics.addBytes(rw.c.opts.ID, "received", len(line))
			if bytes.HasPrefix(line, []byte("data:")) {
				line = rw.rename(line)
			}
			if _, werr := rw.w.Write(line); werr != nil {
				return nil // the client is gone: returning cancels the upstream request
			}
			pending = true
			if len(bytes.TrimRight(line, "\r\n")) == 0 { // the blank line that ends an event
				if rw.flush() != nil {
					return nil
				}
				pending = false
			}
		}
		if err != nil {
			if pending {
				_ = rw.flush()
			}
			if !errors.Is(err, io.EOF) && r.Context().Err() == nil {
				rw.broken(r, err)
			}
			return nil
		}
	}
}

// flush sends what was written within the stream write timeout.
func (rw *relay) flush() error {
	_ = rw.rc.SetWriteDeadline(time.Now().Add(rw.c.opts.StreamWriteTimeout))
	return rw.rc.Flush()
}

// broken ends a stream the upstream broke off (or that outlived the
// timeout) with an error frame in the endpoint's shape.
func (rw *relay) broken(r *http.Request, err error) {
	code, msg := "upstream_error", fmt.Sprintf("The model `%s` stopped answering.", rw.c.opts.ID)
	kind := "stream"
	if errors.Is(err, context.DeadlineExceeded) {
		code, msg, kind = "upstream_timeout", fmt.Sprintf("The model `%s` did not finish within %v.", rw.c.opts.ID, rw.c.opts.Timeout), "timeout"
	}
	rw.c.count("", kind)
	fields := map[string]any{"message": msg, "type": "server_error", "param": nil, "code": code}
	var frame []byte
	if strings.HasSuffix(r.URL.Path, "/responses") {
		b, _ := json.Marshal(map[string]any{"type": "error", "code": code, "message": msg, "param": nil})
		frame = append(append([]byte("event: error\ndata: "), b...), "\n\n"...)
	} else {
		b, _ := json.Marshal(map[string]any{"error": fields})
		frame = append(append([]byte("data: "), b...), "\n\ndata: [DONE]\n\n"...)
	}
	if _, werr := rw.w.Write(frame); werr == nil {
		_ = rw.flush()
	}
}
