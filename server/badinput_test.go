package server_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/inferencetest"
	"github.com/hexserve/hexserve/internal/syncbuf"
	"github.com/hexserve/hexserve/internal/testhttp"
	"github.com/hexserve/hexserve/server"
	"github.com/hexserve/hexserve/tokenizer/tokenizertest"
	"github.com/rs/zerolog"
)

const (
	modelID = "llama-3.2-1b-instruct"
	apiKey  = "sk-test-secret-key-0123456789"
)

var loadTok = tokenizertest.Llama32

// rig is a real server (router, middleware, engine) on a loopback
// httptest listener, serving the scripted fake model with the real
// Llama-3.2 tokenizer.
type rig struct {
	URL    string
	Model  *inferencetest.Model
	Engine *inference.Engine
	Log    *syncbuf.Buffer
	srv    *httptest.Server
}

type rigOptions struct {
	opts      server.Options
	engine    inference.Config
	script    []int32
	logLevel  zerolog.Level
	configure func(*httptest.Server)
	// wrap, when set, wraps the fake model the engine runs.
	wrap func(inference.Model) inference.Model
	// model, when set, adjusts the served model (aliases) before it is set.
	model func(*server.Model)
}

func newRig(t testing.TB, ro rigOptions) *rig {
	t.Helper()
	tok := loadTok(t)
	script := ro.script
	if script == nil {
		script = tok.Encode(" Hello there, general Kenobi.", false, false)
	}
	specials := tok.Specials()
	fake := inferencetest.NewScripted(inference.ModelInfo{Name: "fake", VocabSize: 128256, ContextLen: 512,
		BOS: specials.BOS, EOS: []int32{128009}}, script)
	log := &syncbuf.Buffer{}
	if ro.logLevel == 0 {
		ro.logLevel = zerolog.InfoLevel
	}
	logger := zerolog.New(log).Level(ro.logLevel)
	ro.engine.Logger = logger
	var model inference.Model = fake
	if ro.wrap != nil {
		model = ro.wrap(fake)
	}
	eng := inference.New(model, tok, ro.engine)
	ro.opts.Logger = logger
	s := server.New(ro.opts)
	sm := &server.Model{ID: modelID, Aliases: []string{"gpt-4o-mini"}, Created: time.Unix(1700000000, 0),
		ContextLen: 512, Tokenizer: tok, Engine: eng, Health: eng.Healthy}
	if ro.model != nil {
		ro.model(sm)
	}
	s.SetModel(sm)
	hs := httptest.NewUnstartedServer(s)
	if ro.configure != nil {
		ro.configure(hs)
	}
	hs.Start()
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		eng.Close()
	})
	return &rig{URL: hs.URL, Model: fake, Engine: eng, Log: log, srv: hs}
}

type reply = testhttp.Reply

// expect does the request and fails t unless the reply's status is status.
func (r *rig) expect(t testing.TB, status int, method, path, body string, hdr ...string) reply {
	t.Helper()
	rep := r.do(t, method, path, body, hdr...)
	if rep.Status != status {
		t.Fatalf("status %d, want %d; body %s", rep.Status, status, rep.Body)
	}
	return rep
}

func (r *rig) do(t testing.TB, method, path, body string, hdr ...string) reply {
	t.Helper()
	if body != "" {
		hdr = append([]string{"Content-Type", "application/json"}, hdr...)
	}
	return testhttp.Do(t, method, r.URL+path, body, hdr...)
}

// openAIError is the OpenAI error envelope with nullable fields kept as such.
type openAIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func decodeError(t testing.TB, rep reply) openAIError {
	t.Helper()
	if ct := rep.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q, body %s", ct, rep.Body)
	}
	var raw map[string]map[string]json.RawMessage
	if err := json.Unmarshal(rep.Body, &raw); err != nil {
		t.Fatalf("error body %s: %v", rep.Body, err)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := raw["error"][k]; !ok {
			t.Fatalf("error object lacks %q: %s", k, rep.Body)
		}
	}
	var env struct{ Error openAIError }
	if err := json.Unmarshal(rep.Body, &env); err != nil {
		t.Fatal(err)
	}
	if env.Error.Message == "" {
		t.Fatalf("empty error message: %s", rep.Body)
	}
	return env.Error
}

