package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/ollama"
)

// ndjsonLines posts body and reads the NDJSON stream line by line, checking
// the content type and that every line is one JSON object.
func (g *genServer) ndjsonLines(t *testing.T, path, body string) []map[string]any {
	t.Helper()
	resp := g.postStream(t, path, body, "application/x-ndjson")
	defer resp.Body.Close()
	var lines []map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var v map[string]any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, v)
	}
	return lines
}

func ollamaChatBody(extra string) string {
	return object(`"model":"`+model+`","messages":[{"role":"user","content":"Hi"}],"options":{"temperature":0}`, extra)
}

var metricKeys = []string{"total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration"}

// TestOllamaChat: streamed by default as NDJSON, one line per delta and a
// last done line with the metrics; stream false is one object with the
// same text.
func TestOllamaChat(t *testing.T) {
	g := newGenServer(t, "Hello there, general Kenobi.", Options{}, inference.Config{})
	lines := g.ndjsonLines(t, "/api/chat", ollamaChatBody(""))
	if len(lines) < 3 {
		t.Fatalf("lines %v", lines)
	}
	var text strings.Builder
	for i, l := range lines {
		last := i == len(lines)-1
		if l["model"] != model || l["done"] != last || l["created_at"] == nil {
			t.Fatalf("line %d: %v", i, l)
		}
		msg := l["message"].(map[string]any)
		if msg["role"] != "assistant" {
			t.Fatalf("line %d: %v", i, l)
		}
		text.WriteString(msg["content"].(string))
		for _, k := range metricKeys {
			if _, ok := l[k]; ok != last {
				t.Fatalf("line %d: %s present %v", i, k, ok)
			}
		}
	}
	done := lines[len(lines)-1]
	if done["done_reason"] != "stop" || done["eval_count"].(float64) < 1 || done["prompt_eval_count"].(float64) < 5 ||
		done["total_duration"].(float64) <= 0 || done["eval_duration"].(float64) <= 0 {
		t.Fatalf("done line %v", done)
	}

	resp, body := g.post(t, "/api/chat", ollamaChatBody(`"stream":false`))
	var whole ollama.ChatResponse
	if err := json.Unmarshal(body, &whole); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if whole.Message.Content != text.String() || whole.Message.Content != "Hello there, general Kenobi." || !whole.Done ||
		whole.DoneReason != "stop" || whole.Metrics == nil || whole.EvalCount != int(done["eval_count"].(float64)) {
		t.Fatalf("whole %s, streamed %q", body, text.String())
	}

	// num_predict stops early with done_reason length; num_ctx past the
	// window is clamped, below the prompt a 400.
	_, body = g.post(t, "/api/chat", ollamaChatBody(`"stream":false,"options":{"num_predict":2,"num_ctx":1000000}`))
	_ = json.Unmarshal(body, &whole)
	if whole.DoneReason != "length" || whole.EvalCount != 2 {
		t.Fatalf("num_predict 2: %s", body)
	}
	resp, body = g.post(t, "/api/chat", ollamaChatBody(`"stream":false,"options":{"num_ctx":8}`))
	if resp.StatusCode != 400 || !strings.Contains(string(body), `"error"`) {
		t.Fatalf("num_ctx 8: %d %s", resp.StatusCode, body)
	}
	// num_ctx bounds prompt and output with shift false; with shift (the
	// default, as Ollama's) the reply goes on past it.
	n := whole.PromptEvalCount + 3
	_, body = g.post(t, "/api/chat", ollamaChatBody(fmt.Sprintf(`"stream":false,"shift":false,"options":{"num_ctx":%d}`, n)))
	_ = json.Unmarshal(body, &whole)
	if whole.DoneReason != "length" || whole.PromptEvalCount+whole.EvalCount != n {
		t.Fatalf("num_ctx %d, shift false: %s", n, body)
	}
	_, body = g.post(t, "/api/chat", ollamaChatBody(fmt.Sprintf(`"stream":false,"options":{"num_ctx":%d}`, n)))
	_ = json.Unmarshal(body, &whole)
	if whole.DoneReason != "stop" || whole.PromptEvalCount+whole.EvalCount <= n {
		t.Fatalf("num_ctx %d, shift: %s", n, body)
	}
}

