package server_test

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/server"
)

const msgPath = "/v1/messages"

// msgBody is a valid Messages request with extra top-level fields merged in.
func msgBody(extra string) string {
	return object(`"model":"claude-sonnet-4-5","max_tokens":4,"messages":[{"role":"user","content":"Hi"}]`, extra)
}

// msgsBody is a Messages request with the given messages array.
func msgsBody(msgs string, extra ...string) string {
	b := `{"model":"claude-sonnet-4-5","max_tokens":4,"messages":` + msgs
	for _, e := range extra {
		b += "," + e
	}
	return b + "}"
}

// anthropicError checks Anthropic's error envelope and returns its type and message.
func anthropicError(t testing.TB, rep reply) (typ, msg string) {
	t.Helper()
	if ct := rep.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q, body %s", ct, rep.Body)
	}
	var env struct {
		Type  string `json:"type"`
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rep.Body, &env); err != nil || env.Type != "error" || env.Error == nil || env.Error.Message == "" {
		t.Fatalf("not an Anthropic error body: %s (%v)", rep.Body, err)
	}
	return env.Error.Type, env.Error.Message
}

func claudeAliases(m *server.Model) { m.AliasGlobs = map[string]string{"claude-*": modelID} }

// TestMessagesBadInput sends malformed, out-of-range and unsupported
// Messages requests and checks each gets Anthropic's error type, status and
// a message naming the field, and that the server keeps serving.
func TestMessagesBadInput(t *testing.T) {
	const limit = 256 << 10
	r := newRig(t, rigOptions{opts: server.Options{BodyLimit: limit}, model: claudeAliases})
	rAuth := newRig(t, rigOptions{opts: server.Options{APIKeys: []string{apiKey}}, model: claudeAliases})
	long := strings.Repeat("hello ", 600) // ~600 tokens > 512 context
	tools := func(n int, schema string) string {
		ts := make([]string, n)
		for i := range ts {
			ts[i] = fmt.Sprintf(`{"name":"tool_%d","description":"%s","input_schema":%s}`, i, strings.Repeat("d", 40), schema)
		}
		return `"tools":[` + strings.Join(ts, ",") + `]`
	}
	obj := `{"type":"object","properties":{"x":{"type":"string"}}}`
	stops17 := `"stop_sequences":[` + strings.TrimSuffix(strings.Repeat(`"x",`, 17), ",") + `]`
	inv, nf := "invalid_request_error", "not_found_error"
	type tc struct {
		name     string
		rig      *rig
		method   string
		path     string
		body     string
		hdr      []string
		status   int
		typ      string
		contains []string
	}
	cases := []tc{
		{name: "invalid JSON", body: `{"model":`, status: 400, typ: inv},
		{name: "empty body", body: ``, status: 400, typ: inv, contains: []string{"empty"}},
		{name: "JSON array", body: `[1]`, status: 400, typ: inv},
		{name: "JSON null", body: `null`, status: 400, typ: inv},
		{name: "trailing data", body: msgBody("") + `{}`, status: 400, typ: inv},
		{name: "missing model", body: `{"max_tokens":4,"messages":[{"role":"user","content":"Hi"}]}`, status: 400, typ: inv, contains: []string{"model"}},
		{name: "wrong type model", body: `{"model":5,"max_tokens":4,"messages":[]}`, status: 400, typ: inv, contains: []string{"model"}},
		{name: "unknown model", body: `{"model":"gpt-5","max_tokens":4,"messages":[{"role":"user","content":"Hi"}]}`, status: 404, typ: nf, contains: []string{"gpt-5"}},
		{name: "served id", body: `{"model":"` + modelID + `","max_tokens":4,"messages":[{"role":"user","content":"Hi"}]}`, status: 200},
		{name: "exact alias", body: `{"model":"gpt-4o-mini","max_tokens":4,"messages":[{"role":"user","content":"Hi"}]}`, status: 200},
		{name: "missing max_tokens", body: `{"model":"claude-x","messages":[{"role":"user","content":"Hi"}]}`, status: 400, typ: inv, contains: []string{"max_tokens"}},
		{name: "max_tokens 0", body: msgBody(`"max_tokens":0`), status: 400, typ: inv},
		{name: "max_tokens negative", body: msgsBody(`[{"role":"user","content":"Hi"}]`, `"max_tokens":-1`), status: 400, typ: inv, contains: []string{"max_tokens"}},
		{name: "max_tokens fraction", body: `{"model":"claude-x","max_tokens":1.5,"messages":[{"role":"user","content":"Hi"}]}`, status: 400, typ: inv, contains: []string{"max_tokens"}},
		{name: "max_tokens string", body: `{"model":"claude-x","max_tokens":"4","messages":[{"role":"user","content":"Hi"}]}`, status: 400, typ: inv, contains: []string{"max_tokens"}},
		{name: "max_tokens past the window is clamped", body: `{"model":"claude-x","max_tokens":128000,"messages":[{"role":"user","content":"Hi"}]}`, status: 200},
		{name: "missing messages", body: `{"model":"claude-x","max_tokens":4}`, status: 400, typ: inv, contains: []string{"messages"}},
		{name: "empty messages", body: msgsBody(`[]`), status: 400, typ: inv, contains: []string{"messages"}},
		{name: "messages string", body: msgsBody(`"hi"`), status: 400, typ: inv, contains: []string{"messages"}},
		{name: "null message", body: msgsBody(`[null]`), status: 400, typ: inv, contains: []string{"messages[0]"}},
		{name: "unknown role", body: msgsBody(`[{"role":"wizard","content":"Hi"}]`), status: 400, typ: inv, contains: []string{"messages[0].role"}},
		{name: "missing role", body: msgsBody(`[{"content":"Hi"}]`), status: 400, typ: inv, contains: []string{"messages[0].role"}},
		{name: "wrong type role", body: msgsBody(`[{"role":1,"content":"Hi"}]`), status: 400, typ: inv, contains: []string{"role"}},
		{name: "missing content", body: msgsBody(`[{"role":"user"}]`), status: 400, typ: inv, contains: []string{"messages[0].content"}},
		{name: "null content", body: msgsBody(`[{"role":"user","content":null}]`), status: 400, typ: inv, contains: []string{"messages[0].content"}},
		{name: "wrong type content", body: msgsBody(`[{"role":"user","content":5}]`), status: 400, typ: inv, contains: []string{"content"}},
		{name: "null block", body: msgsBody(`[{"role":"user","content":[{"type":"text","text":"a"},null]}]`), status: 400, typ: inv, contains: []string{"messages[0].content[1]"}},
		{name: "block without type", body: msgsBody(`[{"role":"user","content":[{"text":"a"}]}]`), status: 400, typ: inv, contains: []string{"messages[0].content[0].type"}},
		{name: "unknown block type", body: msgsBody(`[{"role":"user","content":[{"type":"video"}]}]`), status: 400, typ: inv, contains: []string{"video"}},
		{name: "text block without text", body: msgsBody(`[{"role":"user","content":[{"type":"text"}]}]`), status: 400, typ: inv, contains: []string{"messages[0].content[0].text"}},
		{name: "text block wrong type text", body: msgsBody(`[{"role":"user","content":[{"type":"text","text":7}]}]`), status: 400, typ: inv, contains: []string{"text"}},
		{name: "image block", body: msgsBody(`[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]`),
			status: 400, typ: inv, contains: []string{"messages[0].content[0].type", "image"}},
		{name: "document block", body: msgsBody(`[{"role":"user","content":[{"type":"text","text":"a"},{"type":"document","source":{"type":"text","data":"x"}}]}]`),
			status: 400, typ: inv, contains: []string{"messages[0].content[1].type", "document"}},
		{name: "image in tool_result", body: msgsBody(`[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image"}]}]}]`),
			status: 400, typ: inv, contains: []string{"messages[0].content[0].content[0].type", "image"}},
		{name: "server tool block", body: msgsBody(`[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"server_tool_use","id":"s","name":"web_search"}]}]`),
			status: 400, typ: inv, contains: []string{"server_tool_use"}},
		{name: "tool_use in a user turn", body: msgsBody(`[{"role":"user","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}]`), status: 400, typ: inv, contains: []string{"assistant"}},
		{name: "tool_result in an assistant turn", body: msgsBody(`[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"t"}]}]`), status: 400, typ: inv, contains: []string{"user"}},
		{name: "tool_result without tool_use_id", body: msgsBody(`[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]`), status: 400, typ: inv, contains: []string{"tool_use_id"}},
		{name: "tool_use without id", body: msgsBody(`[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{}}]},{"role":"user","content":"b"}]`),
			status: 400, typ: inv, contains: []string{"messages[1].content[0].id"}},
		{name: "tool_use input not an object", body: msgsBody(`[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":[1]}]},{"role":"user","content":"b"}]`),
			status: 400, typ: inv, contains: []string{"messages[1].content[0].input"}},
		{name: "is_error wrong type", body: msgsBody(`[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x","is_error":"yes"}]}]`), status: 400, typ: inv, contains: []string{"is_error"}},
		{name: "tool round trip history", body: msgsBody(`[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"t","name":"tool_0","input":{"x":"1"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"1"}],"is_error":true}]}]`, tools(1, obj)), status: 200},
		{name: "system as blocks", body: msgBody(`"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=1;"},{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}]`), status: 200},
		{name: "system wrong type", body: msgBody(`"system":5`), status: 400, typ: inv, contains: []string{"system"}},
		{name: "system image block", body: msgBody(`"system":[{"type":"image"}]`), status: 400, typ: inv, contains: []string{"system[0]"}},
		{name: "temperature 1.5", body: msgBody(`"temperature":1.5`), status: 400, typ: inv, contains: []string{"temperature"}},
		{name: "temperature negative", body: msgBody(`"temperature":-0.1`), status: 400, typ: inv, contains: []string{"temperature"}},
		{name: "temperature string", body: msgBody(`"temperature":"hot"`), status: 400, typ: inv, contains: []string{"temperature"}},
		{name: "top_p 0", body: msgBody(`"top_p":0`), status: 400, typ: inv, contains: []string{"top_p"}},
		{name: "top_p 1.5", body: msgBody(`"top_p":1.5`), status: 400, typ: inv, contains: []string{"top_p"}},
		{name: "top_k negative", body: msgBody(`"top_k":-1`), status: 400, typ: inv, contains: []string{"top_k"}},
		{name: "nulls are absent", body: msgBody(`"temperature":null,"top_p":null,"top_k":null,"stop_sequences":null,"system":null,"tools":null,"tool_choice":null,"metadata":null,"thinking":null`), status: 200},
		{name: "too many stop sequences", body: msgBody(stops17), status: 400, typ: inv, contains: []string{"stop_sequences"}},
		{name: "empty stop sequence", body: msgBody(`"stop_sequences":[""]`), status: 400, typ: inv, contains: []string{"stop_sequences[0]"}},
		{name: "null stop sequence", body: msgBody(`"stop_sequences":["x",null]`), status: 400, typ: inv, contains: []string{"stop_sequences[1]"}},
		{name: "stop_sequences string", body: msgBody(`"stop_sequences":"x"`), status: 400, typ: inv, contains: []string{"stop_sequences"}},
		{name: "metadata.user_id number", body: msgBody(`"metadata":{"user_id":5}`), status: 400, typ: inv, contains: []string{"user_id"}},
		{name: "Anthropic-only fields are ignored", body: msgBody(`"metadata":{"user_id":"u1"},"max_tokens":2049,"thinking":{"type":"enabled","budget_tokens":2048},"context_management":{"edits":[{"type":"clear_tool_uses_20250919"}]},"output_config":{"effort":"medium"},"service_tier":"auto"`), status: 200},
		// Anthropic's words for an empty turn; a final assistant turn may be empty.
		{name: "empty user content", body: msgsBody(`[{"role":"user","content":""}]`), status: 400, typ: inv,
			contains: []string{"messages.0: all messages must have non-empty content except for the optional final assistant message"}},
		{name: "empty content blocks", body: msgsBody(`[{"role":"user","content":"Hi"},{"role":"assistant","content":[]},{"role":"user","content":"Hi"}]`), status: 400, typ: inv,
			contains: []string{"messages.1: all messages must have non-empty content"}},
		{name: "empty final assistant turn", body: msgsBody(`[{"role":"user","content":"Hi"},{"role":"assistant","content":""}]`), status: 200},
		{name: "thinking not an object", body: msgBody(`"thinking":"yes"`), status: 400, typ: inv, contains: []string{"thinking"}},
		{name: "thinking without type", body: msgBody(`"thinking":{}`), status: 400, typ: inv, contains: []string{"thinking.type"}},
		{name: "thinking budget below 1024", body: msgBody(`"max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":1000}`), status: 400, typ: inv, contains: []string{"thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"}},
		{name: "thinking budget not below max_tokens", body: msgBody(`"thinking":{"type":"enabled","budget_tokens":1024}`), status: 400, typ: inv, contains: []string{"`max_tokens` must be greater than `thinking.budget_tokens`"}},
		{name: "mcp_servers", body: msgBody(`"mcp_servers":[{"type":"url","url":"https://x","name":"x"}]`), status: 400, typ: inv, contains: []string{"mcp_servers"}},
		{name: "web_search server tool", body: msgBody(`"tools":[{"type":"web_search_20250305","name":"web_search"}]`), status: 400, typ: inv, contains: []string{"tools[0].type", "web_search_20250305"}},
		{name: "bash tool", body: msgBody(`"tools":[` + `{"name":"ok","input_schema":{}},{"type":"bash_20250124","name":"bash"}]`), status: 400, typ: inv, contains: []string{"tools[1].type"}},
		{name: "tool name with a space", body: msgBody(`"tools":[{"name":"get weather","input_schema":{}}]`), status: 400, typ: inv, contains: []string{"tools[0].name"}},
		{name: "tool without name", body: msgBody(`"tools":[{"input_schema":{}}]`), status: 400, typ: inv, contains: []string{"tools[0].name"}},
		{name: "duplicate tool names", body: msgBody(`"tools":[{"name":"a","input_schema":{}},{"name":"a","input_schema":{}}]`), status: 400, typ: inv, contains: []string{"tools[1].name", "unique"}},
		{name: "tool without input_schema", body: msgBody(`"tools":[{"name":"a"}]`), status: 400, typ: inv, contains: []string{"tools[0].input_schema"}},
		{name: "tool input_schema string", body: msgBody(`"tools":[{"name":"a","input_schema":"object"}]`), status: 400, typ: inv, contains: []string{"tools[0].input_schema"}},
		{name: "null tool", body: msgBody(`"tools":[null]`), status: 400, typ: inv, contains: []string{"tools[0]"}},
		{name: "tool schema nested too deep", body: msgBody(`"tools":[{"name":"a","input_schema":{"type":"object","x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}}]`), status: 400, typ: inv, contains: []string{"tools[0]"}},
		{name: "huge tool set renders past the window", body: msgBody(tools(1500, obj)), status: 400, typ: inv, contains: []string{"prompt is too long", "tokens > 511 maximum"}},
		{name: "tool_choice string", body: msgBody(tools(1, obj) + `,"tool_choice":"auto"`), status: 400, typ: inv, contains: []string{"tool_choice"}},
		{name: "tool_choice unknown type", body: msgBody(tools(1, obj) + `,"tool_choice":{"type":"required"}`), status: 400, typ: inv, contains: []string{"tool_choice.type"}},
		{name: "tool_choice any without tools", body: msgBody(`"tool_choice":{"type":"any"}`), status: 400, typ: inv, contains: []string{"tool_choice"}},
		{name: "tool_choice tool without name", body: msgBody(tools(1, obj) + `,"tool_choice":{"type":"tool"}`), status: 400, typ: inv, contains: []string{"tool_choice.name"}},
		{name: "tool_choice tool not in tools", body: msgBody(tools(1, obj) + `,"tool_choice":{"type":"tool","name":"nope"}`), status: 400, typ: inv, contains: []string{"tool_choice.name", "nope"}},
		{name: "tool_choice any with an unenforceable schema", body: msgBody(`"tools":[{"name":"a","input_schema":{"type":"object","properties":{"x":{"type":"string","format":"regex"}}}}],"tool_choice":{"type":"any"}`),
			status: 400, typ: inv, contains: []string{"tools[0].input_schema.properties.x.format"}},
		{name: "tool_choice none", body: msgBody(tools(1, obj) + `,"tool_choice":{"type":"none"}`), status: 200},
		{name: "output_config.format text", body: msgBody(`"output_config":{"format":{"type":"text"}}`), status: 400, typ: inv, contains: []string{"output_config.format.type"}},
		{name: "invalid UTF-8", body: "{\"model\":\"claude-x\",\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"a\xff\"}]}", status: 400, typ: inv, contains: []string{"messages[0].content", "UTF-8"}},
		{name: "invalid UTF-8 in a system block", body: msgBody("\"system\":[{\"type\":\"text\",\"text\":\"\xc3\"}]"), status: 400, typ: inv, contains: []string{"system[0].text", "UTF-8"}},
		{name: "prompt over the window", body: msgsBody(`[{"role":"user","content":"` + long + `"}]`), status: 400, typ: inv, contains: []string{"prompt is too long: ", " tokens > 511 maximum"}},
		{name: "body over limit", body: msgsBody(`[{"role":"user","content":"` + strings.Repeat("a", limit) + `"}]`), status: 413, typ: "request_too_large"},
		{name: "missing API key", rig: rAuth, body: msgBody(""), status: 401, typ: "authentication_error"},
		{name: "wrong API key", rig: rAuth, body: msgBody(""), hdr: []string{"x-api-key", "sk-wrong"}, status: 401, typ: "authentication_error"},
		{name: "x-api-key", rig: rAuth, body: msgBody(""), hdr: []string{"x-api-key", apiKey, "anthropic-version", "2023-06-01", "anthropic-beta", "claude-code-20250219"}, status: 200},
		{name: "beta query", path: msgPath + "?beta=true", body: msgBody(""), status: 200},
		{name: "wrong method", method: "GET", status: 405, typ: inv},
		{name: "unknown path under /v1/messages", path: msgPath + "/batches", body: msgBody(""), status: 404, typ: nf},
		{name: "count_tokens missing model", path: msgPath + "/count_tokens", body: `{"messages":[{"role":"user","content":"Hi"}]}`, status: 400, typ: inv, contains: []string{"model"}},
		{name: "count_tokens image", path: msgPath + "/count_tokens", body: msgsBody(`[{"role":"user","content":[{"type":"image"}]}]`), status: 400, typ: inv, contains: []string{"image"}},
		{name: "count_tokens unknown model", path: msgPath + "/count_tokens", body: `{"model":"llama","messages":[{"role":"user","content":"Hi"}]}`, status: 404, typ: nf},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rg := cmp.Or(c.rig, r)
			rep := rg.expect(t, c.status, cmp.Or(c.method, "POST"), cmp.Or(c.path, msgPath), c.body, c.hdr...)
			if c.status == 200 {
				if !bytes.Contains(rep.Body, []byte(`"type":"message"`)) {
					t.Fatalf("body %s", rep.Body)
				}
				rg.assertHealthy(t)
				return
			}
			typ, msg := anthropicError(t, rep)
			t.Logf("%d %s: %s", rep.Status, typ, msg)
			if typ != c.typ {
				t.Errorf("type %q, want %q (%s)", typ, c.typ, rep.Body)
			}
			for _, s := range c.contains {
				if !strings.Contains(msg, s) {
					t.Errorf("message %q lacks %q", msg, s)
				}
			}
			rg.assertHealthy(t)
		})
	}
	if rep := r.do(t, "POST", msgPath, msgBody("")); rep.Status != 200 {
		t.Fatalf("valid request after the matrix: %d %s", rep.Status, rep.Body)
	}
}