func orNull(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

func (r *rig) assertHealthy(t testing.TB) {
	t.Helper()
	if rep := r.do(t, "GET", "/health", ""); rep.Status != 200 {
		t.Fatalf("/health after the bad request: %d %s", rep.Status, rep.Body)
	}
}

// chatBody is a valid chat request with extra top-level fields merged in.
func chatBody(extra string) string {
	return object(`"model":"`+modelID+`","messages":[{"role":"user","content":"Hi"}]`, extra)
}

// object is the JSON object of members and, unless it is "", extra.
func object(members, extra string) string {
	if extra != "" {
		members += "," + extra
	}
	return "{" + members + "}"
}

func complBody(extra string) string {
	return object(`"model":"`+modelID+`","prompt":"Once upon a time"`, extra)
}

// badCase is one row of an OpenAI bad-input table: a request and the
// status and error body it gets.
type badCase struct {
	name     string
	rig      *rig   // nil: the table's
	method   string // "": POST
	path     string // "": the table's
	body     string
	hdr      []string
	status   int
	typ      string // "": invalid_request_error
	code     string // "" means null
	param    string // "" means null; "*" means any
	contains []string
	bug      string // a known bug: the case is skipped with this text
}

// check sends c (with r and path unless c names its own) and checks the
// status, the OpenAI error body and its headers, and that the server still
// answers afterwards.
func (c badCase) check(t *testing.T, r *rig, path string) {
	if c.bug != "" {
		t.Skip(c.bug)
	}
	rg := cmp.Or(c.rig, r)
	rep := rg.expect(t, c.status, cmp.Or(c.method, "POST"), cmp.Or(c.path, path), c.body, c.hdr...)
	if c.status == 200 {
		rg.assertHealthy(t)
		return
	}
	e := decodeError(t, rep)
	if typ := cmp.Or(c.typ, server.TypeInvalidRequest); e.Type != typ {
		t.Errorf("type %q, want %q (%s)", e.Type, typ, rep.Body)
	}
	if got, want := orNull(e.Code), c.code; (want == "" && e.Code != nil) || (want != "" && got != want) {
		t.Errorf("code %s, want %q (%s)", got, want, rep.Body)
	}
	switch {
	case c.param == "*":
	case c.param == "" && e.Param != nil:
		t.Errorf("param %q, want null (%s)", *e.Param, rep.Body)
	case c.param != "" && orNull(e.Param) != c.param:
		t.Errorf("param %s, want %q (%s)", orNull(e.Param), c.param, rep.Body)
	}
	for _, s := range c.contains {
		if !strings.Contains(e.Message, s) {
			t.Errorf("message %q lacks %q", e.Message, s)
		}
	}
	if c.status == 401 && rep.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("401 without WWW-Authenticate")
	}
	if c.status == 405 && rep.Header.Get("Allow") == "" {
		t.Errorf("405 without Allow")
	}
	rg.assertHealthy(t)
}