// TestOllamaToolCalls: a scripted call comes back as message.tool_calls with
// the arguments as an object, streamed as one line before the done line,
// and a tool result goes back with role tool and tool_name.
func TestOllamaToolCalls(t *testing.T) {
	g := newGenServer(t, `{"name": "get_weather", "parameters": {"city": "Paris"}}`, Options{}, inference.Config{})
	_, body := g.post(t, "/api/chat", ollamaChatBody(weatherTool+`,"stream":false`))
	var c ollama.ChatResponse
	if err := json.Unmarshal(body, &c); err != nil || len(c.Message.ToolCalls) != 1 || c.Message.Content != "" {
		t.Fatalf("%s", body)
	}
	fn := c.Message.ToolCalls[0].Function
	if fn.Name != "get_weather" || string(fn.Arguments) != `{"city":"Paris"}` || c.DoneReason != "stop" {
		t.Fatalf("call %s", body)
	}
	lines := g.ndjsonLines(t, "/api/chat", ollamaChatBody(weatherTool))
	if len(lines) != 2 {
		t.Fatalf("stream %v", lines)
	}
	calls := lines[0]["message"].(map[string]any)["tool_calls"].([]any)
	args := calls[0].(map[string]any)["function"].(map[string]any)["arguments"].(map[string]any)
	if len(calls) != 1 || args["city"] != "Paris" || lines[0]["done"] != false || lines[1]["done"] != true {
		t.Fatalf("stream %v", lines)
	}

	round := `{"model":"` + model + `","stream":false,` + weatherTool + `,"messages":[{"role":"user","content":"Weather in Paris?"},` +
		`{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},` +
		`{"role":"tool","tool_name":"get_weather","content":"18 degrees"}]}`
	prompt := g.prompt(t, "/api/chat", round)
	for _, want := range []string{`{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>`,
		`<|start_header_id|>ipython<|end_header_id|>` + "\n\n" + `"18 degrees"<|eot_id|>`} {
		if !strings.Contains(prompt, want) {
			t.Fatalf("%q not in the prompt %q", want, prompt)
		}
	}
}

// TestOllamaGenerate: the prompt is templated as a user turn (with system),
// or with raw sent as is, special tokens parsed and BOS added once.
func TestOllamaGenerate(t *testing.T) {
	g := newGenServer(t, "Once", Options{}, inference.Config{})
	_, body := g.post(t, "/api/generate", `{"model":"`+model+`","prompt":"Tell me","system":"Be brief.","stream":false}`)
	var r ollama.GenerateResponse
	if err := json.Unmarshal(body, &r); err != nil || r.Response != "Once" || !r.Done || r.DoneReason != "stop" || r.Metrics == nil {
		t.Fatalf("%s", body)
	}
	if p := g.lastPrompt(t); !strings.Contains(p, "Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nTell me<|eot_id|>") {
		t.Fatalf("prompt %q", p)
	}
	for _, raw := range []string{"The sky is", "<|begin_of_text|>The sky is"} {
		_, body = g.post(t, "/api/generate", `{"model":"`+model+`","prompt":"`+raw+`","raw":true,"stream":false}`)
		calls := g.fm.Calls()
		seq := calls[len(calls)-1].Seq
		want := append([]int32{128000}, testTokenizer(t).Encode("The sky is", false, false)...)
		if len(seq) < len(want) || !slices.Equal(seq[:len(want)], want) || seq[1] == 128000 {
			t.Fatalf("raw %q: prompt %v, want %v (%s)", raw, seq, want, body)
		}
	}
	lines := g.ndjsonLines(t, "/api/generate", `{"model":"`+model+`","prompt":"Hi"}`)
	if len(lines) != 2 || lines[0]["response"] != "Once" || lines[1]["done"] != true || lines[1]["eval_count"] == nil {
		t.Fatalf("stream %v", lines)
	}
	// An empty prompt loads the model; keep_alive 0 "unloads" it.
	for ka, want := range map[string]string{``: "load", `,"keep_alive":0`: "unload", `,"keep_alive":"5m"`: "load"} {
		_, body = g.post(t, "/api/generate", `{"model":"`+model+`"`+ka+`}`)
		if err := json.Unmarshal(body, &r); err != nil || !r.Done || r.DoneReason != want {
			t.Fatalf("keep_alive %q: %s", ka, body)
		}
	}
}