// TestMessagesResponse checks a non-streamed reply and count_tokens: the
// requested name is echoed, usage splits the prompt into evaluated and
// cached tokens, and count_tokens gives exactly the prompt tokens.
func TestMessagesResponse(t *testing.T) {
	r := newRig(t, rigOptions{model: claudeAliases})
	body := msgBody(`"system":"Be brief.","metadata":{"user_id":"conv-1"}`)
	var msg struct {
		ID, Type, Role, Model string
		Content               []struct{ Type, Text string }
		StopReason            string  `json:"stop_reason"`
		StopSequence          *string `json:"stop_sequence"`
		Usage                 struct {
			Input     int `json:"input_tokens"`
			Output    int `json:"output_tokens"`
			CacheRead int `json:"cache_read_input_tokens"`
		}
	}
	rep := r.do(t, "POST", msgPath, body)
	if err := json.Unmarshal(rep.Body, &msg); rep.Status != 200 || err != nil {
		t.Fatalf("%d %s", rep.Status, rep.Body)
	}
	if !strings.HasPrefix(msg.ID, "msg_") || msg.Type != "message" || msg.Role != "assistant" || msg.Model != "claude-sonnet-4-5" ||
		len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text == "" || msg.StopReason != "max_tokens" || msg.Usage.Output != 4 {
		t.Fatalf("message %s", rep.Body)
	}
	rep = r.do(t, "POST", msgPath+"/count_tokens", body)
	var count struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.Unmarshal(rep.Body, &count); rep.Status != 200 || err != nil || count.InputTokens != msg.Usage.Input+msg.Usage.CacheRead {
		t.Fatalf("count_tokens %d %s, want %d", rep.Status, rep.Body, msg.Usage.Input+msg.Usage.CacheRead)
	}
	// A stop sequence: the scripted reply is " Hello there, general Kenobi."
	rep = r.do(t, "POST", msgPath, msgBody(`"max_tokens":30,"stop_sequences":["general"]`))
	if err := json.Unmarshal(rep.Body, &msg); err != nil || msg.StopReason != "stop_sequence" || msg.StopSequence == nil ||
		*msg.StopSequence != "general" || msg.Content[0].Text != " Hello there, " {
		t.Fatalf("stop sequence: %s", rep.Body)
	}
}

