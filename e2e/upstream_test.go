package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The upstream tests run three real servers on 127.0.0.1: "up", a hexserve
// with the tiny bundle serving as the upstream (its own API key), "slow", a
// second upstream whose decode steps take 50 ms, and "front", whose local
// model ("tiny", a 256-token context, one request at a time (max_sequences 1)
// and queue_length 1, decode steps of 20 ms)
// falls back to "big" (up) and which also serves "slow" (timeout 1 s) and
// "down" (nothing listens).

// The tiny model at temperature 0 does not stop early on "The sea is".

const upstreamKey = "sk-upstream-secret-0451"

type upstreamRig struct {
	front, up, slow *hexserve
	downAddr        string
}

// ctxBundle writes the tiny bundle with another context length.
func ctxBundle(t *testing.T, ctx int) string {
	t.Helper()
	return mkmodelOnce(t, append([]string{"--ctx", fmt.Sprint(ctx)}, tinyFlags...)...)
}

// TestUpstream runs the upstream checks on one rig.
func TestUpstream(t *testing.T) {
	libs := hostsimLibs(t)
	r := &upstreamRig{}
	if err := r.start(t, libs); err != nil {
		t.Fatal(err)
	}
	t.Run("forward", func(t *testing.T) { testUpstreamForward(t, r) })
	t.Run("errors", func(t *testing.T) { testUpstreamErrors(t, r) })
	t.Run("disconnect", func(t *testing.T) { testUpstreamDisconnect(t, r) })
	t.Run("fallback", func(t *testing.T) { testUpstreamFallback(t, r) })
}