// TestOllamaBadInput: every bad request gets its status and Ollama's
// {"error": "..."} body, and the server keeps serving.
func TestOllamaBadInput(t *testing.T) {
	g := newGenServer(t, "ok", Options{BodyLimit: 64 << 10}, inference.Config{})
	gen := func(extra string) string { return `{"model":"` + model + `","prompt":"Hi"` + extra + `}` }
	opt := func(o string) string { return ollamaChatBody(`"options":{` + o + `}`) }
	bigOptions := `"options":{` + strings.Repeat(`"x":1,`, 20000) + `"temperature":0}`
	cases := []struct {
		name, path, body string
		status           int
		contains         string
	}{
		{"invalid JSON", "/api/chat", `{"model":`, 400, ""},
		{"empty body", "/api/generate", ``, 400, "empty"},
		{"not an object", "/api/chat", `[1]`, 400, ""},
		{"no model", "/api/chat", `{"messages":[]}`, 400, "model is required"},
		{"unknown model", "/api/chat", `{"model":"llama3.2:3b","messages":[]}`, 404, `model \"llama3.2:3b\" not found`},
		{"unknown model generate", "/api/generate", `{"model":"nope","prompt":"x"}`, 404, `model \"nope\" not found`},
		{"unknown model show", "/api/show", `{"model":"nope"}`, 404, "not found"},
		{"wrong type model", "/api/chat", `{"model":7}`, 400, "model"},
		{"wrong type messages", "/api/chat", `{"model":"` + model + `","messages":"hi"}`, 400, "messages"},
		{"wrong type content", "/api/chat", `{"model":"` + model + `","messages":[{"role":"user","content":5}]}`, 400, "content"},
		{"wrong type stream", "/api/generate", gen(`,"stream":"yes"`), 400, "stream"},
		{"wrong type options", "/api/chat", ollamaChatBody(`"options":[1]`), 400, "options"},
		{"wrong type temperature", "/api/chat", opt(`"temperature":"hot"`), 400, "options.temperature"},
		{"wrong type num_predict", "/api/chat", opt(`"num_predict":1.5`), 400, "options.num_predict"},
		{"wrong type stop", "/api/chat", opt(`"stop":"x"`), 400, "options.stop"},
		{"null stop element", "/api/chat", opt(`"stop":[null]`), 400, "options.stop"},
		{"null message", "/api/chat", `{"model":"` + model + `","messages":[null]}`, 400, "messages"},
		{"temperature too high", "/api/chat", opt(`"temperature":3`), 400, "options.temperature"},
		{"negative temperature", "/api/chat", opt(`"temperature":-1`), 400, "options.temperature"},
		{"top_p zero", "/api/chat", opt(`"top_p":0`), 400, "options.top_p"},
		{"min_p too high", "/api/chat", opt(`"min_p":1.5`), 400, "options.min_p"},
		{"repeat_penalty too high", "/api/chat", opt(`"repeat_penalty":11`), 400, "options.repeat_penalty"},
		{"presence_penalty", "/api/chat", opt(`"presence_penalty":5`), 400, "options.presence_penalty"},
		{"repeat_last_n", "/api/chat", opt(`"repeat_last_n":-5`), 400, "options.repeat_last_n"},
		{"num_predict", "/api/chat", opt(`"num_predict":-7`), 400, "options.num_predict"},
		{"num_ctx negative", "/api/chat", opt(`"num_ctx":-1`), 400, "options.num_ctx"},
		{"num_predict overflow", "/api/chat", opt(`"num_predict":1e30`), 400, "options.num_predict"},
		{"empty stop", "/api/chat", opt(`"stop":[""]`), 400, "empty"},
		{"too many stops", "/api/chat", opt(`"stop":[` + strings.TrimSuffix(strings.Repeat(`"x",`, 17), ",") + `]`), 400, "at most 16"},
		{"huge options", "/api/chat", ollamaChatBody(bigOptions), 413, "larger than the limit"},
		{"invalid UTF-8", "/api/chat", "{\"model\":\"" + model + "\",\"messages\":[{\"role\":\"user\",\"content\":\"a\xff\"}]}", 400, "UTF-8"},
		{"bad role", "/api/chat", `{"model":"` + model + `","messages":[{"role":"wizard","content":"x"}]}`, 400, "role"},
		{"images in chat", "/api/chat", `{"model":"` + model + `","messages":[{"role":"user","content":"x","images":["aGk="]}]}`, 400, "images are not supported"},
		{"images in generate", "/api/generate", gen(`,"images":["aGk="]`), 400, "images are not supported"},
		{"suffix", "/api/generate", gen(`,"suffix":"end"`), 400, "suffix"},
		{"template", "/api/generate", gen(`,"template":"{{ .Prompt }}"`), 400, "template"},
		{"raw with system", "/api/generate", gen(`,"raw":true,"system":"x"`), 400, "raw"},
		{"format string", "/api/chat", ollamaChatBody(`"format":"yaml"`), 400, "format"},
		{"format array", "/api/chat", ollamaChatBody(`"format":[1]`), 400, "format"},
		{"format bad schema", "/api/chat", ollamaChatBody(`"format":{"type":"object","properties":{"a":{"type":"nope"}}}`), 400, "format"},
		{"format over the compile budget", "/api/chat", ollamaChatBody(`"format":{"type":"string","pattern":"[\\x21\\x23\\x25\\x27\\x29\\x2b\\x2d\\x2f\\x31\\x33\\x35\\x37\\x39\\x3b\\x3d\\x3f\\x41\\x43\\x45\\x47\\x49\\x4b\\x4d\\x4f\\x51\\x53\\x55\\x57\\x59\\x5b\\x5d\\x5f\\x61\\x63\\x65\\x67\\x69\\x6b\\x6d\\x6f\\x71\\x73\\x75\\x77\\x79\\x7b\\x7d]{1000}"}`), 400, "format.pattern: this schema costs too much"},
		{"format unsatisfiable", "/api/chat", ollamaChatBody(`"format":{"enum":[]}`), 400, "allows no value"},
		{"think", "/api/chat", ollamaChatBody(`"think":"deep"`), 400, "think"},
		{"keep_alive", "/api/chat", ollamaChatBody(`"keep_alive":"forever"`), 400, "keep_alive"},
		{"keep_alive type", "/api/chat", ollamaChatBody(`"keep_alive":[1]`), 400, "keep_alive"},
		{"top_logprobs", "/api/chat", ollamaChatBody(`"top_logprobs":21`), 400, "top_logprobs"},
		{"tool without name", "/api/chat", ollamaChatBody(`"tools":[{"type":"function","function":{}}]`), 400, "tools[0].function.name"},
		{"tool call arguments", "/api/chat", `{"model":"` + model + `","messages":[{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":"x"}}]}]}`, 400, "arguments"},
		{"pull", "/api/pull", `{"model":"llama3.2"}`, 501, "model files on the device"},
		{"delete", "/api/delete", `{"model":"llama3.2"}`, 501, "model files on the device"},
		{"embed", "/api/embed", `{"model":"x","input":"hi"}`, 400, "embedding"},
		{"unknown path", "/api/nothing", `{}`, 404, "Invalid URL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method := http.MethodPost
			if tc.name == "delete" {
				method = http.MethodDelete
			}
			req, _ := http.NewRequest(method, g.URL+tc.path, strings.NewReader(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatalf("body: %v", err)
			}
			msg, _ := e["error"].(string)
			if resp.StatusCode != tc.status || len(e) != 1 || msg == "" || !strings.Contains(msg, strings.ReplaceAll(tc.contains, `\"`, `"`)) {
				t.Fatalf("%d %v, want %d with %q", resp.StatusCode, e, tc.status, tc.contains)
			}
		})
	}
	if resp, body := g.post(t, "/api/generate", gen(`,"stream":false`)); resp.StatusCode != 200 {
		t.Fatalf("after the bad input: %d %s", resp.StatusCode, body)
	}
}

