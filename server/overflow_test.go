package server_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/overflow"
	"github.com/hexserve/hexserve/server"
)

// longChat is a conversation of turns exchanges, about 3× the 512-token
// window at 20 turns: a system prompt, then user/assistant pairs, the
// third of them calling a tool, and a last user question.
func longChat(turns int) string { return longChatArgs(turns, `"{}"`) }

// longOllamaChat is longChat with the call's arguments an object, as
// Ollama's API sends them.
func longOllamaChat(turns int) string { return longChatArgs(turns, `{}`) }

func longChatArgs(turns int, args string) string {
	msgs := []string{`{"role":"system","content":"SYSTEM RULES"}`}
	for i := range turns {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"question %d %s"}`, i, strings.Repeat("word ", 20)))
		if i == 2 {
			msgs = append(msgs, `{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":`+args+`}}]}`,
				`{"role":"tool","tool_call_id":"call_1","content":"sunny"}`)
		}
		msgs = append(msgs, fmt.Sprintf(`{"role":"assistant","content":"answer %d %s"}`, i, strings.Repeat("text ", 20)))
	}
	msgs = append(msgs, `{"role":"user","content":"LAST QUESTION"}`)
	return "[" + strings.Join(msgs, ",") + "]"
}

const weather = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{}}}}]`

func chatOf(msgs, extra string) string {
	return object(`"model":"`+modelID+`","messages":`+msgs+`,"max_tokens":4,`+weather, extra)
}

// truncatedBy is the header's count of dropped messages (0: absent).
func truncatedBy(t *testing.T, rep reply) int {
	t.Helper()
	h := rep.Header.Get(server.HeaderTruncated)
	if h == "" {
		return 0
	}
	n, err := strconv.Atoi(h)
	if err != nil || n <= 0 {
		t.Fatalf("%s: %q", server.HeaderTruncated, h)
	}
	return n
}

// TestOverflowDefaultError pins the 400 of a conversation over the window
// on the APIs whose default is error, byte for byte as before
// context_overflow, and checks that no truncation header goes with it.
func TestOverflowDefaultError(t *testing.T) {
	r := newRig(t, rigOptions{})
	long := strings.Repeat("hello ", 600)
	tests := []struct{ path, body, want string }{
		{"/v1/chat/completions", chatOf(longChat(20), ""),
			`{"error":{"message":"This model's maximum context length is 512 tokens. However, your messages resulted in 1285 tokens and 4 in the completion (max_tokens). Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}` + "\n"},
		{"/v1/completions", `{"model":"` + modelID + `","prompt":"` + long + `","max_tokens":4}`,
			`{"error":{"message":"This model's maximum context length is 512 tokens. However, your prompt resulted in 602 tokens and 4 in the completion (max_tokens). Please reduce the length of the prompt.","type":"invalid_request_error","param":"prompt","code":"context_length_exceeded"}}` + "\n"},
		{"/v1/messages", `{"model":"` + modelID + `","max_tokens":4,"system":"SYSTEM RULES","messages":[{"role":"user","content":"` + long + `"},{"role":"assistant","content":"ok"},{"role":"user","content":"LAST"}]}`,
			`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 650 tokens > 511 maximum"}}` + "\n"},
		{"/api/chat", `{"model":"` + modelID + `","stream":false,"truncate":false,"messages":` + longOllamaChat(20) + `}`,
			`{"error":"This model's maximum context length is 512 tokens. However, your messages resulted in 1186 tokens. Please reduce the length of the messages."}` + "\n"},
	}
	for _, tt := range tests {
		rep := r.do(t, "POST", tt.path, tt.body)
		if rep.Status != 400 || !strings.HasPrefix(string(rep.Body), tt.want) || truncatedBy(t, rep) != 0 {
			t.Errorf("%s: %d %s\nwant %s", tt.path, rep.Status, rep.Body, tt.want)
		}
	}
}