// sseEvents reads a whole SSE response into its event names and data.
func sseEvents(t *testing.T, body []byte) (names []string, data []string) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			names = append(names, name)
		} else if d, ok := strings.CutPrefix(line, "data: "); ok {
			data = append(data, d)
		}
	}
	if len(names) != len(data) {
		t.Fatalf("%d event names, %d data lines:\n%s", len(names), len(data), body)
	}
	return names, data
}

// TestMessagesStream checks the event order of a stream, pings while the
// model is slow, and an error event when generation fails mid-stream.
func TestMessagesStream(t *testing.T) {
	r := newRig(t, rigOptions{opts: server.Options{PingInterval: 15 * time.Millisecond}, model: claudeAliases})
	rep := r.do(t, "POST", msgPath, msgBody(`"stream":true,"max_tokens":3`))
	names, data := sseEvents(t, rep.Body)
	want := "message_start ping content_block_start content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if rep.Status != 200 || strings.Join(names, " ") != want {
		t.Fatalf("events %v, want %s:\n%s", names, want, rep.Body)
	}
	for i, d := range data {
		var ev struct{ Type string }
		if err := json.Unmarshal([]byte(d), &ev); err != nil || ev.Type != names[i] {
			t.Fatalf("event %s data %s", names[i], d)
		}
	}

	r.Model.SetLatency(60 * time.Millisecond)
	rep = r.do(t, "POST", msgPath, msgBody(`"stream":true,"max_tokens":2`))
	names, _ = sseEvents(t, rep.Body)
	if pings := strings.Count(strings.Join(names, " "), "ping"); pings < 3 || names[len(names)-1] != "message_stop" {
		t.Fatalf("%d pings with a slow model: %v", pings, names)
	}
	r.Model.SetLatency(0)

	r.Model.Fail(nil, fmt.Errorf("qnn: graphExecute: error 1011"))
	rep = r.do(t, "POST", msgPath, msgBody(`"stream":true,"max_tokens":5`))
	names, data = sseEvents(t, rep.Body)
	if rep.Status != 200 || names[len(names)-1] != "error" || !strings.Contains(data[len(data)-1], `"type":"api_error"`) ||
		strings.Contains(string(rep.Body), "1011") {
		t.Fatalf("failing stream: %v\n%s", names, rep.Body)
	}
	r.assertHealthy(t)
}