// TestOllamaErrors: a full queue is a 503 with Retry-After, a failure after
// the stream started is a last {"error"} line, before it a 500.
func TestOllamaErrors(t *testing.T) {
	g := newGenServer(t, "a b c", Options{}, inference.Config{QueueLen: 1})
	gate := g.fm.Gate(true)
	done := make(chan int, 2)
	post := func() {
		resp, err := http.Post(g.URL+"/api/chat", "application/json", strings.NewReader(ollamaChatBody(`"stream":false`)))
		if err == nil {
			resp.Body.Close()
			done <- resp.StatusCode
			return
		}
		done <- 0
	}
	go post()
	waitUntil(t, func() bool { return len(g.fm.Calls()) > 0 })
	go post()
	waitUntil(t, func() bool { return g.eng.QueueDepth() == 1 })
	resp, body := g.post(t, "/api/chat", ollamaChatBody(""))
	g.fm.Gate(false)
	close(gate)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.HasPrefix(string(body), `{"error":"The server is busy`) {
		t.Fatalf("busy: %d %s", resp.StatusCode, body)
	}
	for range 2 {
		if code := <-done; code != 200 {
			t.Fatalf("queued request: %d", code)
		}
	}

	g.fm.Fail(nil, errors.New("graph execute failed"))
	lines := g.ndjsonLines(t, "/api/chat", ollamaChatBody(""))
	if len(lines) < 2 || lines[len(lines)-1]["error"] == nil || lines[len(lines)-1]["done"] != nil {
		t.Fatalf("mid-stream failure: %v", lines)
	}
	g.fm.Fail(errors.New("graph execute failed"))
	resp, body = g.post(t, "/api/chat", ollamaChatBody(""))
	if resp.StatusCode != 500 || !strings.HasPrefix(string(body), `{"error":`) {
		t.Fatalf("failure before the first line: %d %s", resp.StatusCode, body)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i > 10000 {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestOllamaModels: /api/tags, /api/ps, /api/show and /api/version, and the
// ":latest" tag on the served id.
func TestOllamaModels(t *testing.T) {
	s, _ := newTest(t, Options{Version: "v9.9.9"})
	for _, path := range []string{"/api/tags", "/api/ps"} {
		rec := do(s, "GET", path, "")
		var list struct {
			Models []struct {
				Name, Model, Digest string
				Size                int64
				Details             ollama.ModelDetails
				ContextLength       int `json:"context_length"`
			}
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || rec.Code != 200 || len(list.Models) != 1 {
			t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
		}
		m := list.Models[0]
		if m.Name != model || m.Model != model || m.Details.Family != "llama" || m.Details.ContextLength != 512 {
			t.Fatalf("%s: %s", path, rec.Body)
		}
	}
	for _, name := range []string{model, model + ":latest", "gpt-4o-mini"} {
		rec := do(s, "POST", "/api/show", `{"model":"`+name+`"}`)
		var show ollama.ShowResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &show); err != nil || rec.Code != 200 ||
			show.ModelInfo["llama.context_length"] != float64(512) || !strings.Contains(show.Template, "{{ .Prompt }}<|eot_id|>") {
			t.Fatalf("show %s: %d %s", name, rec.Code, rec.Body)
		}
	}
	rec := do(s, "GET", "/api/version", "")
	if rec.Code != 200 || rec.Body.String() != `{"version":"`+ollama.Version+`","hexserve":"v9.9.9"}`+"\n" {
		t.Fatalf("version: %d %s", rec.Code, rec.Body)
	}
}

// TestOllamaRoot: / answers Ollama's probe in text, and the chat page to a
// browser when the web UI is on; with keys it stays public.
func TestOllamaRoot(t *testing.T) {
	browser := "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	tests := []struct {
		name   string
		opts   Options
		method string
		accept string
		html   bool
	}{
		{"probe, web UI on", Options{WebUI: true}, "GET", "", false},
		{"probe with */*", Options{WebUI: true, APIKeys: []string{"sk-1"}}, "GET", "*/*", false},
		{"HEAD probe", Options{WebUI: true}, "HEAD", "", false},
		{"browser, web UI on", Options{WebUI: true, APIKeys: []string{"sk-1"}}, "GET", browser, true},
		{"browser, web UI off", Options{}, "GET", browser, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTest(t, tt.opts)
			var hdr []string
			if tt.accept != "" {
				hdr = []string{"Accept", tt.accept}
			}
			rec := do(s, tt.method, "/", "", hdr...)
			ct := rec.Header().Get("Content-Type")
			switch {
			case rec.Code != 200 || !strings.Contains(rec.Header().Get("Vary"), "Accept"):
				t.Fatalf("%d %v", rec.Code, rec.Header())
			case tt.html && !strings.HasPrefix(ct, "text/html"):
				t.Fatalf("Content-Type %q", ct)
			case !tt.html && (!strings.HasPrefix(ct, "text/plain") || tt.method == "GET" && rec.Body.String() != "Ollama is running"):
				t.Fatalf("Content-Type %q body %q", ct, rec.Body)
			}
		})
	}
	// The API behind it still needs the key, in Ollama's error shape.
	s, _ := newTest(t, Options{APIKeys: []string{"sk-1"}})
	rec := do(s, "GET", "/api/tags", "")
	if rec.Code != 401 || !strings.HasPrefix(rec.Body.String(), `{"error":`) {
		t.Fatalf("/api/tags without a key: %d %s", rec.Code, rec.Body)
	}
	if rec := do(s, "GET", "/api/tags", "", "Authorization", "Bearer sk-1"); rec.Code != 200 {
		t.Fatalf("/api/tags with the key: %d %s", rec.Code, rec.Body)
	}
}

// TestOllamaLoading: while the model loads, /api/ps lists nothing and the
// generation endpoints are a 503 with Retry-After in Ollama's shape.
func TestOllamaLoading(t *testing.T) {
	s := New(Options{})
	if rec := do(s, "GET", "/api/ps", ""); rec.Code != 200 || rec.Body.String() != `{"models":[]}`+"\n" {
		t.Fatalf("/api/ps: %d %s", rec.Code, rec.Body)
	}
	rec := do(s, "POST", "/api/chat", ollamaChatBody(""))
	if rec.Code != 503 || rec.Header().Get("Retry-After") == "" || !strings.HasPrefix(rec.Body.String(), `{"error":"The model is still loading`) {
		t.Fatalf("/api/chat: %d %s", rec.Code, rec.Body)
	}
}

// TestOllamaOwners: with API keys, KV rows computed for one key are reused
// for its next request and never for another key's.
func TestOllamaOwners(t *testing.T) {
	g := newGenServer(t, "ok", Options{APIKeys: []string{"sk-a", "sk-b"}}, inference.Config{})
	body := `{"model":"` + model + `","stream":false,"messages":[{"role":"user","content":"` + strings.Repeat("The same long question. ", 20) + `"}]}`
	ask := func(key string) int { // the rows the request's prompt Eval reused
		before := len(g.fm.Calls())
		req, _ := http.NewRequest("POST", g.URL+"/api/chat", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", key, resp.StatusCode)
		}
		return g.fm.Calls()[before].Valid
	}
	if v := ask("sk-a"); v != 0 {
		t.Fatalf("first request reused %d rows", v)
	}
	if v := ask("sk-a"); v == 0 {
		t.Fatal("the same key's repeat reused nothing")
	}
	if v := ask("sk-b"); v != 0 {
		t.Fatalf("another key's request reused %d rows", v)
	}
}