// TestBadInput sends malformed and out-of-range requests over HTTP and
// checks each gets the right status and OpenAI error body, and that the
// server still answers /health (and a valid request) afterwards.
func TestBadInput(t *testing.T) {
	const limit = 64 << 10
	r := newRig(t, rigOptions{opts: server.Options{BodyLimit: limit}})
	rAuth := newRig(t, rigOptions{opts: server.Options{APIKeys: []string{apiKey}}})
	longPrompt := strings.Repeat("hello ", 600)                        // ~600 tokens > 512 context
	longPromptTokens := len(loadTok(t).Encode(longPrompt, true, true)) // with BOS
	nested := func(n, depth int) string {                              // n tools whose parameters nest depth arrays
		tools := make([]string, n)
		for i := range tools {
			tools[i] = fmt.Sprintf(`{"type":"function","function":{"name":"f%d","parameters":%s%s}}`, i, strings.Repeat("[", depth), strings.Repeat("]", depth))
		}
		return `"tools":[` + strings.Join(tools, ",") + `]`
	}
	stops17 := `"stop":[` + strings.TrimSuffix(strings.Repeat(`"x",`, 17), ",") + `]`

	chat, compl := "/v1/chat/completions", "/v1/completions"
	inv, srvErr := server.TypeInvalidRequest, server.TypeServer
	cases := []badCase{
		{name: "invalid JSON", path: chat, body: `{"model":`, status: 400, typ: inv},
		{name: "invalid JSON garbage", path: compl, body: `hello`, status: 400, typ: inv},
		{name: "empty body", path: chat, body: ``, status: 400, typ: inv, contains: []string{"empty"}},
		{name: "trailing data", path: chat, body: chatBody("") + `{}`, status: 400, typ: inv},
		{name: "JSON array not object", path: chat, body: `[1,2,3]`, status: 400, typ: inv},
		{name: "JSON string not object", path: compl, body: `"prompt"`, status: 400, typ: inv},
		{name: "JSON null", path: chat, body: `null`, status: 400, typ: inv, param: "*"},
		{name: "wrong type model", path: chat, body: `{"model":7,"messages":[]}`, status: 400, typ: inv, param: "model"},
		{name: "wrong type messages", path: chat, body: `{"model":"` + modelID + `","messages":"hi"}`, status: 400, typ: inv, param: "messages"},
		{name: "wrong type temperature", path: chat, body: chatBody(`"temperature":"hot"`), status: 400, typ: inv, param: "temperature"},
		{name: "wrong type max_tokens", path: compl, body: complBody(`"max_tokens":1.5`), status: 400, typ: inv, param: "max_tokens"},
		{name: "wrong type stream", path: chat, body: chatBody(`"stream":"yes"`), status: 400, typ: inv, param: "stream"},
		{name: "wrong type stop", path: chat, body: chatBody(`"stop":5`), status: 400, typ: inv, param: "stop"},
		{name: "wrong type content", path: chat, body: `{"model":"` + modelID + `","messages":[{"role":"user","content":5}]}`, status: 400, typ: inv, param: "messages[0].content"},
		{name: "wrong type prompt", path: compl, body: `{"model":"` + modelID + `","prompt":{"a":1}}`, status: 400, typ: inv, param: "prompt"},
		{name: "missing messages", path: chat, body: `{"model":"` + modelID + `"}`, status: 400, typ: inv, param: "messages"},
		{name: "empty messages", path: chat, body: `{"model":"` + modelID + `","messages":[]}`, status: 400, typ: inv, param: "messages"},
		{name: "missing prompt", path: compl, body: `{"model":"` + modelID + `"}`, status: 400, typ: inv, param: "prompt"},
		{name: "empty prompt array", path: compl, body: `{"model":"` + modelID + `","prompt":[]}`, status: 400, typ: inv, param: "prompt"},
		{name: "missing model", path: chat, body: `{"messages":[{"role":"user","content":"Hi"}]}`, status: 400, typ: inv, param: "model"},
		{name: "developer role is system", path: chat, body: `{"model":"` + modelID + `","messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":2}`, status: 200},
		{name: "unknown role", path: chat, body: `{"model":"` + modelID + `","messages":[{"role":"wizard","content":"Hi"}]}`, status: 400, typ: inv, param: "messages[0].role"},
		{name: "image content part", path: chat, body: `{"model":"` + modelID + `","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://x/y.png"}}]}]}`,
			status: 400, typ: inv, param: "messages[0].content[0].type", contains: []string{"not supported"}},
		{name: "audio content part", path: chat, body: `{"model":"` + modelID + `","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"input_audio"}]}]}`,
			status: 400, typ: inv, param: "messages[0].content[1].type"},
		{name: "unknown model chat", path: chat, body: `{"model":"gpt-5","messages":[{"role":"user","content":"Hi"}]}`, status: 404, typ: inv, code: "model_not_found", param: "model"},
		{name: "unknown model completions", path: compl, body: `{"model":"gpt-5","prompt":"x"}`, status: 404, typ: inv, code: "model_not_found", param: "model"},
		{name: "unknown model GET", method: "GET", path: "/v1/models/gpt-5", status: 404, typ: inv, code: "model_not_found", param: "model"},
		{name: "prompt over context chat", path: chat, body: `{"model":"` + modelID + `","messages":[{"role":"user","content":"` + longPrompt + `"}]}`,
			status: 400, typ: inv, code: "context_length_exceeded", param: "messages", contains: []string{"512 tokens", "resulted in"}},
		{name: "prompt over context completions", path: compl, body: `{"model":"` + modelID + `","prompt":"` + longPrompt + `","max_tokens":10}`,
			status: 400, typ: inv, code: "context_length_exceeded", param: "prompt", contains: []string{"512 tokens", fmt.Sprintf("resulted in %d tokens", longPromptTokens), "10 in the completion"}},
		{name: "max_tokens 0", path: chat, body: chatBody(`"max_tokens":0`), status: 400, typ: inv, param: "max_tokens"},
		{name: "max_tokens negative", path: compl, body: complBody(`"max_tokens":-5`), status: 400, typ: inv, param: "max_tokens"},
		{name: "max_completion_tokens 0", path: chat, body: chatBody(`"max_completion_tokens":0`), status: 400, typ: inv, param: "max_completion_tokens"},
		{name: "temperature -0.1", path: chat, body: chatBody(`"temperature":-0.1`), status: 400, typ: inv, param: "temperature"},
		{name: "temperature 2.5", path: compl, body: complBody(`"temperature":2.5`), status: 400, typ: inv, param: "temperature"},
		{name: "top_p 0", path: chat, body: chatBody(`"top_p":0`), status: 400, typ: inv, param: "top_p"},
		{name: "top_p 1.01", path: chat, body: chatBody(`"top_p":1.01`), status: 400, typ: inv, param: "top_p"},
		{name: "presence_penalty 3", path: chat, body: chatBody(`"presence_penalty":3`), status: 400, typ: inv, param: "presence_penalty"},
		{name: "frequency_penalty -2.5", path: compl, body: complBody(`"frequency_penalty":-2.5`), status: 400, typ: inv, param: "frequency_penalty"},
		{name: "n over limit", path: chat, body: chatBody(`"n":9`), status: 400, typ: inv, param: "n"},
		{name: "n 0", path: compl, body: complBody(`"n":0`), status: 400, typ: inv, param: "n"},
		{name: "too many stops", path: chat, body: chatBody(stops17), status: 400, typ: inv, param: "stop"},
		{name: "empty stop", path: chat, body: chatBody(`"stop":[""]`), status: 400, typ: inv, param: "stop"},
		{name: "logit_bias key not a number", path: chat, body: chatBody(`"logit_bias":{"abc":1}`), status: 400, typ: inv, param: "logit_bias"},
		{name: "logit_bias key out of vocab", path: chat, body: chatBody(`"logit_bias":{"999999":1}`), status: 400, typ: inv, param: "logit_bias"},
		{name: "logit_bias key negative", path: compl, body: complBody(`"logit_bias":{"-1":1}`), status: 400, typ: inv, param: "logit_bias"},
		{name: "logit_bias value too big", path: chat, body: chatBody(`"logit_bias":{"42":101}`), status: 400, typ: inv, param: "logit_bias"},
		{name: "logit_bias value wrong type", path: chat, body: chatBody(`"logit_bias":{"42":"x"}`), status: 400, typ: inv, param: "logit_bias"},
		{name: "wrong type role", path: chat, body: `{"model":"` + modelID + `","messages":[{"role":7,"content":"x"}]}`, status: 400, typ: inv, param: "messages[0].role"},
		{name: "top_logprobs 21", path: chat, body: chatBody(`"logprobs":true,"top_logprobs":21`), status: 400, typ: inv, param: "top_logprobs"},
		{name: "top_logprobs without logprobs", path: chat, body: chatBody(`"top_logprobs":2`), status: 400, typ: inv, param: "top_logprobs"},
		{name: "top_logprobs 0 with logprobs false", path: chat, body: chatBody(`"logprobs":false,"top_logprobs":0`), status: 200},
		{name: "completions logprobs 21", path: compl, body: complBody(`"logprobs":21`), status: 400, typ: inv, param: "logprobs"},
		{name: "token id out of range", path: compl, body: `{"model":"` + modelID + `","prompt":[128000,999999]}`, status: 400, typ: inv, param: "prompt"},
		{name: "token id negative", path: compl, body: `{"model":"` + modelID + `","prompt":[-3]}`, status: 400, typ: inv, param: "prompt"},
		{name: "invalid UTF-8 in JSON string", path: chat, body: "{\"model\":\"" + modelID + "\",\"messages\":[{\"role\":\"user\",\"content\":\"a\xff\xfeb\"}],\"max_tokens\":2}",
			status: 400, typ: inv, param: "messages[0].content", contains: []string{"UTF-8"}},
		{name: "invalid UTF-8 in second message", path: chat, body: "{\"model\":\"" + modelID + "\",\"messages\":[{\"role\":\"system\",\"content\":\"ok\"},{\"role\":\"user\",\"content\":\"caf\xc3\"}]}",
			status: 400, typ: inv, param: "messages[1].content", contains: []string{"UTF-8"}},
		{name: "lone high surrogate escape", path: chat, body: `{"model":"` + modelID + `","messages":[{"role":"user","content":"a\ud800b"}],"max_tokens":2}`,
			status: 400, typ: inv, param: "messages[0].content", contains: []string{"lone surrogate", `\ud800`}},
		{name: "surrogate pair and escaped backslash are fine", path: chat, body: `{"model":"` + modelID + `","messages":[{"role":"user","content":"\ud83d\ude00 \\ud800"}],"max_tokens":2}`, status: 200},
		{name: "lone low surrogate escape", path: compl, body: `{"model":"` + modelID + `","prompt":"\uDC00"}`, status: 400, typ: inv, param: "prompt", contains: []string{"lone surrogate"}},
		{name: "reversed surrogate pair", path: compl, body: `{"model":"` + modelID + `","prompt":"\ude00\ud83d"}`, status: 400, typ: inv, param: "prompt"},
		{name: "invalid UTF-8 in prompt", path: compl, body: "{\"model\":\"" + modelID + "\",\"prompt\":\"\xed\xa0\x80\"}", status: 400, typ: inv, param: "prompt"},
		{name: "invalid UTF-8 in stop array", path: compl, body: complBody("\"stop\":[\"a\",\"\xff\"]"), status: 400, typ: inv, param: "stop[1]"},
		{name: "invalid UTF-8 in tokenize", path: "/tokenize", body: "{\"content\":\"\x80\"}", status: 400, typ: inv, param: "content"},
		{name: "invalid UTF-8 in apply-template", path: "/apply-template", body: "{\"messages\":[{\"role\":\"user\",\"content\":\"\xc0\xaf\"}]}", status: 400, typ: inv, param: "messages[0].content"},
		{name: "tool schema nested too deep", path: chat, body: chatBody(nested(2, 997)), status: 400, typ: inv, param: "tools[0]", contains: []string{"deeper than 64"}},
		{name: "tools render past the context", path: chat, body: chatBody(nested(100, 60)), status: 400, typ: inv, code: "context_length_exceeded", param: "messages"},
		{name: "apply-template tools nested too deep", path: "/apply-template", body: `{"messages":[{"role":"user","content":"Hi"}],` + nested(1, 65) + `}`, status: 400, typ: inv, param: "tools[0]"},
		{name: "apply-template tools past the context", path: "/apply-template", body: `{"messages":[{"role":"user","content":"Hi"}],` + nested(100, 60) + `}`,
			status: 400, typ: inv, code: "context_length_exceeded", param: "messages"},
		{name: "null token detokenize", path: "/detokenize", body: `{"tokens":[1,null]}`, status: 400, typ: inv, param: "tokens[1]", contains: []string{"null"}},
		{name: "null prompt element", path: compl, body: `{"model":"` + modelID + `","prompt":[null]}`, status: 400, typ: inv, param: "prompt[0]"},
		{name: "null token in prompt", path: compl, body: `{"model":"` + modelID + `","prompt":[128000,null]}`, status: 400, typ: inv, param: "prompt[1]"},
		{name: "null in prompt token arrays", path: compl, body: `{"model":"` + modelID + `","prompt":[[1,2],[null]]}`, status: 400, typ: inv, param: "prompt[1][0]"},
		{name: "null logit_bias value", path: chat, body: chatBody(`"logit_bias":{"15":null}`), status: 400, typ: inv, param: "logit_bias.15"},
		{name: "null logit_bias value completions", path: compl, body: complBody(`"logit_bias":{"15":1,"16":null}`), status: 400, typ: inv, param: "logit_bias.16"},
		{name: "null stop element", path: chat, body: chatBody(`"stop":["x",null]`), status: 400, typ: inv, param: "stop[1]"},
		{name: "null message", path: chat, body: `{"model":"` + modelID + `","messages":[null]}`, status: 400, typ: inv, param: "messages[0]"},
		{name: "null content part", path: chat, body: `{"model":"` + modelID + `","messages":[{"role":"user","content":[{"type":"text","text":"a"},null]}]}`, status: 400, typ: inv, param: "messages[0].content[1]"},
		{name: "null tool call", path: chat, body: `{"model":"` + modelID + `","messages":[{"role":"assistant","tool_calls":[null]}]}`, status: 400, typ: inv, param: "messages[0].tool_calls[0]"},
		{name: "null tool", path: chat, body: chatBody(`"tools":[null]`), status: 400, typ: inv, param: "tools[0]"},
		{name: "null modality", path: chat, body: chatBody(`"modalities":[null]`), status: 400, typ: inv, param: "modalities[0]"},
		{name: "null apply-template message", path: "/apply-template", body: `{"messages":[{"role":"user","content":"a"},null]}`, status: 400, typ: inv, param: "messages[1]"},
		{name: "null optional params are absent", path: chat, body: chatBody(`"temperature":null,"stop":null,"logit_bias":null,"seed":null,"tools":null`), status: 200},
		{name: "null inside a tool schema is kept", path: chat, body: `{"model":"` + modelID + `","messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"enum":[null,"x"],"default":null}}}}}]}`, status: 200},
		{name: "null inside object arguments is kept", path: "/apply-template", body: `{"messages":[{"role":"user","content":"a"},{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":{"x":[null]}}}]}]}`, status: 200},
		{name: "invalid UTF-8 outside strings", path: chat, body: "{\"model\":\"" + modelID + "\",\xff}", status: 400, typ: inv},
		{name: "body over limit", path: chat, body: `{"model":"` + modelID + `","messages":[{"role":"user","content":"` + strings.Repeat("a", limit) + `"}]}`,
			status: 413, typ: inv, code: "request_too_large"},
		{name: "missing API key", rig: rAuth, path: chat, body: chatBody(""), status: 401, typ: inv, code: "invalid_api_key"},
		{name: "wrong API key", rig: rAuth, path: chat, body: chatBody(""), hdr: []string{"Authorization", "Bearer sk-wrong"}, status: 401, typ: inv, code: "invalid_api_key"},
		{name: "wrong API key x-api-key", rig: rAuth, method: "GET", path: "/v1/models", hdr: []string{"x-api-key", apiKey + "x"}, status: 401, typ: inv, code: "invalid_api_key"},
		{name: "wrong method", method: "GET", path: chat, status: 405, typ: inv, code: "method_not_allowed"},
		{name: "wrong method models", method: "DELETE", path: "/v1/models", status: 405, typ: inv, code: "method_not_allowed"},
		{name: "huge method name", method: strings.Repeat("X", 30<<10), path: "/v1/models", status: 405, typ: inv, code: "method_not_allowed"},
		{name: "huge method name without a key", rig: rAuth, method: strings.Repeat("Y", 30<<10), path: chat, status: 401, typ: inv, code: "invalid_api_key"},
		{name: "unknown path", method: "GET", path: "/v1/embeddings", status: 404, typ: inv, code: "not_found"},
		{name: "unknown path POST", path: "/v2/chat/completions", body: chatBody(""), status: 404, typ: inv, code: "not_found"},
		{name: "unsupported schema keyword", path: chat, body: chatBody(`"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"string","format":"regex"}}}`), status: 400, typ: inv, param: "response_format.json_schema.schema.format", contains: []string{"not supported"}},
		{name: "tool_choice required without tools", path: chat, body: chatBody(`"tool_choice":"required"`), status: 400, typ: inv, param: "tool_choice", contains: []string{"tools"}},
		{name: "unsupported audio", path: chat, body: chatBody(`"audio":{"voice":"alloy"}`), status: 400, typ: inv, param: "audio", contains: []string{"not supported"}},
		{name: "unsupported suffix", path: compl, body: complBody(`"suffix":"end"`), status: 400, typ: inv, param: "suffix", contains: []string{"not supported"}},
		{name: "best_of below n", path: compl, body: complBody(`"best_of":1,"n":8`), status: 400, typ: inv, param: "best_of", contains: []string{"best_of must be greater than or equal to n"}},
		{name: "unsupported best_of", path: compl, body: complBody(`"best_of":3`), status: 400, typ: inv, param: "best_of", contains: []string{"not supported"}},
		{name: "unsupported several prompts", path: compl, body: `{"model":"` + modelID + `","prompt":["a","b"]}`, status: 400, typ: inv, param: "prompt", contains: []string{"supported"}},
		{name: "stream_options without stream", path: chat, body: chatBody(`"stream_options":{"include_usage":true}`), status: 400, typ: inv, param: "stream_options"},
	}
	_ = srvErr
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.check(t, r, "") })
	}
	// After the whole matrix the server still generates.
	for _, rg := range []*rig{r} {
		rep := rg.do(t, "POST", chat, chatBody(`"max_tokens":4`))
		if rep.Status != 200 || !bytes.Contains(rep.Body, []byte(`"chat.completion"`)) {
			t.Fatalf("valid request after the matrix: %d %s", rep.Status, rep.Body)
		}
	}
	if rep := rAuth.do(t, "GET", "/v1/models", "", "Authorization", "Bearer "+apiKey); rep.Status != 200 {
		t.Fatalf("right key: %d %s", rep.Status, rep.Body)
	}
}