// TestMessagesOverloaded fills the queue and checks the refused request
// gets 529 overloaded_error with retry-after, and that no goroutine is left.
func TestMessagesOverloaded(t *testing.T) {
	r := newRig(t, rigOptions{engine: inference.Config{QueueLen: 1}, model: claudeAliases})
	r.Model.SetLatency(30 * time.Millisecond)
	base := runtime.NumGoroutine()
	var wg sync.WaitGroup
	reps := make(chan reply, 4)
	for range 4 {
		wg.Go(func() {
			reps <- r.do(t, "POST", msgPath, msgBody(`"max_tokens":3`))
		})
	}
	wg.Wait()
	close(reps)
	overloaded := 0
	for rep := range reps {
		switch rep.Status {
		case 200:
		case 529:
			overloaded++
			if typ, _ := anthropicError(t, rep); typ != "overloaded_error" || rep.Header.Get("Retry-After") == "" {
				t.Fatalf("529: %s %v", rep.Body, rep.Header)
			}
		default:
			t.Fatalf("status %d: %s", rep.Status, rep.Body)
		}
	}
	if overloaded == 0 {
		t.Fatal("no request was refused with a queue of 1 and 4 concurrent requests")
	}
	r.Model.SetLatency(0)
	http.DefaultClient.CloseIdleConnections()
	waitGoroutines(t, base, 5*time.Second)
	r.assertHealthy(t)
}