// TestOverflowTruncates checks each API with truncation asked for (the
// Ollama API by default): a 200, the header naming the dropped messages, a
// WARN line, and usage counting the prompt that was read: the one
// /apply-template shows under the same policy.
func TestOverflowTruncates(t *testing.T) {
	r := newRig(t, rigOptions{})
	msgs := longChat(20)
	applied := func(policy string) int {
		t.Helper()
		rep := r.expect(t, 200, "POST", "/apply-template", object(`"messages":`+msgs+`,"max_tokens":4,`+weather, `"context_overflow":"`+policy+`"`))
		var out struct{ Prompt string }
		_ = json.Unmarshal(rep.Body, &out)
		if !strings.Contains(out.Prompt, "SYSTEM RULES") || !strings.Contains(out.Prompt, "get_weather") ||
			!strings.HasSuffix(out.Prompt, "LAST QUESTION<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n") ||
			strings.Contains(out.Prompt, "question 5 ") || truncatedBy(t, rep) == 0 {
			t.Fatalf("%s: apply-template prompt %q", policy, out.Prompt)
		}
		if first := strings.Contains(out.Prompt, "question 0 "); first != (policy == "truncate_middle") {
			t.Fatalf("%s: first user turn kept: %v", policy, first)
		}
		tok := r.expect(t, 200, "POST", "/tokenize", `{"content":`+strconv.Quote(out.Prompt)+`}`)
		var n struct{ Count int }
		_ = json.Unmarshal(tok.Body, &n)
		return n.Count
	}
	for _, policy := range []string{"truncate_middle", "rolling"} {
		want := applied(policy)
		rep := r.expect(t, 200, "POST", "/v1/chat/completions", chatOf(msgs, `"context_overflow":"`+policy+`"`))
		var c struct {
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			}
		}
		_ = json.Unmarshal(rep.Body, &c)
		if truncatedBy(t, rep) == 0 || c.Usage.PromptTokens != want || want > 512 {
			t.Errorf("chat %s: header %q, prompt_tokens %d, apply-template %d", policy, rep.Header.Get(server.HeaderTruncated), c.Usage.PromptTokens, want)
		}
	}
	if !strings.Contains(r.Log.String(), `"level":"warn"`) || !strings.Contains(r.Log.String(), "context_overflow") {
		t.Errorf("no WARN line: %s", r.Log.String())
	}

	// Ollama: truncate is on unless false; prompt_eval_count is what was read.
	rep := r.expect(t, 200, "POST", "/api/chat", `{"model":"`+modelID+`","stream":false,"messages":`+longOllamaChat(20)+`,"options":{"num_predict":4},`+weather+`}`)
	var o struct {
		PromptEvalCount int `json:"prompt_eval_count"`
	}
	_ = json.Unmarshal(rep.Body, &o)
	if truncatedBy(t, rep) == 0 || o.PromptEvalCount == 0 || o.PromptEvalCount > 512-4 {
		t.Errorf("ollama chat: header %q, prompt_eval_count %d", rep.Header.Get(server.HeaderTruncated), o.PromptEvalCount)
	}

	// Ollama's raw generate: BOS and the newest tail.
	rep = r.expect(t, 200, "POST", "/api/generate", `{"model":"`+modelID+`","stream":false,"raw":true,"prompt":"`+strings.Repeat("hello ", 600)+`END","options":{"num_predict":4}}`)
	_ = json.Unmarshal(rep.Body, &o)
	if truncatedBy(t, rep) == 0 || o.PromptEvalCount != 512-4 {
		t.Errorf("ollama raw generate: header %q, prompt_eval_count %d", rep.Header.Get(server.HeaderTruncated), o.PromptEvalCount)
	}
	rep = r.expect(t, 400, "POST", "/api/generate", `{"model":"`+modelID+`","stream":false,"raw":true,"truncate":false,"prompt":"`+strings.Repeat("hello ", 600)+`"}`)
	if truncatedBy(t, rep) != 0 {
		t.Errorf("a 400 with the header")
	}

	// Anthropic, with the field.
	rep = r.expect(t, 200, "POST", "/v1/messages", `{"model":"`+modelID+`","max_tokens":4,"context_overflow":"rolling","system":"S","messages":[`+
		`{"role":"user","content":"`+strings.Repeat("hello ", 600)+`"},{"role":"assistant","content":"ok"},{"role":"user","content":"LAST"}]}`)
	var a struct {
		Usage struct {
			InputTokens int `json:"input_tokens"`
		} `json:"usage"`
	}
	_ = json.Unmarshal(rep.Body, &a)
	if truncatedBy(t, rep) != 2 || a.Usage.InputTokens > 50 {
		t.Errorf("messages: header %q, input_tokens %d", rep.Header.Get(server.HeaderTruncated), a.Usage.InputTokens)
	}

	// Completions: n_keep tokens after BOS and the newest tail, in max_tokens' room.
	rep = r.expect(t, 200, "POST", "/v1/completions", `{"model":"`+modelID+`","prompt":"KEEP`+strings.Repeat(" hello", 600)+` END","max_tokens":4,"n_keep":1,"context_overflow":"rolling"}`)
	var p struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	_ = json.Unmarshal(rep.Body, &p)
	if truncatedBy(t, rep) != 603-508 || p.Usage.PromptTokens != 508 {
		t.Errorf("completions: header %q, prompt_tokens %d", rep.Header.Get(server.HeaderTruncated), p.Usage.PromptTokens)
	}

	// Even what the policy keeps is over the window: the 400, naming it.
	rep = r.expect(t, 400, "POST", "/v1/chat/completions", chatOf(`[{"role":"user","content":"`+strings.Repeat("hello ", 600)+`"}]`, `"context_overflow":"rolling"`))
	if !strings.Contains(string(rep.Body), "the system messages, the tools and the last user turn") || truncatedBy(t, rep) != 0 {
		t.Errorf("kept over the window: %s", rep.Body)
	}
	r.expect(t, 400, "POST", "/v1/chat/completions", chatOf(msgs, `"context_overflow":"middle"`))
}