func (r *upstreamRig) start(t *testing.T, libs string) error {
	upCfg := config{Bundle: bundle(t), Server: fmt.Sprintf("  api_keys: [%q]", upstreamKey), Model: "  id: up-model"}.write(t, libs)
	var err error
	if r.up, err = launch(binary(t), upCfg); err != nil {
		return err
	}
	t.Cleanup(func() { r.up.stop() })
	if r.slow, err = launch(binary(t), upCfg, "HOSTSIM_LATENCY_US_DECODE=50000"); err != nil {
		return err
	}
	t.Cleanup(func() { r.slow.stop() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	r.downAddr = ln.Addr().String()
	ln.Close() // nothing listens there now
	models := fmt.Sprintf(`models:
  - id: big
    upstream: {base_url: %q, api_key_env: UPSTREAM_KEY, model: up-model}
  - id: slow
    upstream: {base_url: %q, api_key_env: UPSTREAM_KEY, model: up-model, timeout: 1s}
  - id: down
    upstream: {base_url: %q, api_key_env: UPSTREAM_KEY, connect_timeout: 2s}
  - id: wrongkey
    upstream: {base_url: %q, api_key_env: WRONG_KEY, model: up-model}
engine:
  queue_length: 1
  max_sequences: 1
`, r.up.URL+"/v1", r.slow.URL+"/v1", "http://"+r.downAddr+"/v1", r.up.URL+"/v1")
	frontCfg := config{Bundle: ctxBundle(t, 256), Server: fmt.Sprintf("  api_keys: [%q]", apiKey),
		Model: "  id: tiny\n  fallback: {to: big, when: [context_exceeded, queue_full]}", Extra: models}.write(t, libs)
	if r.front, err = launch(binary(t), frontCfg, "UPSTREAM_KEY="+upstreamKey, "WRONG_KEY=sk-wrong-1234", "HOSTSIM_LATENCY_US_DECODE=20000"); err != nil {
		return err
	}
	t.Cleanup(func() { r.front.stop() })
	for _, s := range []*hexserve{r.up, r.slow, r.front} {
		if err := s.waitHealthy(90 * time.Second); err != nil {
			return err
		}
	}
	return nil
}

// call posts body to s with key and returns the reply read in full.
func call(t *testing.T, s *hexserve, key, path, body string, header ...string) reply {
	t.Helper()
	return s.do(t, "POST", path, body, append([]string{"Content-Type", "application/json", "Authorization", "Bearer " + key}, header...)...)
}

// relayCase is one endpoint's request and how to read its text.
type relayCase struct {
	name, path, body string
	stream           bool
}

func relayCases(model string) []relayCase {
	chat := `{"model":%q,"messages":[{"role":"user","content":"Tell me about the sea."}],"temperature":0,"max_tokens":12,"stream":%v}`
	comp := `{"model":%q,"prompt":"The sea is","temperature":0,"max_tokens":12,"stream":%v}`
	resp := `{"model":%q,"input":"Tell me about the sea.","temperature":0,"max_output_tokens":16,"stream":%v}`
	var out []relayCase
	for _, stream := range []bool{false, true} {
		out = append(out,
			relayCase{"chat", "/v1/chat/completions", fmt.Sprintf(chat, model, stream), stream},
			relayCase{"completions", "/v1/completions", fmt.Sprintf(comp, model, stream), stream},
			relayCase{"responses", "/v1/responses", fmt.Sprintf(resp, model, stream), stream})
	}
	return out
}

// textOf is the generated text of a reply of path and the model fields it
// names.
func textOf(t *testing.T, path string, stream bool, body string) (text string, models []string) {
	t.Helper()
	type choice struct {
		Text    string `json:"text"`
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	}
	type doc struct {
		Model   string   `json:"model"`
		Choices []choice `json:"choices"`
		Output  []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
		Type     string `json:"type"`
		Delta    string `json:"delta"`
		Response *struct {
			Model string `json:"model"`
		} `json:"response"`
	}
	var docs []string
	if !stream {
		docs = []string{body}
	} else {
		for _, line := range strings.Split(body, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" {
				docs = append(docs, d)
			}
		}
	}
	var b strings.Builder
	for _, d := range docs {
		var v doc
		if err := json.Unmarshal([]byte(d), &v); err != nil {
			t.Fatalf("%s: %v in %s", path, err, d)
		}
		if v.Model != "" {
			models = append(models, v.Model)
		}
		if v.Response != nil && v.Response.Model != "" {
			models = append(models, v.Response.Model)
		}
		for _, c := range v.Choices {
			b.WriteString(c.Text + c.Message.Content + c.Delta.Content)
		}
		if v.Type == "response.output_text.delta" {
			b.WriteString(v.Delta)
		}
		if !stream {
			for _, o := range v.Output {
				for _, c := range o.Content {
					b.WriteString(c.Text)
				}
			}
		}
	}
	return b.String(), models
}

// testUpstreamForward checks chat, completions and responses, streamed and
// not, through the front: the same text as asking the upstream directly,
// the model field and X-Hexserve-Served-By naming "big", the client's key
// never reaching the upstream (it accepts only its own).
func testUpstreamForward(t *testing.T, r *upstreamRig) {
	direct := relayCases("up-model")
	for i, c := range relayCases("big") {
		t.Run(fmt.Sprintf("%s/stream=%v", c.name, c.stream), func(t *testing.T) {
			want := call(t, r.up, upstreamKey, c.path, direct[i].body)
			got := call(t, r.front, apiKey, c.path, c.body)
			if want.Status != 200 || got.Status != 200 {
				t.Fatalf("direct %d %s\nrelayed %d %s", want.Status, want.Body, got.Status, got.Body)
			}
			wantText, _ := textOf(t, c.path, c.stream, want.Body)
			gotText, models := textOf(t, c.path, c.stream, got.Body)
			if wantText == "" || gotText != wantText {
				t.Errorf("relayed text %q, direct %q", gotText, wantText)
			}
			for _, m := range models {
				if m != "big" {
					t.Errorf("model field %q, want big", m)
				}
			}
			if len(models) == 0 {
				t.Error("no model field")
			}
			if h := got.Header.Get("X-Hexserve-Served-By"); h != "big" {
				t.Errorf("X-Hexserve-Served-By %q", h)
			}
		})
	}
	// The Ollama API, converted: the same text as the upstream's own /api/chat and /api/generate.
	for _, c := range []struct{ path, body string }{
		{"/api/chat", `{"model":%q,"messages":[{"role":"user","content":"Tell me about the sea."}],"options":{"temperature":0,"num_predict":12},"stream":%v}`},
		{"/api/generate", `{"model":%q,"prompt":"Tell me about the sea.","options":{"temperature":0,"num_predict":12},"stream":%v}`},
	} {
		for _, stream := range []bool{false, true} {
			want := call(t, r.up, upstreamKey, c.path, fmt.Sprintf(c.body, "up-model", stream))
			got := call(t, r.front, apiKey, c.path, fmt.Sprintf(c.body, "big", stream))
			wt, gt := ollamaText(t, want.Body), ollamaText(t, got.Body)
			if want.Status != 200 || got.Status != 200 || wt == "" || gt != wt || !strings.Contains(got.Body, `"model":"big"`) {
				t.Errorf("%s stream=%v: relayed %d %q, direct %d %q\n%s", c.path, stream, got.Status, gt, want.Status, wt, got.Body)
			}
		}
	}
	// The Anthropic API, converted: the same text as the upstream's own /v1/messages.
	for _, stream := range []bool{false, true} {
		body := `{"model":%q,"max_tokens":12,"temperature":0,"system":"Be brief.","messages":[{"role":"user","content":"Tell me about the sea."}],"stream":%v}`
		want := call(t, r.up, upstreamKey, "/v1/messages", fmt.Sprintf(body, "up-model", stream))
		got := call(t, r.front, apiKey, "/v1/messages", fmt.Sprintf(body, "big", stream), "anthropic-version", "2023-06-01")
		wt, _ := anthropicText(t, want.Body, stream)
		gt, models := anthropicText(t, got.Body, stream)
		if want.Status != 200 || got.Status != 200 || wt == "" || gt != wt || strings.Join(models, ",") != "big" || got.Header.Get("X-Hexserve-Served-By") != "big" {
			t.Errorf("/v1/messages stream=%v: relayed %d %q %v, direct %d %q\n%s", stream, got.Status, gt, models, want.Status, wt, got.Body)
		}
		if stream && !strings.HasSuffix(strings.TrimSpace(got.Body), `data: {"type":"message_stop"}`) {
			t.Errorf("the relayed stream does not end with message_stop:\n%s", got.Body)
		}
	}

	// The listing and health.
	if l := r.front.do(t, "GET", "/v1/models", "", "Authorization", "Bearer "+apiKey); !strings.Contains(l.Body, `{"id":"big","object":"model",`) ||
		!strings.Contains(l.Body, `"owned_by":"upstream","status":"upstream","loaded":false,"upstream":true}`) {
		t.Errorf("/v1/models: %s", l.Body)
	}
	h := r.front.do(t, "GET", "/health", "", "Authorization", "Bearer "+apiKey) // with keys set, the figures are for key holders
	if h.Status != 200 || !strings.Contains(h.Body, `"big":{"reachable":true}`) || !strings.Contains(h.Body, `"down":{"error":"unreachable","reachable":false}`) {
		t.Errorf("/health: %d %s", h.Status, h.Body)
	}
	m := r.frontMetrics(t)
	for _, series := range []string{`hexserve_upstream_requests_total{model="big",status="200"}`, `hexserve_upstream_bytes_total{direction="received",model="big"}`,
		`hexserve_upstream_latency_seconds_count{model="big"}`} {
		if !strings.Contains(m, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	if strings.Contains(r.front.log.String(), upstreamKey) {
		t.Error("the front's log holds the upstream key")
	}
}

func (r *upstreamRig) frontMetrics(t *testing.T) string {
	t.Helper()
	return r.front.do(t, "GET", "/metrics", "", "Authorization", "Bearer "+apiKey).Body
}

// ollamaText joins the text of an Ollama reply's lines.
func ollamaText(t *testing.T, body string) string {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		var v struct {
			Response string
			Message  struct{ Content string }
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("%v in %s", err, line)
		}
		b.WriteString(v.Response + v.Message.Content)
	}
	return b.String()
}

// anthropicText is the text of a Messages reply (a Message, or its stream
// of events) and the model fields it names.
func anthropicText(t *testing.T, body string, stream bool) (text string, models []string) {
	t.Helper()
	type event struct {
		Type    string `json:"type"`
		Model   string `json:"model"`
		Message *struct {
			Model string `json:"model"`
		} `json:"message"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Delta struct {
			Text string `json:"text"`
		} `json:"delta"`
	}
	docs := []string{body}
	if stream {
		docs = nil
		for _, line := range strings.Split(body, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				docs = append(docs, d)
			}
		}
	}
	var b strings.Builder
	for _, d := range docs {
		var e event
		if err := json.Unmarshal([]byte(d), &e); err != nil {
			t.Fatalf("%v in %s", err, d)
		}
		if e.Model != "" {
			models = append(models, e.Model)
		}
		if e.Message != nil {
			models = append(models, e.Message.Model)
		}
		for _, c := range e.Content {
			b.WriteString(c.Text)
		}
		if e.Type == "content_block_delta" {
			b.WriteString(e.Delta.Text)
		}
	}
	return b.String(), models
}

// clean fails when a client-visible reply names an upstream's address or
// key.
func (r *upstreamRig) clean(t *testing.T, rep reply) {
	t.Helper()
	for _, s := range []string{upstreamKey, "sk-wrong-1234", r.up.URL, r.slow.URL, r.downAddr, strings.TrimPrefix(r.up.URL, "http://"),
		strings.TrimPrefix(r.slow.URL, "http://"), "127.0.0.1"} {
		if strings.Contains(rep.Body, s) {
			t.Errorf("reply leaks %q: %s", s, rep.Body)
		}
		for k, vs := range rep.Header {
			for _, v := range vs {
				if strings.Contains(v, s) {
					t.Errorf("header %s leaks %q", k, s)
				}
			}
		}
	}
}

// testUpstreamErrors checks an upstream that is down (502 at once), slow
// (504 at the timeout; a stream ends with an error frame) and that refuses
// the request (its 400 relayed), all without the address or key.
func testUpstreamErrors(t *testing.T, r *upstreamRig) {
	long := `{"model":"slow","prompt":"The sea is","max_tokens":100,"stream":%v}`
	cases := []struct {
		name, body string
		status     int
		code       string
		min, max   time.Duration
	}{
		{"down", `{"model":"down","prompt":"x","max_tokens":1}`, 502, "upstream_unreachable", 0, time.Second},
		{"slow", fmt.Sprintf(long, false), 504, "upstream_timeout", 900 * time.Millisecond, 3 * time.Second},
		{"slow stream", fmt.Sprintf(long, true), 200, "upstream_timeout", 900 * time.Millisecond, 3 * time.Second},
		{"refused", `{"model":"big","prompt":"x","temperature":5}`, 400, "", 0, 5 * time.Second},
		{"key refused", `{"model":"wrongkey","prompt":"x","max_tokens":1}`, 502, "upstream_auth", 0, 5 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			rep := call(t, r.front, apiKey, "/v1/completions", c.body)
			d := time.Since(start)
			if rep.Status != c.status || !strings.Contains(rep.Body, c.code) {
				t.Fatalf("%d %s, want %d %s", rep.Status, rep.Body, c.status, c.code)
			}
			if d < c.min || d > c.max {
				t.Errorf("took %v, want %v…%v", d, c.min, c.max)
			}
			if c.name == "refused" && !strings.Contains(rep.Body, `"param":"temperature"`) {
				t.Errorf("the upstream's error body is not relayed: %s", rep.Body)
			}
			r.clean(t, rep)
		})
	}
	// The same failures on /v1/messages, in Anthropic's error shape.
	msg := `{"model":%q,"max_tokens":100,"messages":[{"role":"user","content":"The sea is"}],"stream":%v}`
	for _, c := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"anthropic down", fmt.Sprintf(msg, "down", false), 502, `{"type":"error","error":{"type":"api_error","message":"The model ` + "`down`" + ` could not be reached."}}`},
		{"anthropic slow", fmt.Sprintf(msg, "slow", false), 504, `{"type":"error","error":{"type":"timeout_error","message":"The model ` + "`slow`" + ` did not finish within 1s."}}`},
		{"anthropic slow stream", fmt.Sprintf(msg, "slow", true), 200, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"timeout_error\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := call(t, r.front, apiKey, "/v1/messages", c.body)
			if rep.Status != c.status || !strings.Contains(rep.Body, c.want) {
				t.Fatalf("%d %s, want %d %s", rep.Status, rep.Body, c.status, c.want)
			}
			r.clean(t, rep)
		})
	}
	if m := r.frontMetrics(t); !strings.Contains(m, `hexserve_upstream_errors_total{kind="unreachable",model="down"}`) ||
		!strings.Contains(m, `hexserve_upstream_errors_total{kind="timeout",model="slow"}`) {
		t.Errorf("/metrics lacks the upstream errors")
	}
}

// testUpstreamDisconnect checks that a client leaving a relayed request
// cancels the upstream request: the upstream's access log shows 499 for a
// request still generating (the request id is the one the front passed
// on), and a relayed stream ends at once upstream (its 200 is sent).
func testUpstreamDisconnect(t *testing.T, r *upstreamRig) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			id := fmt.Sprintf("disconnect-%d", time.Now().UnixNano())
			req, _ := http.NewRequestWithContext(ctx, "POST", r.front.URL+"/v1/completions",
				strings.NewReader(fmt.Sprintf(`{"model":"slow","prompt":"The sea is","temperature":0,"max_tokens":200,"stream":%v}`, stream)))
			req.Header.Set("Authorization", "Bearer "+apiKey)
			req.Header.Set("X-Request-Id", id)
			time.AfterFunc(300*time.Millisecond, cancel) // mid-generation, within slow's 1 s timeout
			start := time.Now()
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			line := r.slow.accessLine(t, id)
			if want := `"status":499`; !stream && !strings.Contains(line, want) {
				t.Errorf("upstream access log: %s, want %s", line, want)
			}
			if d := time.Since(start); d > 2*time.Second { // 200 tokens take 10 s
				t.Errorf("the upstream request ended %v after the start (%s)", d, line)
			}
		})
	}
}

// accessLine waits up to 5 s for s's access-log line of request id.
func (s *hexserve) accessLine(t *testing.T, id string) string {
	t.Helper()
	want := fmt.Sprintf(`"request_id":%q`, id)
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		for _, line := range strings.Split(s.log.String(), "\n") {
			if strings.Contains(line, want) && strings.Contains(line, `"message":"request"`) {
				return line
			}
		}
		if time.Now().After(end) {
			t.Fatalf("no access-log line for request %s within 5s:\n%s", id, s.log)
		}
	}
}

// queued matches the engine's queue depth of 1 (labelled by model or not).
var queued = regexp.MustCompile(`\nhexserve_queue_depth(\{[^}]*\})? 1\n`)

// testUpstreamFallback checks the local model's fallback: a prompt beyond
// its 256-token context and a request that finds its queue full are served
// by "big", saying so; a local request within its limits stays local.
func testUpstreamFallback(t *testing.T, r *upstreamRig) {
	long := strings.Repeat("The sea is wide and deep. ", 40) // ~280 tokens
	rep := call(t, r.front, apiKey, "/v1/completions", fmt.Sprintf(`{"model":"tiny","prompt":%q,"max_tokens":4,"temperature":0}`, long))
	if rep.Status != 200 || rep.Header.Get("X-Hexserve-Fallback") != "context_exceeded" || rep.Header.Get("X-Hexserve-Served-By") != "big" ||
		!strings.Contains(rep.Body, `"model":"big"`) {
		t.Fatalf("too long a prompt: %d %v %s", rep.Status, rep.Header, rep.Body)
	}
	oll := call(t, r.front, apiKey, "/api/generate", fmt.Sprintf(`{"model":"tiny","prompt":%q,"options":{"num_predict":4},"stream":false}`, long))
	if oll.Status != 200 || oll.Header.Get("X-Hexserve-Fallback") != "context_exceeded" || !strings.Contains(oll.Body, `"model":"big"`) {
		t.Fatalf("too long a prompt on /api/generate: %d %v %s", oll.Status, oll.Header, oll.Body)
	}
	ant := call(t, r.front, apiKey, "/v1/messages", fmt.Sprintf(`{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":%q}]}`, long))
	if ant.Status != 200 || ant.Header.Get("X-Hexserve-Fallback") != "context_exceeded" || !strings.Contains(ant.Body, `"type":"message","role":"assistant","model":"big"`) {
		t.Fatalf("too long a prompt on /v1/messages: %d %v %s", ant.Status, ant.Header, ant.Body)
	}
	local := call(t, r.front, apiKey, "/v1/completions", `{"model":"tiny","prompt":"The sea","max_tokens":2}`)
	if local.Status != 200 || local.Header.Get("X-Hexserve-Served-By") != "" || !strings.Contains(local.Body, `"model":"tiny"`) {
		t.Fatalf("local request: %d %v %s", local.Status, local.Header, local.Body)
	}

	// queue_length 1: one request runs, one waits, the third falls back.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; i < 2; i++ {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, "POST", r.front.URL+"/v1/completions",
				strings.NewReader(`{"model":"tiny","prompt":"The sea is","temperature":0,"max_tokens":100,"stream":true}`))
			req.Header.Set("Authorization", "Bearer "+apiKey)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	for end := time.Now().Add(10 * time.Second); !queued.MatchString(r.frontMetrics(t)); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the second request did not queue within 10s")
		}
	}
	busy := call(t, r.front, apiKey, "/v1/completions", `{"model":"tiny","prompt":"The sea","max_tokens":2}`)
	if busy.Status != 200 || busy.Header.Get("X-Hexserve-Fallback") != "queue_full" || !strings.Contains(busy.Body, `"model":"big"`) {
		t.Fatalf("full queue: %d %v %s\n%s", busy.Status, busy.Header, busy.Body, r.front.log)
	}
	cancel()
	wg.Wait()
	m := r.frontMetrics(t)
	for reason, n := range map[string]int{"context_exceeded": 3, "queue_full": 1} {
		if s := fmt.Sprintf(`hexserve_fallbacks_total{model="tiny",reason=%q,to="big"} %d`, reason, n); !strings.Contains(m, s) {
			t.Errorf("/metrics lacks %s", s)
		}
	}
}