// TestBadInputStreaming checks that a request refused before generation is
// a plain JSON error even with stream: true (not an SSE stream).
func TestBadInputStreaming(t *testing.T) {
	r := newRig(t, rigOptions{})
	rep := r.do(t, "POST", "/v1/chat/completions", chatBody(`"stream":true,"temperature":9`))
	if rep.Status != 400 {
		t.Fatalf("status %d: %s", rep.Status, rep.Body)
	}
	if e := decodeError(t, rep); orNull(e.Param) != "temperature" {
		t.Fatalf("param %s", orNull(e.Param))
	}
	r.assertHealthy(t)
}

// TestLogsHoldNoSecrets captures the log at info level across successful and
// failing requests and checks that neither the API key nor prompt text
// appears in it.
func TestLogsHoldNoSecrets(t *testing.T) {
	r := newRig(t, rigOptions{opts: server.Options{APIKeys: []string{apiKey}}})
	const secretPrompt = "my-private-prompt-text-zebra"
	auth := []string{"Authorization", "Bearer " + apiKey}
	for _, body := range []string{
		`{"model":"` + modelID + `","messages":[{"role":"user","content":"` + secretPrompt + `"}],"max_tokens":3}`,
		`{"model":"` + modelID + `","messages":[{"role":"user","content":"` + secretPrompt + `"}],"max_tokens":3,"stream":true}`,
		`{"model":"` + modelID + `","messages":[{"role":"wizard","content":"` + secretPrompt + `"}]}`,
		`{"model":"` + modelID + `","messages":[{"role":"user","content":"` + secretPrompt + `"` + `]}`,
	} {
		r.do(t, "POST", "/v1/chat/completions", body, auth...)
	}
	r.do(t, "POST", "/v1/completions", `{"model":"`+modelID+`","prompt":"`+secretPrompt+`","max_tokens":2}`, auth...)
	r.do(t, "GET", "/v1/models", "", "Authorization", "Bearer "+apiKey+"-wrong")
	r.do(t, "GET", "/v1/models", "", "x-api-key", apiKey)
	logs := r.Log.String()
	if !strings.Contains(logs, `"path":"/v1/chat/completions"`) {
		t.Fatalf("no access log captured: %s", logs)
	}
	for _, secret := range []string{apiKey, secretPrompt, "sk-test"} {
		if strings.Contains(logs, secret) {
			t.Errorf("log contains %q:\n%s", secret, logs)
		}
	}
}

