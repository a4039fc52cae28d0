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
	chunks               []string // Chunks' replies; nil: "Hel", "lo" and usage
}

func (f *fakeRelay) Forward(w http.ResponseWriter, r *http.Request, path string, body []byte, servedAs string) error {
	f.path, f.body, f.servedAs = path, string(body), servedAs
	if f.err != nil {
		return f.err
	}
	writeJSON(w, http.StatusOK, map[string]string{"model": servedAs})
	return nil
}

// Chunks answers with chunks of "Hel" and "lo" and a usage chunk.
func (f *fakeRelay) Chunks(w http.ResponseWriter, r *http.Request, path string, body []byte, each func([]byte) error) error {
	f.path, f.body, f.servedAs = path, string(body), "big"
	if f.err != nil {
		return f.err
	}
	chunks := f.chunks
	if chunks == nil {
		chunks = []string{`{"choices":[{"delta":{"content":"Hel"}}]}`, `{"choices":[{"delta":{"content":"lo"},"finish_reason":"length"}]}`,
			`{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2}}`}
	}
	for _, c := range chunks {
		if err := each([]byte(c)); err != nil {
			return err
		}
	}
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
		{"ollama chat", []string{}, "/api/chat", chat("big:latest"), nil, 200, "/chat/completions", ""},
		{"ollama fallback", []string{}, "/api/chat", chat(model), nil, 200, "/chat/completions", "unavailable"},
		{"ollama no policy", nil, "/api/generate", fmt.Sprintf(`{"model":%q,"prompt":"hi"}`, model), nil, 503, "", ""},
		{"anthropic", nil, "/v1/messages", `{"model":"big","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, nil, 200, "/chat/completions", ""},
		{"anthropic fallback", []string{"unavailable"}, "/v1/messages", fmt.Sprintf(`{"model":%q,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, model), nil, 200, "/chat/completions", "unavailable"},
		{"anthropic no policy", nil, "/v1/messages", fmt.Sprintf(`{"model":%q,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, model), nil, 503, "", ""},
		{"anthropic count_tokens", nil, "/v1/messages/count_tokens", `{"model":"big","messages":[{"role":"user","content":"hi"}]}`, nil, 400, "", ""},
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
			converted := strings.HasPrefix(c.path, "/api/") || strings.HasPrefix(c.path, "/v1/messages")
			if c.forwarded != "" && ((relay.body != c.body && !converted) || relay.servedAs != "big" || rec.Header().Get(HeaderServedBy) != "big") {
				t.Errorf("forwarded %q as %q, served by %q", relay.body, relay.servedAs, rec.Header().Get(HeaderServedBy))
			}
			if logged := strings.Contains(logBuf.String(), `"served_by":"big"`); logged != (c.forwarded != "") {
				t.Errorf("access log (served_by %v): %s", logged, logBuf)
			}
			if rec.Code >= 400 && strings.HasPrefix(c.path, "/v1/messages") && !strings.HasPrefix(rec.Body.String(), `{"type":"error","error":{"type":"`) {
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

// TestOllamaUpstream: the Ollama endpoints served by an upstream: the
// request converted to a streamed OpenAI chat request, the chunks to
// Ollama's lines or one reply.
func TestOllamaUpstream(t *testing.T) {
	cases := []struct {
		name, path, body string
		status           int
		forwarded        []string // in the OpenAI body sent
		reply            []string // in the reply
	}{
		{"chat streamed", "/api/chat", `{"model":"big","messages":[{"role":"user","content":"hi"}],"options":{"num_predict":5,"temperature":0}}`, 200,
			[]string{`"messages":[{"role":"user","content":"hi"}]`, `"stream":true`, `"max_tokens":5`, `"temperature":0`},
			[]string{`"message":{"role":"assistant","content":"Hel"},"done":false}`, `"message":{"role":"assistant","content":"lo"},"done":false}`,
				`"done":true,"done_reason":"length"`, `"prompt_eval_count":7`, `"eval_count":2`}},
		{"generate whole", "/api/generate", `{"model":"big","system":"Be brief.","prompt":"hi","stream":false,"format":"json"}`, 200,
			[]string{`"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]`, `"response_format":{"type":"json_object"}`},
			[]string{`{"model":"big","created_at":`, `"response":"Hello","done":true,"done_reason":"length"`}},
		{"generate raw", "/api/generate", `{"model":"big","prompt":"hi","raw":true}`, 400, nil, []string{`{"error":"raw is not supported`}},
		{"images", "/api/chat", `{"model":"big","messages":[{"role":"user","content":"hi","images":["aGk="]}]}`, 400, nil, []string{`{"error":"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			relay := &fakeRelay{}
			s, _ := newTest(t, Options{Upstreams: []Upstream{{ID: "big", Relay: relay}}})
			rec := do(s, "POST", c.path, c.body, "Content-Type", "application/json")
			if rec.Code != c.status {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			for _, f := range c.forwarded {
				if !strings.Contains(relay.body, f) {
					t.Errorf("forwarded %s lacks %s", relay.body, f)
				}
			}
			for _, f := range c.reply {
				if !strings.Contains(rec.Body.String(), f) {
					t.Errorf("reply %s lacks %s", rec.Body, f)
				}
			}
		})
	}
}

// TestAnthropicUpstream: /v1/messages served by an upstream: the request
// converted to a streamed OpenAI chat request, the chunks to Anthropic's
// events or one Message, failures in Anthropic's error shape.
func TestAnthropicUpstream(t *testing.T) {
	const hi = `"messages":[{"role":"user","content":"hi"}]`
	toolChunks := []string{
		`{"choices":[{"delta":{"role":"assistant","content":"On it."}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_7","type":"function","function":{"name":"get","arguments":"{\"ci"}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\":\"Oslo\"}"}}]},"finish_reason":"tool_calls"}]}`,
		`{"choices":[],"usage":{"prompt_tokens":30,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":20}}}`,
	}
	cases := []struct {
		name, body string
		chunks     []string
		relayErr   error
		status     int
		forwarded  []string // in the OpenAI body sent
		reply      []string // in the reply, in this order
	}{
		{"whole", `{"model":"big","max_tokens":5,"system":[{"type":"text","text":"Be brief."}],"temperature":0,"top_k":3,"stop_sequences":["\n\n"],` + hi + `}`, nil, nil, 200,
			[]string{`"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]`, `"stream":true`, `"stream_options":{"include_usage":true}`,
				`"max_tokens":5`, `"temperature":0`, `"stop":["\n\n"]`},
			[]string{`{"id":"msg_`, `"type":"message","role":"assistant","model":"big","content":[{"type":"text","text":"Hello"}],"stop_reason":"max_tokens","stop_sequence":null,` +
				`"usage":{"input_tokens":7,"output_tokens":2,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`}},
		{"streamed", `{"model":"llama-70b","max_tokens":5,"stream":true,` + hi + `}`, nil, nil, 200, nil,
			[]string{"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_", `"model":"llama-70b"`, "event: ping\n",
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}",
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}`,
				`{"type":"content_block_stop","index":0}`,
				`{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"input_tokens":7,"output_tokens":2,`,
				"event: message_stop\ndata: {\"type\":\"message_stop\"}"}},
		{"tools streamed", `{"model":"big","max_tokens":50,"stream":true,"tools":[{"name":"get","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},` + hi + `}`,
			toolChunks, nil, 200,
			[]string{`"tools":[{"type":"function","function":{"name":"get","parameters":{"type":"object"}}}]`, `"tool_choice":"required"`},
			[]string{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"On it."}}`, `{"type":"content_block_stop","index":0}`,
				`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_7","name":"get","input":{}}}`,
				`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"ci"}}`,
				`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"ty\":\"Oslo\"}"}}`,
				`{"type":"content_block_stop","index":1}`,
				`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":10,"output_tokens":9,"cache_creation_input_tokens":0,"cache_read_input_tokens":20}}`}},
		{"tools whole", `{"model":"big","max_tokens":50,"tools":[{"name":"get","input_schema":{"type":"object"}}],` + hi + `}`, toolChunks, nil, 200, nil,
			[]string{`"content":[{"type":"text","text":"On it."},{"type":"tool_use","id":"toolu_7","name":"get","input":{"city":"Oslo"}}],"stop_reason":"tool_use"`}},
		{"prefill", `{"model":"big","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"{"}]}`, nil, nil, 400, nil,
			[]string{`{"type":"error","error":{"type":"invalid_request_error","message":"messages[1]: a final assistant turn (prefill) is not supported`}},
		{"no max_tokens", `{"model":"big",` + hi + `}`, nil, nil, 400, nil, []string{`"message":"max_tokens: Field required"`}},
		{"timeout", `{"model":"big","max_tokens":5,"stream":true,` + hi + `}`, nil,
			&upstream.Error{Status: 504, Code: "upstream_timeout", Message: "The model `big` did not answer within 1s."}, 504, nil,
			[]string{`{"type":"error","error":{"type":"timeout_error","message":"The model ` + "`big`" + ` did not answer within 1s."}}`}},
		{"unreachable", `{"model":"big","max_tokens":5,` + hi + `}`, nil,
			&upstream.Error{Status: 502, Code: "upstream_unreachable", Message: "The model `big` could not be reached."}, 502, nil,
			[]string{`{"type":"error","error":{"type":"api_error","message":"The model ` + "`big`" + ` could not be reached."}}`}},
		{"error chunk mid-stream", `{"model":"big","max_tokens":5,"stream":true,` + hi + `}`,
			[]string{`{"choices":[{"delta":{"content":"Hel"}}]}`, `{"error":{"message":"boom at http://10.0.0.5:8000"}}`}, nil, 200, nil,
			[]string{`"text":"Hel"`, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"The model `big` failed while answering.\"}}"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			relay := &fakeRelay{err: c.relayErr, chunks: c.chunks}
			s, _ := newTest(t, Options{Upstreams: []Upstream{{ID: "big", Aliases: []string{"llama-70b"}, Relay: relay}}})
			rec := do(s, "POST", "/v1/messages", c.body, "Content-Type", "application/json")
			if rec.Code != c.status {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			for _, f := range c.forwarded {
				if !strings.Contains(relay.body, f) {
					t.Errorf("forwarded %s lacks %s", relay.body, f)
				}
			}
			if strings.Contains(relay.body, "top_k") {
				t.Errorf("top_k went upstream: %s", relay.body)
			}
			body := rec.Body.String()
			for _, f := range c.reply {
				i := strings.Index(body, f)
				if i < 0 {
					t.Fatalf("reply %s lacks (in order) %s", rec.Body, f)
				}
				body = body[i+len(f):]
			}
			if strings.Contains(rec.Body.String(), "10.0.0.5") {
				t.Errorf("the upstream's address leaked: %s", rec.Body)
			}
		})
	}
}