// TestModelAliasGlobs checks server.model_aliases on the OpenAI endpoints
// too: a name matching a glob whose target is served resolves; a glob
// naming another model does not.
func TestModelAliasGlobs(t *testing.T) {
	r := newRig(t, rigOptions{model: func(m *server.Model) {
		m.AliasGlobs = map[string]string{"claude-*": modelID, "o[0-9]*": "gpt-4o-mini", "gemini-*": "not-served"}
	}})
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/v1/chat/completions", `{"model":"claude-opus-5-5","max_tokens":2,"messages":[{"role":"user","content":"Hi"}]}`, 200},
		{"POST", "/v1/completions", `{"model":"o3-mini","max_tokens":2,"prompt":"Hi"}`, 200},
		{"GET", "/v1/models/claude-haiku-4-5", "", 200},
		{"POST", "/v1/chat/completions", `{"model":"gemini-2","max_tokens":2,"messages":[{"role":"user","content":"Hi"}]}`, 404},
		{"POST", msgPath, `{"model":"gemini-2","max_tokens":2,"messages":[{"role":"user","content":"Hi"}]}`, 404},
		{"GET", "/v1/models/claude", "", 404},
	} {
		if rep := r.do(t, c.method, c.path, c.body); rep.Status != c.status {
			t.Errorf("%s %s %s: %d %s, want %d", c.method, c.path, c.body, rep.Status, rep.Body, c.status)
		}
	}
}

