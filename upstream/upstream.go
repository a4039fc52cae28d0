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

	"github.com/hexserve/hexserve/internal/modelfile"
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
	// MaxInFlight caps the requests forwarded at once; <= 0:
	// DefaultMaxInFlight.
	MaxInFlight int
	// RootCAs, when not nil, replaces the system's certificate authorities.
	RootCAs *x509.CertPool
	// StreamWriteTimeout drops a relayed stream whose client stops reading
	// for this long; <= 0: 30 s.
	StreamWriteTimeout time.Duration
	// MaxResponseBytes caps a reply that is not a stream, one line of a
	// stream, and a converted reply (Chunks: the Ollama and Anthropic
	// relays) in all; <= 0: 64 MiB.
	MaxResponseBytes int64
	// Budget, shared by every Client of a server, bounds the memory all
	// their buffered replies hold at once; nil: no bound beyond
	// MaxResponseBytes per request.
	Budget *Budget
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
	// secrets are what scrubbing replaces.
	secrets *secrets
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
		b, err := modelfile.ReadFile(path, modelfile.MaxConfig)
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

// LoadCAs reads a PEM bundle of certificate authorities (a regular file of at most
// modelfile.MaxPEM bytes).
func LoadCAs(path string) (*x509.CertPool, error) {
	b, err := modelfile.ReadFile(path, modelfile.MaxPEM)
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
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	c.slots = make(chan struct{}, opts.MaxInFlight)
	c.secrets = newSecrets(opts.APIKey, opts.BaseURL, base)
	c.opts = opts
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

// call is one request on its way to the upstream: its in-flight slot
// held, its context bounded by the timeout, its response's headers read.
type call struct {
	resp   *http.Response
	stream bool // the client asked for a stream
	hold   hold // the memory its buffered bytes hold from the budget
	done   func()
}

// open prepares and sends a request, the same way for Forward and Chunks:
// an in-flight slot (503 when none is free), the model replaced, the
// timeout, the upstream's key, the request id. A redirect is an *Error.
// The caller must call done.
func (c *Client) open(w http.ResponseWriter, r *http.Request, path string, body []byte) (*call, error) {
	release := func() {}
	if c.slots != nil {
		select {
		case c.slots <- struct{}{}:
			release = func() { <-c.slots }
		default:
			c.count("", "busy")
			return nil, &Error{Status: http.StatusServiceUnavailable, Code: "upstream_busy", RetryAfter: 1,
				Message: fmt.Sprintf("The model `%s` is busy with other requests, please retry shortly.", c.opts.ID)}
		}
	}
	out, stream, err := replaceModel(body, c.opts.Model)
	if err != nil {
		release()
		return nil, &Error{Status: http.StatusBadRequest, Code: "invalid_json", Message: "We could not parse the JSON body of your request.", cause: c.scrubErr(err)}
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.opts.Timeout)
	resp, err := c.send(ctx, w, r, path, out)
	if err != nil {
		cancel()
		release()
		return nil, err
	}
	cl := &call{resp: resp, stream: stream, hold: hold{b: c.opts.Budget, max: c.opts.MaxResponseBytes + 1}}
	cl.done = func() {
		resp.Body.Close()
		cancel()
		cl.hold.release()
		release()
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		cl.done()
		return nil, c.redirected(resp)
	}
	return cl, nil
}

// Forward sends body, a client's JSON request to the endpoint at path under
// the base URL ("/chat/completions"), with its model replaced by the
// upstream's name, and writes the reply to w with the model named servedAs.
// The request's context cancels the upstream request. An error returned
// means nothing was written: it is an *Error, or r's context error when the
// client left. Once the reply has started, failures end it in the stream
// (OpenAI's error frame) and Forward returns nil. The key and the address
// never reach w: every byte relayed is scrubbed of them.
func (c *Client) Forward(w http.ResponseWriter, r *http.Request, path string, body []byte, servedAs string) error {
	cl, err := c.open(w, r, path, body)
	if err != nil {
		return err
	}
	defer cl.done()
	resp := cl.resp
	rw := &relay{c: c, w: w, rc: http.NewResponseController(w), from: c.modelField(c.opts.Model), to: c.modelField(servedAs), hold: &cl.hold}
	rw.spaced = bytes.Replace(rw.from, []byte(`":`), []byte(`": `), 1)
	if servedAs == c.opts.Model {
		rw.from = nil
	}
	switch {
	case resp.StatusCode >= 400:
		return c.relayError(rw, r, resp)
	case isStream(resp):
		c.count(strconv.Itoa(resp.StatusCode), "")
		return rw.stream(r, resp)
	case cl.stream:
		return c.broken(r, resp, "answered a stream request with a reply that is not a stream")
	default:
		return rw.whole(r, resp, path)
	}
}

func isStream(resp *http.Response) bool {
	return strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
}

// broken is the 502 for a 2xx reply that cannot be what was asked for
// (what: how it is broken); its body is not read.
func (c *Client) broken(r *http.Request, resp *http.Response, what string) error {
	if cerr := r.Context().Err(); cerr != nil {
		c.count("499", "cancelled")
		return cerr
	}
	c.count("502", "invalid")
	return &Error{Status: http.StatusBadGateway, Code: "upstream_error",
		Message: fmt.Sprintf("The model `%s` %s.", c.opts.ID, what)}
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
// arrives (scrubbed of the key and address), up to [DONE]; each's error
// ends the stream. Errors before the first event are an *Error (an
// upstream that refused the request: its status and message, scrubbed; a
// reply that is not a stream, or has no event: 502) or r's context error;
// after it, an error that a client may see. Every byte read is held from
// the budget until Chunks returns, as the caller may collect the reply.
func (c *Client) Chunks(w http.ResponseWriter, r *http.Request, path string, body []byte, each func([]byte) error) error {
	cl, err := c.open(w, r, path, body)
	if err != nil {
		return err
	}
	defer cl.done()
	resp := cl.resp
	if resp.StatusCode >= 400 {
		return c.refused(r, resp, &cl.hold)
	}
	if !isStream(resp) {
		return c.broken(r, resp, "answered a stream request with a reply that is not a stream")
	}
	c.count(strconv.Itoa(resp.StatusCode), "")
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	events := 0
	for {
		line, err := readLine(br, &cl.hold)
		c.opts.Metrics.addBytes(c.opts.ID, "received", len(line))
		if err == nil || errors.Is(err, io.EOF) {
			if data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:")); ok {
				data = bytes.TrimSpace(data)
				if string(data) == "[DONE]" {
					return nil
				}
				events++
				if data, err = c.clean(data, &cl.hold); err != nil {
					return c.cut(err)
				}
				if eachErr := each(data); eachErr != nil {
					return eachErr
				}
			}
		}
		if err != nil {
			if cerr := r.Context().Err(); cerr != nil {
				return cerr
			}
			if errors.Is(err, io.EOF) {
				if events == 0 {
					return c.broken(r, resp, "ended its stream without an event")
				}
				return nil
			}
			return c.cut(err)
		}
	}
}

// cut is the *Error for a stream that ended early: err is the reader's
// (the timeout, the budget, the size limit, or the transport's).
func (c *Client) cut(err error) *Error {
	e := &Error{Status: http.StatusBadGateway, Code: "upstream_error", cause: c.scrubErr(err),
		Message: fmt.Sprintf("The model `%s` stopped answering.", c.opts.ID)}
	kind := "stream"
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		e.Status, e.Code, kind = http.StatusGatewayTimeout, "upstream_timeout", "timeout"
		e.Message = fmt.Sprintf("The model `%s` did not finish within %v.", c.opts.ID, c.opts.Timeout)
	case errors.Is(err, errTooLarge):
		kind = "size"
		e.Message = fmt.Sprintf("The reply of model `%s` is larger than %d bytes.", c.opts.ID, c.opts.MaxResponseBytes)
	case errors.Is(err, errBudget):
		e.Status, e.Code, e.RetryAfter, kind = http.StatusServiceUnavailable, "upstream_busy", 1, "memory"
		e.Message = "The server is holding too many upstream replies (server.relay_memory), please retry shortly."
	}
	c.count("", kind)
	return e
}