// TestCORSDefaultEmpty checks that without configured origins no CORS
// header is ever sent, preflight included.
func TestCORSDefaultEmpty(t *testing.T) {
	r := newRig(t, rigOptions{})
	for _, method := range []string{"GET", "OPTIONS"} {
		rep := r.do(t, method, "/v1/models", "", "Origin", "https://evil.example", "Access-Control-Request-Method", "POST")
		for k := range rep.Header {
			if strings.HasPrefix(strings.ToLower(k), "access-control-") {
				t.Errorf("%s: CORS header %s: %v", method, k, rep.Header[k])
			}
		}
	}
}

// TestGenerationTimeout checks the engine's per-request time limit: a
// generation that reaches it ends early with finish_reason "length" and the
// text so far (not an error status), and the server keeps serving.
func TestGenerationTimeout(t *testing.T) {
	tok := loadTok(t)
	long := tok.Encode(strings.Repeat(" word", 200), false, false)
	r := newRig(t, rigOptions{engine: inference.Config{Timeout: 150 * time.Millisecond}, script: long})
	r.Model.SetLatency(20 * time.Millisecond)
	start := time.Now()
	rep := r.do(t, "POST", "/v1/chat/completions", chatBody(`"max_tokens":200`))
	el := time.Since(start)
	if rep.Status != 200 {
		t.Fatalf("status %d: %s", rep.Status, rep.Body)
	}
	var resp struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if err := json.Unmarshal(rep.Body, &resp); err != nil || len(resp.Choices) != 1 {
		t.Fatalf("body %s: %v", rep.Body, err)
	}
	// The engine's "timeout" finish is reported as "length" (OpenAI has no
	// timeout reason): a 200 with the text generated so far.
	if resp.Choices[0].FinishReason != "length" || resp.Usage.CompletionTokens >= 200 {
		t.Fatalf("generation was not cut by the timeout: %s", rep.Body)
	}
	if el > 2*time.Second {
		t.Fatalf("took %v with a 150ms limit", el)
	}
	t.Logf("finish_reason %q after %d tokens in %v", resp.Choices[0].FinishReason, resp.Usage.CompletionTokens, el)
	r.Model.SetLatency(0)
	r.assertHealthy(t)
	if rep := r.do(t, "POST", "/v1/chat/completions", chatBody(`"max_tokens":3`)); rep.Status != 200 {
		t.Fatalf("after the timeout: %d %s", rep.Status, rep.Body)
	}
}