// TestMessagesOwners: with API keys, KV rows computed for one key are reused
// (and reported as cache_read_input_tokens) for its next request and never
// for another key's.
func TestMessagesOwners(t *testing.T) {
	r := newRig(t, rigOptions{opts: server.Options{APIKeys: []string{"sk-a", "sk-b"}}, model: claudeAliases})
	body := msgsBody(`[{"role":"user","content":"` + strings.Repeat("The same long question. ", 40) + `"}]`)
	ask := func(key string) (read, input int) {
		rep := r.do(t, "POST", msgPath, body, "x-api-key", key)
		var m struct {
			Usage struct {
				Input int `json:"input_tokens"`
				Read  int `json:"cache_read_input_tokens"`
			}
		}
		if err := json.Unmarshal(rep.Body, &m); rep.Status != 200 || err != nil {
			t.Fatalf("%s: %d %s", key, rep.Status, rep.Body)
		}
		return m.Usage.Read, m.Usage.Input
	}
	if read, _ := ask("sk-a"); read != 0 {
		t.Fatalf("first request read %d cached tokens", read)
	}
	if read, input := ask("sk-a"); read == 0 || input == 0 {
		t.Fatalf("the same key's repeat: %d read, %d evaluated", read, input)
	}
	if read, _ := ask("sk-b"); read != 0 {
		t.Fatalf("another key's request read %d cached tokens", read)
	}
}

