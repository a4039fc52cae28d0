package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/inferencetest"
	"github.com/hexserve/hexserve/openai"
	"github.com/rs/zerolog"
)

const (
	eot   = 128009
	model = "llama-3.2-1b-instruct"
)

type genServer struct {
	URL string
	fm  *inferencetest.Model
	eng *inference.Engine
}

// newGenServer serves the scripted model, which answers every prompt with
// the tokens of script and then <|eot_id|>.
func newGenServer(tb testing.TB, script string, opts Options, cfg inference.Config) *genServer {
	tb.Helper()
	tok := testTokenizer(tb)
	fm := inferencetest.NewScripted(inference.ModelInfo{VocabSize: tok.VocabSize(), ContextLen: 512,
		BOS: 128000, EOS: []int32{eot, 128008, 128001}}, tok.Encode(script, false, false))
	eng := inference.New(fm, tok, cfg)
	tb.Cleanup(func() { _ = eng.Close() })
	opts.Logger = zerolog.Nop()
	s := New(opts)
	m := testModel(tb)
	m.Engine = eng
	s.SetModel(m)
	srv := httptest.NewServer(s)
	tb.Cleanup(srv.Close)
	return &genServer{URL: srv.URL, fm: fm, eng: eng}
}

func (g *genServer) post(t *testing.T, path, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(g.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// prompt posts body to path, wants a 200, and returns the text of the
// model's last call: the prompt the request rendered.
func (g *genServer) prompt(t *testing.T, path, body string) string {
	t.Helper()
	if resp, b := g.post(t, path, body); resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
	}
	return g.lastPrompt(t)
}

// lastPrompt is the text of the model's last call.
func (g *genServer) lastPrompt(t *testing.T) string {
	calls := g.fm.Calls()
	return testTokenizer(t).Decode(calls[len(calls)-1].Seq, false)
}

// sseReader reads SSE frames incrementally from a live response.
type sseReader struct {
	t  *testing.T
	br *bufio.Reader
}

// next returns the next frame's data ("[DONE]" at the end) and fails on
// anything but `data: …\n\n`.
func (r *sseReader) next() string {
	r.t.Helper()
	line, err := r.br.ReadString('\n')
	if err != nil {
		r.t.Fatalf("read frame: %v (got %q)", err, line)
	}
	data, ok := strings.CutPrefix(line, "data: ")
	if !ok {
		r.t.Fatalf("frame does not start with 'data: ': %q", line)
	}
	if blank, err := r.br.ReadString('\n'); err != nil || blank != "\n" {
		r.t.Fatalf("frame not followed by a blank line: %q %v", blank, err)
	}
	return strings.TrimSuffix(data, "\n")
}

// postStream posts body to path and fails t unless the reply is a 200
// stream of content type ctype; the caller closes its body.
func (g *genServer) postStream(t *testing.T, path, body, ctype string) *http.Response {
	t.Helper()
	resp, err := http.Post(g.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ctype {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("status %d, Content-Type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return resp
}

func (g *genServer) stream(t *testing.T, path, body string) []string {
	t.Helper()
	resp := g.postStream(t, path, body, "text/event-stream")
	defer resp.Body.Close()
	r := &sseReader{t: t, br: bufio.NewReader(resp.Body)}
	var frames []string
	for {
		f := r.next()
		if f == "[DONE]" {
			break
		}
		frames = append(frames, f)
	}
	if rest, _ := io.ReadAll(resp.Body); len(rest) > 0 {
		t.Fatalf("data after [DONE]: %q", rest)
	}
	return frames
}

func chatBody(extra string) string {
	return object(`"model":"`+model+`","messages":[{"role":"user","content":"Hi"}],"temperature":0`, extra)
}

// object is the JSON object of members and, unless it is "", extra.
func object(members, extra string) string {
	if extra != "" {
		members += "," + extra
	}
	return "{" + members + "}"
}

func TestChatCompletion(t *testing.T) {
	g := newGenServer(t, "Hello there!", Options{}, inference.Config{})
	resp, body := g.post(t, "/v1/chat/completions", chatBody(`"return_token_ids":true`))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	checkShape(t, body, chatCompletionSpec)
	var c openai.ChatCompletion
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.ID, "chatcmpl-") || c.Model != model || len(c.Choices) != 1 {
		t.Fatalf("response %s", body)
	}
	ch := c.Choices[0]
	if ch.Message.Content == nil || *ch.Message.Content != "Hello there!" || ch.FinishReason != "stop" || ch.Message.ToolCalls != nil {
		t.Fatalf("choice %s", body)
	}
	// The prompt is the rendered template with the configured date, encoded
	// segment-wise; the model saw exactly those ids.
	tk := testTokenizer(t)
	want := tk.Encode("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"+
		"Today Date: "+time.Now().Format("02 Jan 2006")+"\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"+
		"<|start_header_id|>assistant<|end_header_id|>\n\n", false, true)
	if !slices.Equal(c.PromptTokenIDs, want) || !slices.Equal(g.fm.Calls()[0].Seq, want) {
		t.Fatalf("prompt ids %v, model saw %v, want %v", c.PromptTokenIDs, g.fm.Calls()[0].Seq, want)
	}
	script := tk.Encode("Hello there!", false, false)
	if !slices.Equal(ch.TokenIDs, script) {
		t.Fatalf("token_ids %v, want %v", ch.TokenIDs, script)
	}
	u := c.Usage
	if u.PromptTokens != len(want) || u.CompletionTokens != len(script)+1 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Fatalf("usage %+v", u)
	}
	if c.Timings == nil || c.Timings.PredictedN != len(script)+1 || c.Timings.PromptN+c.Timings.CacheN != len(want) {
		t.Fatalf("timings %+v", c.Timings)
	}

	// The same prompt again is served from the prefix cache.
	_, body = g.post(t, "/v1/chat/completions", chatBody(""))
	_ = json.Unmarshal(body, &c)
	if c.Usage.PromptTokensDetails.CachedTokens == 0 {
		t.Errorf("second request cached_tokens = 0: %s", body)
	}
}

func TestChatStream(t *testing.T) {
	g := newGenServer(t, "Hello there, friend!", Options{}, inference.Config{})
	for _, includeUsage := range []bool{false, true} {
		extra := `"stream":true`
		if includeUsage {
			extra += `,"stream_options":{"include_usage":true}`
		}
		frames := g.stream(t, "/v1/chat/completions", chatBody(extra))
		var text strings.Builder
		var id string
		var created int64
		for i, f := range frames {
			checkShape(t, []byte(f), chatChunkSpec)
			var raw map[string]json.RawMessage
			_ = json.Unmarshal([]byte(f), &raw)
			usage, hasUsage := raw["usage"]
			if hasUsage != includeUsage {
				t.Fatalf("frame %d: usage present=%v, include_usage=%v: %s", i, hasUsage, includeUsage, f)
			}
			var c openai.ChatCompletionChunk
			_ = json.Unmarshal([]byte(f), &c)
			if i == 0 {
				id, created = c.ID, c.Created
				if !strings.Contains(f, `"delta":{"role":"assistant","content":""}`) {
					t.Fatalf("first frame %s", f)
				}
			} else if c.ID != id || c.Created != created {
				t.Fatalf("id/created changed: %s", f)
			}
			last := i == len(frames)-1
			switch {
			case includeUsage && last:
				if len(c.Choices) != 0 || string(usage) == "null" || !strings.Contains(f, `"timings":`) {
					t.Fatalf("usage frame %s", f)
				}
			case includeUsage && hasUsage && string(usage) != "null":
				t.Fatalf("usage before the last frame: %s", f)
			case len(c.Choices) != 1:
				t.Fatalf("frame %d choices: %s", i, f)
			case i > 0 && c.Choices[0].Delta.Role != "":
				t.Fatalf("role in a later frame: %s", f)
			case c.Choices[0].FinishReason != nil:
				if *c.Choices[0].FinishReason != "stop" || !strings.Contains(f, `"delta":{}`) {
					t.Fatalf("finish frame %s", f)
				}
				if want := len(frames) - 1 - b2i(includeUsage); i != want {
					t.Fatalf("finish frame at %d, want %d", i, want)
				}
				if !includeUsage && !strings.Contains(f, `"timings":`) {
					t.Fatalf("no timings on the last frame: %s", f)
				}
			default:
				if c.Choices[0].Delta.Content != nil {
					text.WriteString(*c.Choices[0].Delta.Content)
				}
			}
		}
		if text.String() != "Hello there, friend!" {
			t.Fatalf("streamed text %q", text.String())
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestStreamIsIncremental checks that frames reach a real HTTP client while
// the model is still generating.
func TestStreamIsIncremental(t *testing.T) {
	g := newGenServer(t, "one two three", Options{}, inference.Config{})
	gate := g.fm.Gate(true)
	var lift sync.Once
	defer lift.Do(func() { g.fm.Gate(false); close(gate) }) // also on failure
	resp, err := http.Post(g.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody(`"stream":true`)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := &sseReader{t: t, br: bufio.NewReader(resp.Body)}
	if f := r.next(); !strings.Contains(f, `"role":"assistant"`) {
		t.Fatalf("first frame %s", f)
	}
	gate <- struct{}{} // one model call: the first token
	if f := r.next(); !strings.Contains(f, `"content":"one"`) {
		t.Fatalf("second frame %s", f)
	}
	lift.Do(func() { g.fm.Gate(false); close(gate) })
	for f := r.next(); f != "[DONE]"; f = r.next() {
	}
}

const weatherTool = `"tools":[{"type":"function","function":{"name":"get_weather","description":"Get the weather",` +
	`"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`

func TestToolCalls(t *testing.T) {
	g := newGenServer(t, `{"name": "get_weather", "parameters": {"city": "Paris"}}`, Options{}, inference.Config{})
	_, body := g.post(t, "/v1/chat/completions", chatBody(weatherTool))
	checkShape(t, body, chatCompletionSpec)
	var c openai.ChatCompletion
	_ = json.Unmarshal(body, &c)
	ch := c.Choices[0]
	if ch.FinishReason != "tool_calls" || ch.Message.Content != nil || len(ch.Message.ToolCalls) != 1 ||
		!strings.Contains(string(body), `"content":null`) {
		t.Fatalf("response %s", body)
	}
	tc := ch.Message.ToolCalls[0]
	if !strings.HasPrefix(tc.ID, "call_") || tc.Type != "function" || tc.Function.Name != "get_weather" ||
		tc.Function.Arguments != `{"city":"Paris"}` {
		t.Fatalf("tool call %+v", tc)
	}

	// Streaming: a head delta with id, type, name and "" arguments, then the arguments.
	frames := g.stream(t, "/v1/chat/completions", chatBody(weatherTool+`,"stream":true`))
	var deltas []openai.ToolCallDelta
	var finish string
	for _, f := range frames {
		checkShape(t, []byte(f), chatChunkSpec)
		var c openai.ChatCompletionChunk
		_ = json.Unmarshal([]byte(f), &c)
		if d := c.Choices[0].Delta; d.Content != nil && *d.Content != "" {
			t.Fatalf("content frame in a tool call stream: %s", f)
		}
		deltas = append(deltas, c.Choices[0].Delta.ToolCalls...)
		if c.Choices[0].FinishReason != nil {
			finish = *c.Choices[0].FinishReason
		}
	}
	if len(deltas) != 2 || finish != "tool_calls" {
		t.Fatalf("deltas %+v finish %q: %v", deltas, finish, frames)
	}
	head, args := deltas[0], deltas[1]
	if head.Index != 0 || !strings.HasPrefix(head.ID, "call_") || head.Type != "function" ||
		head.Function.Name != "get_weather" || head.Function.Arguments != "" ||
		args.ID != "" || args.Function.Name != "" || args.Function.Arguments != `{"city":"Paris"}` {
		t.Fatalf("deltas %+v", deltas)
	}
	if !strings.Contains(frames[len(frames)-3], `"arguments":""`) {
		t.Fatalf("head delta must carry empty arguments: %s", frames[len(frames)-3])
	}

	// tool_choice none: no tools rendered, the output is plain content.
	_, body = g.post(t, "/v1/chat/completions", chatBody(weatherTool+`,"tool_choice":"none"`))
	_ = json.Unmarshal(body, &c)
	if c.Choices[0].FinishReason != "stop" || c.Choices[0].Message.Content == nil ||
		!strings.HasPrefix(*c.Choices[0].Message.Content, `{"name": "get_weather"`) {
		t.Fatalf("tool_choice none: %s", body)
	}

	// The result goes back as a tool message.
	round := `{"model":"` + model + `","temperature":0,` + weatherTool + `,"messages":[{"role":"user","content":"Weather in Paris?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"` + tc.ID + `","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
		`{"role":"tool","tool_call_id":"` + tc.ID + `","content":"{\"temp_c\": 18}"}]}`
	prompt := g.prompt(t, "/v1/chat/completions", round)
	if !strings.Contains(prompt, `<|start_header_id|>ipython<|end_header_id|>`+"\n\n"+`"{\"temp_c\": 18}"<|eot_id|>`) {
		t.Fatalf("tool result not in the prompt: %q", prompt)
	}
}

func TestToolCallUnknownFunctionIsContent(t *testing.T) {
	out := `{"name": "send_email", "parameters": {"to": "x"}}`
	g := newGenServer(t, out, Options{}, inference.Config{})
	_, body := g.post(t, "/v1/chat/completions", chatBody(weatherTool))
	var c openai.ChatCompletion
	_ = json.Unmarshal(body, &c)
	if c.Choices[0].FinishReason != "stop" || c.Choices[0].Message.Content == nil || *c.Choices[0].Message.Content != out {
		t.Fatalf("non-stream: %s", body)
	}
	frames := g.stream(t, "/v1/chat/completions", chatBody(weatherTool+`,"stream":true`))
	var text strings.Builder
	for _, f := range frames {
		var c openai.ChatCompletionChunk
		_ = json.Unmarshal([]byte(f), &c)
		if len(c.Choices[0].Delta.ToolCalls) > 0 {
			t.Fatalf("tool call delta: %s", f)
		}
		if d := c.Choices[0].Delta.Content; d != nil {
			text.WriteString(*d)
		}
	}
	if text.String() != out {
		t.Fatalf("streamed %q", text.String())
	}
}

func TestStopAndLength(t *testing.T) {
	g := newGenServer(t, "Hello world. Goodbye world.", Options{}, inference.Config{})
	for _, tc := range []struct{ extra, text, finish string }{
		{`"stop":"world"`, "Hello ", "stop"},
		{`"stop":["Good","."]`, "Hello world", "stop"},
		{`"max_tokens":2`, "Hello world", "length"},
		{`"max_completion_tokens":1,"max_tokens":5`, "Hello", "length"},
	} {
		_, body := g.post(t, "/v1/chat/completions", chatBody(tc.extra))
		var c openai.ChatCompletion
		_ = json.Unmarshal(body, &c)
		if len(c.Choices) != 1 || c.Choices[0].Message.Content == nil || *c.Choices[0].Message.Content != tc.text ||
			c.Choices[0].FinishReason != tc.finish {
			t.Errorf("%s: %s", tc.extra, body)
		}
		frames := g.stream(t, "/v1/chat/completions", chatBody(tc.extra+`,"stream":true`))
		var text strings.Builder
		var finish string
		for _, f := range frames {
			var c openai.ChatCompletionChunk
			_ = json.Unmarshal([]byte(f), &c)
			if d := c.Choices[0].Delta.Content; d != nil {
				text.WriteString(*d)
			}
			if c.Choices[0].FinishReason != nil {
				finish = *c.Choices[0].FinishReason
			}
		}
		if text.String() != tc.text || finish != tc.finish {
			t.Errorf("%s stream: %q %q", tc.extra, text.String(), finish)
		}
	}
}

func TestChatLogprobsAndN(t *testing.T) {
	g := newGenServer(t, "Hi you", Options{}, inference.Config{})
	_, body := g.post(t, "/v1/chat/completions", chatBody(`"logprobs":true,"top_logprobs":2,"n":2`))
	checkShape(t, body, chatCompletionSpec)
	var c openai.ChatCompletion
	_ = json.Unmarshal(body, &c)
	if len(c.Choices) != 2 {
		t.Fatalf("%s", body)
	}
	for i, ch := range c.Choices {
		if ch.Index != i || *ch.Message.Content != "Hi you" || ch.Logprobs == nil || len(ch.Logprobs.Content) != 2 {
			t.Fatalf("choice %d: %s", i, body)
		}
		lp := ch.Logprobs.Content[1]
		if lp.Token != " you" || !slices.Equal(lp.Bytes, []int{' ', 'y', 'o', 'u'}) || lp.Logprob > 0 ||
			len(lp.TopLogprobs) != 2 || lp.TopLogprobs[0].Token != " you" {
			t.Fatalf("logprob %+v", lp)
		}
	}
	checkShape(t, body, map[string]any{"choices": []any{map[string]any{"logprobs": chatLogprobSpec}}})
}

func TestCompletions(t *testing.T) {
	g := newGenServer(t, " jumps over", Options{}, inference.Config{})
	tk := testTokenizer(t)
	prompt := tk.Encode("The quick brown fox", false, false)
	ids, _ := json.Marshal(prompt)

	// Token ids are used exactly: no BOS is added.
	_, body := g.post(t, "/v1/completions", `{"model":"`+model+`","prompt":`+string(ids)+`,"temperature":0,"return_token_ids":true}`)
	checkShape(t, body, completionSpec)
	var c openai.Completion
	_ = json.Unmarshal(body, &c)
	if !strings.HasPrefix(c.ID, "cmpl-") || c.Choices[0].Text != " jumps over" || *c.Choices[0].FinishReason != "stop" {
		t.Fatalf("%s", body)
	}
	if calls := g.fm.Calls(); !slices.Equal(calls[0].Seq, prompt) || !slices.Equal(c.PromptTokenIDs, prompt) {
		t.Fatalf("model saw %v, want %v", calls[0].Seq, prompt)
	}

	// A string prompt gets BOS (once) and special tokens are parsed.
	for _, p := range []string{"The quick brown fox", "<|begin_of_text|>The quick brown fox"} {
		pj, _ := json.Marshal(p)
		_, body = g.post(t, "/v1/completions", `{"model":"`+model+`","prompt":`+string(pj)+`,"echo":true,"max_tokens":1}`)
		_ = json.Unmarshal(body, &c)
		calls := g.fm.Calls()
		if seq := calls[len(calls)-1].Seq; !slices.Equal(seq, append([]int32{128000}, prompt...)) {
			t.Fatalf("%q: model saw %v", p, seq)
		}
		if c.Choices[0].Text != p+" jumps" || *c.Choices[0].FinishReason != "length" {
			t.Fatalf("echo: %s", body)
		}
	}

	// Logprobs: tokens, token_logprobs, top_logprobs as dicts, text_offset.
	_, body = g.post(t, "/v1/completions", `{"model":"`+model+`","prompt":`+string(ids)+`,"logprobs":2,"temperature":0}`)
	_ = json.Unmarshal(body, &c)
	lp := c.Choices[0].Logprobs
	if lp == nil || !slices.Equal(lp.Tokens, []string{" jumps", " over"}) || !slices.Equal(lp.TextOffset, []int{0, 6}) ||
		len(lp.TokenLogprobs) != 2 || len(lp.TopLogprobs) != 2 || len(lp.TopLogprobs[0]) != 2 {
		t.Fatalf("logprobs %s", body)
	}

	// Streaming, with usage.
	frames := g.stream(t, "/v1/completions", `{"model":"`+model+`","prompt":`+string(ids)+
		`,"stream":true,"stream_options":{"include_usage":true},"logprobs":0}`)
	var text strings.Builder
	var offsets []int
	for i, f := range frames {
		checkShape(t, []byte(f), completionSpec)
		var c openai.Completion
		_ = json.Unmarshal([]byte(f), &c)
		if i == len(frames)-1 {
			if len(c.Choices) != 0 || !strings.Contains(f, `"prompt_tokens":4`) {
				t.Fatalf("usage frame %s", f)
			}
			continue
		}
		if !strings.Contains(f, `"usage":null`) {
			t.Fatalf("frame without usage:null: %s", f)
		}
		text.WriteString(c.Choices[0].Text)
		if c.Choices[0].Logprobs != nil {
			offsets = append(offsets, c.Choices[0].Logprobs.TextOffset...)
		}
	}
	if text.String() != " jumps over" || !slices.Equal(offsets, []int{0, 6}) {
		t.Fatalf("streamed %q offsets %v", text.String(), offsets)
	}
}

func TestMidStreamError(t *testing.T) {
	g := newGenServer(t, "a b c d", Options{}, inference.Config{})
	g.fm.Fail(nil, errors.New("graph execute failed"))
	frames := g.stream(t, "/v1/chat/completions", chatBody(`"stream":true`))
	last := frames[len(frames)-1]
	var e struct {
		Error struct{ Message, Type string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(last), &e); err != nil || e.Error.Type != TypeServer || strings.Contains(last, "graph") {
		t.Fatalf("last frame %s (frames %v)", last, frames)
	}
	if !strings.Contains(frames[1], `"content":"a"`) {
		t.Fatalf("content before the error: %v", frames)
	}
	// The same failure without streaming is a 500.
	g.fm.Fail(nil, errors.New("graph execute failed"))
	resp, body := g.post(t, "/v1/chat/completions", chatBody(""))
	if resp.StatusCode != 500 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestBusy(t *testing.T) {
	g := newGenServer(t, "x", Options{}, inference.Config{QueueLen: 1})
	gate := g.fm.Gate(true)
	lifted := false
	lift := func() {
		if !lifted {
			lifted = true
			g.fm.Gate(false)
			close(gate)
		}
	}
	defer lift() // also on failure, so the gated handlers end
	done := make(chan int, 2)
	waitFor := func(what string, cond func() bool) {
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
		}
	}
	post := func() {
		resp, err := http.Post(g.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody("")))
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}
	// One request runs (blocked in the model), one waits in the queue.
	go post()
	waitFor("the first request did not start", func() bool { return len(g.fm.Calls()) > 0 })
	go post()
	waitFor("the second request did not queue", func() bool { return g.eng.QueueDepth() == 1 })
	resp, body := g.post(t, "/v1/chat/completions", chatBody(""))
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "server_overloaded") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	lift()
	for range 2 {
		if code := <-done; code != 200 {
			t.Fatalf("queued request: %d", code)
		}
	}
}

func TestClientDisconnectCancels(t *testing.T) {
	g := newGenServer(t, strings.Repeat("word ", 200), Options{}, inference.Config{})
	g.fm.SetLatency(2 * time.Millisecond)
	resp, err := http.Post(g.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody(`"stream":true`)))
	if err != nil {
		t.Fatal(err)
	}
	r := &sseReader{t: t, br: bufio.NewReader(resp.Body)}
	r.next()
	r.next()
	resp.Body.Close()
	// The engine stops: the model sees no more calls soon after.
	var n int
	for deadline := time.Now().Add(5 * time.Second); ; {
		time.Sleep(50 * time.Millisecond)
		m := len(g.fm.Calls())
		if m == n {
			break
		}
		n = m
		if time.Now().After(deadline) {
			t.Fatal("generation did not stop")
		}
	}
	if n >= 200 {
		t.Fatalf("generated %d tokens after the client left", n)
	}
}

// TestBodyTimeout: a client that trickles its body gets a 408 once the body
// timeout passes, while a streaming response that lasts longer than the body
// timeout runs to its end.
func TestBodyTimeout(t *testing.T) {
	const timeout = 150 * time.Millisecond
	g := newGenServer(t, strings.Repeat(" word", 40), Options{BodyTimeout: timeout}, inference.Config{})

	conn, err := net.Dial("tcp", strings.TrimPrefix(g.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no response to a trickled body: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || time.Since(start) > 10*timeout {
		t.Fatalf("trickled body: status %d after %v, want 408 after about %v", resp.StatusCode, time.Since(start), timeout)
	}

	g.fm.SetLatency(20 * time.Millisecond) // 20 tokens ≈ 400 ms, well past the body timeout
	t0 := time.Now()
	resp2, body := g.post(t, "/v1/chat/completions", `{"model":"`+model+`","stream":true,"max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`)
	if resp2.StatusCode != 200 || !strings.Contains(string(body), `"finish_reason":"length"`) || !strings.HasSuffix(strings.TrimSpace(string(body)), "data: [DONE]") {
		t.Fatalf("long stream after the body timeout: %d\n%s", resp2.StatusCode, body)
	}
	t.Logf("stream took %v", time.Since(t0))
}