// TestOverflowModelPolicy checks the model's context_overflow: requests that
// leave the field out follow it, and the field overrides it.
func TestOverflowModelPolicy(t *testing.T) {
	r := newRig(t, rigOptions{model: func(m *server.Model) { m.Overflow = overflow.Rolling }})
	rep := r.expect(t, 200, "POST", "/v1/chat/completions", chatOf(longChat(20), ""))
	if truncatedBy(t, rep) == 0 {
		t.Errorf("the model's rolling did not truncate")
	}
	r.expect(t, 400, "POST", "/v1/chat/completions", chatOf(longChat(20), `"context_overflow":"error"`))
	for path, body := range map[string]string{ // streamed: the header leads the stream
		"/v1/chat/completions": chatOf(longChat(20), `"stream":true`),
		"/api/chat":            `{"model":"` + modelID + `","messages":` + longOllamaChat(20) + `}`,
	} {
		if rep := r.expect(t, 200, "POST", path, body); truncatedBy(t, rep) == 0 || !strings.Contains(string(rep.Body), "done") && !strings.Contains(string(rep.Body), "[DONE]") {
			t.Errorf("%s streamed: header %q, %s", path, rep.Header.Get(server.HeaderTruncated), rep.Body)
		}
	}
	rep = r.expect(t, 200, "POST", "/v1/chat/completions", chatOf(`[{"role":"user","content":"Hi"}]`, ""))
	if truncatedBy(t, rep) != 0 {
		t.Errorf("a short prompt was truncated")
	}
}