// TestMessagesStreamStartUsage: a streamed reply's message_start carries
// the prompt's split into input_tokens and cache_read_input_tokens (and
// cache_creation_input_tokens), as Anthropic's does and LangChain reads it;
// it agrees with message_delta's.
func TestMessagesStreamStartUsage(t *testing.T) {
	r := newRig(t, rigOptions{model: claudeAliases})
	body := msgsBody(`[{"role":"user","content":"`+strings.Repeat("The same long question. ", 40)+`"}]`, `"stream":true`)
	type usage struct {
		Input    *int `json:"input_tokens"`
		Read     *int `json:"cache_read_input_tokens"`
		Creation *int `json:"cache_creation_input_tokens"`
	}
	ask := func() (start, delta usage) {
		rep := r.do(t, "POST", msgPath, body)
		names, data := sseEvents(t, rep.Body)
		for i, name := range names {
			var ev struct {
				Message struct{ Usage usage }
				Usage   usage
			}
			if err := json.Unmarshal([]byte(data[i]), &ev); err != nil {
				t.Fatal(err)
			}
			switch name {
			case "message_start":
				start = ev.Message.Usage
			case "message_delta":
				delta = ev.Usage
			}
		}
		if rep.Status != 200 || start.Input == nil || start.Read == nil || start.Creation == nil || delta.Read == nil {
			t.Fatalf("%d %s", rep.Status, rep.Body)
		}
		return start, delta
	}
	first, _ := ask()
	start, delta := ask()
	if *start.Read == 0 || *start.Read != *delta.Read || *start.Input != *delta.Input || *start.Creation != 0 ||
		*start.Input+*start.Read != *first.Input+*first.Read {
		t.Fatalf("repeat: message_start %d input + %d read, message_delta %d + %d; first %d + %d",
			*start.Input, *start.Read, *delta.Input, *delta.Read, *first.Input, *first.Read)
	}
}