// TestModelFailureHealth checks that a failing model call fails only the
// request in flight (500, or an error frame in a stream), that three in a
// row make /health 503 "unhealthy", and that the next success heals it.
func TestModelFailureHealth(t *testing.T) {
	r := newRig(t, rigOptions{})
	fail := fmt.Errorf("qnn: graphExecute: error 1011")
	r.Model.Fail(fail)
	rep := r.do(t, "POST", "/v1/chat/completions", chatBody(`"max_tokens":3`))
	if rep.Status != 500 {
		t.Fatalf("failed eval: %d %s", rep.Status, rep.Body)
	}
	if e := decodeError(t, rep); e.Type != server.TypeServer || strings.Contains(e.Message, "1011") {
		t.Fatalf("error body %s (internal details must stay in the log)", rep.Body)
	}
	r.assertHealthy(t)
	if rep := r.do(t, "POST", "/v1/chat/completions", chatBody(`"max_tokens":3`)); rep.Status != 200 {
		t.Fatalf("request after one failure: %d %s", rep.Status, rep.Body)
	}
	// A failure in the middle of a stream: a 200 stream ending in an error frame.
	r.Model.Fail(nil, fail)
	rep = r.do(t, "POST", "/v1/chat/completions", chatBody(`"max_tokens":5,"stream":true`))
	if rep.Status != 200 || !bytes.Contains(rep.Body, []byte(`data: {"error":`)) {
		t.Fatalf("stream with failing eval: %d %s", rep.Status, rep.Body)
	}
	// Three failures in a row: unhealthy, and /health says why.
	r.Model.Fail(fail, fail, fail)
	for range 3 {
		if rep := r.do(t, "POST", "/v1/completions", complBody(`"max_tokens":2`)); rep.Status != 500 {
			t.Fatalf("failing request: %d %s", rep.Status, rep.Body)
		}
	}
	rep = r.do(t, "GET", "/health", "")
	if rep.Status != 503 || !bytes.Contains(rep.Body, []byte(`"unhealthy"`)) {
		t.Fatalf("/health after 3 failures: %d %s", rep.Status, rep.Body)
	}
	if rep := r.do(t, "POST", "/v1/completions", complBody(`"max_tokens":2`)); rep.Status != 200 {
		t.Fatalf("request after recovery: %d %s", rep.Status, rep.Body)
	}
	r.assertHealthy(t)
}

// TestBodyLimitChunked checks the body limit on a chunked body (no
// Content-Length): reading past the limit is a 413 too.
func TestBodyLimitChunked(t *testing.T) {
	r := newRig(t, rigOptions{opts: server.Options{BodyLimit: 1024}})
	body := io.MultiReader(strings.NewReader(`{"model":"`+modelID+`","prompt":"`), strings.NewReader(strings.Repeat("a", 4096)+`"}`))
	req, _ := http.NewRequest("POST", r.URL+"/v1/completions", body)
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	rep := reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
	if rep.Status != 413 {
		t.Fatalf("status %d: %s", rep.Status, b)
	}
	if e := decodeError(t, rep); orNull(e.Code) != "request_too_large" {
		t.Fatalf("code %s", orNull(e.Code))
	}
	r.assertHealthy(t)
}