// readLine reads up to and including the next newline, like ReadBytes, but
// with every byte beyond the reader's buffer reserved in h first (ReadBytes
// itself grows without limit).
func readLine(br *bufio.Reader, h *hold) ([]byte, error) {
	var p pieces
	for {
		part, err := br.ReadSlice('\n')
		if gerr := h.grow(int64(len(part))); gerr != nil {
			return nil, gerr
		}
		if len(p.list) == 0 && !errors.Is(err, bufio.ErrBufferFull) {
			return append([]byte(nil), part...), err // the common case: one part
		}
		p.list = append(p.list, append([]byte(nil), part...))
		p.n += len(part)
		if !errors.Is(err, bufio.ErrBufferFull) {
			line, jerr := p.join(h)
			if jerr != nil {
				return nil, jerr
			}
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
func (c *Client) refused(r *http.Request, resp *http.Response, h *hold) error {
	status := relayStatus(resp.StatusCode)
	c.count(strconv.Itoa(status), "status")
	b, _ := h.readAll(io.LimitReader(resp.Body, maxErrorBody))
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
		return &Error{Status: http.StatusGatewayTimeout, Code: "upstream_timeout", cause: c.scrubErr(err),
			Message: fmt.Sprintf("The model `%s` did not answer within %v.", c.opts.ID, c.opts.Timeout)}
	}
	c.count("502", "unreachable")
	return &Error{Status: http.StatusBadGateway, Code: "upstream_unreachable", cause: c.scrubErr(err),
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

// replaceModel sets body's top-level "model" to name and reports whether
// the request asks for a stream.
func replaceModel(body []byte, name string) ([]byte, bool, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, false, err
	}
	b, _ := json.Marshal(name)
	obj["model"] = b
	out, err := json.Marshal(obj)
	return out, string(obj["stream"]) == "true", err
}

// maxErrorBody bounds the error reply of an upstream read (each is
// relayed whole, scrubbed, or replaced).
const maxErrorBody = 1 << 20

// addrPattern matches what scrubbing the configured address could miss
// in an upstream's error text: other URLs and IP:port pairs.
var addrPattern = regexp.MustCompile(`(?i)\bhttps?:(//|\\/\\/)[^\s"'\\]+|\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b|\[[0-9a-f:]+\](:\d+)?`)

// Scrub removes the upstream's key and address from text, and any other
// URL or IP address.
func (c *Client) Scrub(text string) string {
	b := []byte(text)
	if sp := c.secrets.spans(b); len(sp) > 0 {
		var buf bytes.Buffer
		mask(&buf, b, sp)
		text = buf.String()
	}
	return addrPattern.ReplaceAllString(text, "[upstream]")
}

// clean scrubs one reply, frame or line before it goes to a client or a
// log: the key and the configured address always; any URL or IP address
// too in an error (a JSON text with an "error" member or value), whose
// message may name the upstream's other addresses. A model's own text
// keeps its URLs. It returns b itself when there is nothing to scrub; a
// scrubbed copy is reserved in h first.
func (c *Client) clean(b []byte, h *hold) ([]byte, error) {
	named := c.secrets.spans(b)
	other := bytes.Contains(b, []byte(`"error"`)) && addrPattern.Match(b)
	if len(named) == 0 && !other {
		return b, nil
	}
	if err := h.copy(2 * int64(len(b))); err != nil {
		return nil, err
	}
	if len(named) > 0 {
		var buf bytes.Buffer
		buf.Grow(len(b) + len(b)/4)
		mask(&buf, b, named)
		b = buf.Bytes()
	}
	if other {
		b = addrPattern.ReplaceAll(b, []byte("[upstream]"))
	}
	return b, nil
}

// scrubErr is err with its text scrubbed (a transport error names the
// address); it still unwraps to err.
func (c *Client) scrubErr(err error) error {
	if err == nil {
		return nil
	}
	return &scrubbed{msg: c.Scrub(err.Error()), err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (s *scrubbed) Error() string { return s.msg }
func (s *scrubbed) Unwrap() error { return s.err }

// relayError passes an upstream's error reply on: its status (5xx other
// than 503 and 504 become 502), Retry-After, and its body scrubbed of the
// key and address when it is JSON; other bodies (a proxy's HTML page) are
// replaced by an Error.
func (c *Client) relayError(rw *relay, r *http.Request, resp *http.Response) error {
	status := relayStatus(resp.StatusCode)
	c.count(strconv.Itoa(status), "status")
	b, err := rw.read(r, io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		return err
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
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && ra >= 0 {
		h.Set("Retry-After", strconv.Itoa(ra)) // only a number of seconds: no upstream text
	}
	h.Set("Content-Type", "application/json")
	rw.w.WriteHeader(status)
	_, _ = rw.w.Write(clean)
	return nil
}

// read reads an upstream reply's body whole within the hold, counting its
// bytes; a failure is the Error for the client.
func (rw *relay) read(r *http.Request, body io.Reader) ([]byte, error) {
	c := rw.c
	b, err := rw.hold.readAll(body)
	c.opts.Metrics.addBytes(c.opts.ID, "received", len(b))
	switch {
	case errors.Is(err, errTooLarge), errors.Is(err, errBudget):
		return nil, c.cut(err)
	case err != nil:
		return nil, c.fail(r, err)
	}
	return b, nil
}

// relay writes an upstream reply to the client.
type relay struct {
	c        *Client
	w        http.ResponseWriter
	rc       *http.ResponseController
	from, to []byte // the model member to replace; from nil: none
	spaced   []byte // from with a space after the colon
	hold     *hold  // the memory the reply being relayed holds
}

// rename replaces the upstream's model name in one JSON text, as compact
// encoders write the member and as Python's json.dumps does.
func (rw *relay) rename(b []byte) []byte {
	if rw.from == nil {
		return b
	}
	if bytes.Contains(b, rw.from) {
		b = bytes.ReplaceAll(b, rw.from, rw.to)
	}
	if bytes.Contains(b, rw.spaced) {
		b = bytes.ReplaceAll(b, rw.spaced, rw.to)
	}
	return b
}

// replyMember is the member a whole reply of each endpoint must have
// (by the path's last element: chat/completions and completions answer with
// choices, responses with output).
var replyMember = map[string]string{"completions": "choices", "responses": "output"}

// present records that a member is there without copying it.
type present bool

func (p *present) UnmarshalJSON([]byte) error { *p = true; return nil }

// whole relays a reply that is not a stream: read whole within the
// request's limit and the server's budget, a JSON object (with the
// endpoint's choices or output) or a 502, scrubbed.
func (rw *relay) whole(r *http.Request, resp *http.Response, path string) error {
	c := rw.c
	b, err := rw.read(r, resp.Body)
	switch {
	case err != nil:
		return err
	case int64(len(b)) > c.opts.MaxResponseBytes:
		return c.cut(errTooLarge)
	}
	var members struct {
		Choices present `json:"choices"`
		Output  present `json:"output"`
	}
	if json.Unmarshal(b, &members) != nil {
		return c.broken(r, resp, "sent a reply that is not a JSON object")
	}
	if m := replyMember[path[strings.LastIndex(path, "/")+1:]]; m == "choices" && !members.Choices || m == "output" && !members.Output {
		return c.broken(r, resp, fmt.Sprintf("sent a reply without %s", m))
	}
	if b, err = c.clean(b, rw.hold); err != nil {
		return c.cut(err)
	}
	c.count(strconv.Itoa(resp.StatusCode), "")
	b = rw.rename(b)
	rw.w.Header().Set("Content-Type", "application/json")
	rw.w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	rw.w.WriteHeader(resp.StatusCode)
	_, _ = rw.w.Write(b)
	return nil
}

// stream relays an SSE reply line by line, flushing at the end of each
// event, so every frame reaches the client as soon as the upstream sends
// it. Each line is scrubbed whole (held from the budget while it is read),
// and an event whose data is not JSON ends the stream. A client that stops
// reading (the write deadline) or leaves ends the relay, which cancels the
// upstream request; an upstream that breaks off, times out or sends what
// cannot be relayed ends the stream with an error frame.
func (rw *relay) stream(r *http.Request, resp *http.Response) error {
	h := rw.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	rw.w.WriteHeader(resp.StatusCode)
	if rw.flush() != nil {
		return nil
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var pending bool // bytes written since the last flush
	for {
		line, err := readLine(br, rw.hold)
		rw.c.opts.Metrics.addBytes(rw.c.opts.ID, "received", len(line))
		if err != nil && !errors.Is(err, io.EOF) {
			line = nil // a part of a line: never relayed
		}
		if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if data = bytes.TrimSpace(data); string(data) != "[DONE]" && !json.Valid(data) {
				rw.end(r, errors.New("not JSON"), "sent an event that is not JSON")
				return nil
			}
		}
		line, cerr := rw.c.clean(line, rw.hold)
		if cerr != nil {
			rw.end(r, cerr, "")
			return nil
		}
		line = rw.rename(line)
		rw.hold.release()
		if len(line) > 0 {
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
				rw.end(r, err, "")
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

// end ends a stream the upstream broke off (or that outlived the timeout,
// or that sent what cannot be relayed: what says how) with an error frame
// in the endpoint's shape.
func (rw *relay) end(r *http.Request, err error, what string) {
	e := rw.c.cut(err)
	if what != "" {
		e.Message = fmt.Sprintf("The model `%s` %s.", rw.c.opts.ID, what)
	}
	fields := map[string]any{"message": e.Message, "type": "server_error", "param": nil, "code": e.Code}
	var frame []byte
	if strings.HasSuffix(r.URL.Path, "/responses") {
		b, _ := json.Marshal(map[string]any{"type": "error", "code": e.Code, "message": e.Message, "param": nil})
		frame = append(append([]byte("event: error\ndata: "), b...), "\n\n"...)
	} else {
		b, _ := json.Marshal(map[string]any{"error": fields})
		frame = append(append([]byte("data: "), b...), "\n\ndata: [DONE]\n\n"...)
	}
	if _, werr := rw.w.Write(frame); werr == nil {
		_ = rw.flush()
	}
}