// TestOverflowResponsesAuto: truncation "auto" truncates, echoes "auto" and
// sends the header.
func TestOverflowResponsesAuto(t *testing.T) {
	r := newRig(t, rigOptions{})
	var items []string
	items = append(items, `{"role":"developer","content":"Be brief."}`)
	for i := range 25 {
		items = append(items, fmt.Sprintf(`{"role":"user","content":"q %d"}`, i),
			fmt.Sprintf(`{"type":"function_call","call_id":"c%d","name":"f","arguments":"{}"}`, i),
			fmt.Sprintf(`{"type":"function_call_output","call_id":"c%d","output":%q}`, i, strings.Repeat("out ", 20)))
	}
	items = append(items, `{"role":"user","content":"last"}`)
	rep := r.do(t, "POST", "/v1/responses", respBody(`"input":[`+strings.Join(items, ",")+`],"truncation":"auto"`))
	resp := decodeResponse(t, rep)
	if resp.Truncation != "auto" || truncatedBy(t, rep)%3 != 0 || resp.Usage.InputTokens > 512-128 {
		t.Fatalf("auto: header %q, %+v", rep.Header.Get(server.HeaderTruncated), resp.Usage)
	}
}

// TestOverflowCORS: browsers may read the header.
func TestOverflowCORS(t *testing.T) {
	r := newRig(t, rigOptions{opts: server.Options{CORSOrigins: []string{"http://a.test"}}})
	rep := r.do(t, "POST", "/v1/chat/completions", chatOf(longChat(20), `"context_overflow":"rolling"`), "Origin", "http://a.test")
	if !strings.Contains(rep.Header.Get("Access-Control-Expose-Headers"), server.HeaderTruncated) || truncatedBy(t, rep) == 0 {
		t.Fatalf("headers %v", rep.Header)
	}
}

// TestWindowFinishReason: a reply cut by the window, before max_tokens, says
// so in each API's words (Anthropic's model_context_window_exceeded, not
// max_tokens), and max_tokens keeps its own.
func TestWindowFinishReason(t *testing.T) {
	r := newRig(t, rigOptions{script: loadTok(t).Encode(strings.Repeat(" hi", 600), false, false)})
	long := strings.Repeat("hello ", 470) // room for a few tokens of the 512
	tests := []struct{ path, body, want string }{
		{"/v1/chat/completions", object(`"model":"`+modelID+`","max_tokens":1000,"messages":[{"role":"user","content":"`+long+`"}]`, ""), `"finish_reason":"length"`},
		{"/v1/messages", `{"model":"` + modelID + `","max_tokens":1000,"messages":[{"role":"user","content":"` + long + `"}]}`, `"stop_reason":"model_context_window_exceeded"`},
		{"/v1/messages", `{"model":"` + modelID + `","max_tokens":2,"messages":[{"role":"user","content":"` + long + `"}]}`, `"stop_reason":"max_tokens"`},
		{"/api/chat", `{"model":"` + modelID + `","stream":false,"shift":false,"messages":[{"role":"user","content":"` + long + `"}]}`, `"done_reason":"length"`},
		// With a context shift the reply goes on past the window, to max_tokens.
		{"/v1/chat/completions", object(`"model":"`+modelID+`","max_tokens":300,"context_shift":true,"messages":[{"role":"user","content":"`+long+`"}]`, ""), `"finish_reason":"length"`},
		{"/v1/chat/completions", object(`"model":"`+modelID+`","max_tokens":300,"context_shift":true,"messages":[{"role":"user","content":"`+long+`"}]`, ""), `"completion_tokens":300,`},
		{"/v1/messages", `{"model":"` + modelID + `","max_tokens":300,"context_shift":true,"messages":[{"role":"user","content":"` + long + `"}]}`, `"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":505,"output_tokens":300,`},
		{"/api/chat", `{"model":"` + modelID + `","stream":false,"options":{"num_predict":300},"messages":[{"role":"user","content":"` + long + `"}]}`, `"eval_count":300,`},
	}
	for _, tt := range tests {
		rep := r.expect(t, 200, "POST", tt.path, tt.body)
		if !strings.Contains(string(rep.Body), tt.want) {
			t.Errorf("%s: %s, want %s", tt.path, rep.Body, tt.want)
		}
	}
}
