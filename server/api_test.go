package server

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestUnknownModelNamesServedIDs: a request naming a model this server does
// not serve is a 404 in the shape of its API that names every served id
// (the local model and the upstream one), in OpenAI's, Anthropic's and
// Ollama's routes alike.
func TestUnknownModelNamesServedIDs(t *testing.T) {
	s, _ := newTest(t, Options{Upstreams: []Upstream{{ID: "big", Relay: &fakeRelay{}}}})
	const ids = "llama-3.2-1b-instruct, big; server.model_aliases maps other names to them"
	for _, tc := range []struct {
		method, path, body string
		shape              string // "openai", "anthropic" or "ollama"
		want               string // the message
	}{
		{"POST", "/v1/chat/completions", `{"model":"gpt-5","messages":[{"role":"user","content":"hi"}]}`, "openai",
			"The model `gpt-5` does not exist or you do not have access to it. This server serves " + ids + "."},
		{"POST", "/v1/completions", `{"model":"gpt-5","prompt":"hi"}`, "openai", "This server serves " + ids},
		{"POST", "/v1/responses", `{"model":"gpt-5","input":"hi"}`, "openai", "This server serves " + ids},
		{"GET", "/v1/models/gpt-5", ``, "openai", "This server serves " + ids},
		{"POST", "/tokenize", `{"model":"gpt-5","content":"hi"}`, "openai", "This server serves " + ids},
		{"POST", "/v1/messages", `{"model":"gpt-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "anthropic",
			"model: gpt-5 (this server serves " + ids + ")"},
		{"POST", "/v1/messages/count_tokens", `{"model":"gpt-5","messages":[{"role":"user","content":"hi"}]}`, "anthropic",
			"model: gpt-5 (this server serves " + ids + ")"},
		{"POST", "/api/chat", `{"model":"gpt-5","messages":[{"role":"user","content":"hi"}]}`, "ollama",
			`model "gpt-5" not found; this server serves ` + ids},
		{"POST", "/api/generate", `{"model":"gpt-5","prompt":"hi"}`, "ollama", `model "gpt-5" not found; this server serves ` + ids},
		{"POST", "/api/show", `{"model":"gpt-5"}`, "ollama", `model "gpt-5" not found; this server serves ` + ids},
	} {
		t.Run(tc.path, func(t *testing.T) {
			rec := do(s, tc.method, tc.path, tc.body)
			if rec.Code != 404 {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			if msg := errorMessage(t, tc.shape, rec.Body.Bytes()); !strings.Contains(msg, tc.want) {
				t.Errorf("message %q, want it to say %q", msg, tc.want)
			}
		})
	}
}

// errorMessage is the message of an error body of the given API's shape,
// failing t when the body has another shape.
func errorMessage(t *testing.T, shape string, body []byte) string {
	t.Helper()
	var v struct {
		Type  string          `json:"type"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("not JSON: %s", body)
	}
	var msg string
	switch shape {
	case "ollama": // {"error": "…"}
		if json.Unmarshal(v.Error, &msg) != nil {
			t.Fatalf("not Ollama's shape: %s", body)
		}
	case "anthropic": // {"type": "error", "error": {"type", "message"}}
		var e struct{ Type, Message string }
		if v.Type != "error" || json.Unmarshal(v.Error, &e) != nil || e.Type == "" {
			t.Fatalf("not Anthropic's shape: %s", body)
		}
		msg = e.Message
	default: // {"error": {"message", "type", "param", "code"}}
		var e errorFields
		if v.Type != "" || json.Unmarshal(v.Error, &e) != nil || e.Type == "" {
			t.Fatalf("not OpenAI's shape: %s", body)
		}
		msg = e.Message
	}
	return msg
}

// TestAPIDecidedAtRouting: what the router decides per API: unknown paths
// and methods under an API's prefix, a missing key, an oversized body and
// a missing model are answered in that API's shape.
func TestAPIDecidedAtRouting(t *testing.T) {
	s, _ := newTest(t, Options{BodyLimit: 64})
	keyed, _ := newTest(t, Options{APIKeys: []string{"k"}})
	big := `{"model":"x","pad":"` + strings.Repeat("a", 100) + `"}`
	for _, tc := range []struct {
		name               string
		srv                *Server
		method, path, body string
		status             int
		shape              string
	}{
		{"unknown path", s, "GET", "/v1/nope", "", 404, "openai"},
		{"unknown Ollama path", s, "GET", "/api/nope", "", 404, "ollama"},
		{"unknown Anthropic path", s, "POST", "/v1/messages/nope", "", 404, "anthropic"},
		{"Ollama method", s, "GET", "/api/chat", "", 405, "ollama"},
		{"Anthropic method", s, "GET", "/v1/messages", "", 405, "anthropic"},
		{"OpenAI method", s, "GET", "/v1/chat/completions", "", 405, "openai"},
		{"no key", keyed, "POST", "/v1/chat/completions", "{}", 401, "openai"},
		{"no key Ollama", keyed, "POST", "/api/chat", "{}", 401, "ollama"},
		{"no key Anthropic", keyed, "POST", "/v1/messages", "{}", 401, "anthropic"},
		{"no key unknown path", keyed, "GET", "/nope", "", 401, "openai"},
		{"too large", s, "POST", "/v1/completions", big, 413, "openai"},
		{"too large Ollama", s, "POST", "/api/generate", big, 413, "ollama"},
		{"too large Anthropic", s, "POST", "/v1/messages", big, 413, "anthropic"},
		{"no model", s, "POST", "/v1/completions", `{"prompt":"hi"}`, 400, "openai"},
		{"no model Ollama", s, "POST", "/api/generate", `{"prompt":"hi"}`, 400, "ollama"},
		{"no model Anthropic", s, "POST", "/v1/messages", `{"max_tokens":1}`, 400, "anthropic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(tc.srv, tc.method, tc.path, tc.body)
			if rec.Code != tc.status {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			errorMessage(t, tc.shape, rec.Body.Bytes())
		})
	}
	if rec := do(keyed, "GET", "/health", ""); rec.Code == 401 {
		t.Errorf("/health needs a key: %d", rec.Code)
	}
}

// TestModelsAnthropicShape: GET /v1/models and /v1/models/{id} answer
// Anthropic's clients (the anthropic-version header) with Anthropic's
// objects and paging, and errors in Anthropic's shape; OpenAI's otherwise.
func TestModelsAnthropicShape(t *testing.T) {
	s, _ := newTest(t, Options{Upstreams: []Upstream{{ID: "big", Relay: &fakeRelay{}}}})
	const local = "llama-3.2-1b-instruct"
	type page struct {
		Data []struct {
			Type        string `json:"type"`
			ID          string `json:"id"`
			DisplayName string `json:"display_name"`
			CreatedAt   string `json:"created_at"`
		} `json:"data"`
		HasMore bool    `json:"has_more"`
		First   *string `json:"first_id"`
		Last    *string `json:"last_id"`
	}
	for _, tc := range []struct {
		query   string
		ids     []string
		hasMore bool
	}{
		{"", []string{local, "big"}, false},
		{"?limit=1", []string{local}, true},
		{"?limit=1&after_id=" + local, []string{"big"}, false},
		{"?after_id=big", nil, false},
		{"?before_id=big", []string{local}, false},
		{"?limit=1&before_id=big", []string{local}, false},
	} {
		rec := do(s, "GET", "/v1/models"+tc.query, "", "anthropic-version", "2023-06-01")
		var p page
		if err := json.Unmarshal(rec.Body.Bytes(), &p); rec.Code != 200 || err != nil {
			t.Fatalf("%s: %d %s", tc.query, rec.Code, rec.Body)
		}
		var ids []string
		for _, m := range p.Data {
			if _, err := time.Parse(time.RFC3339, m.CreatedAt); m.Type != "model" || m.DisplayName != m.ID || err != nil {
				t.Errorf("%s: object %+v", tc.query, m)
			}
			ids = append(ids, m.ID)
		}
		if strings.Join(ids, ",") != strings.Join(tc.ids, ",") || p.HasMore != tc.hasMore {
			t.Errorf("%s: ids %v has_more %v, want %v %v", tc.query, ids, p.HasMore, tc.ids, tc.hasMore)
		}
		if len(ids) > 0 && (p.First == nil || *p.First != ids[0] || p.Last == nil || *p.Last != ids[len(ids)-1]) {
			t.Errorf("%s: first_id/last_id %s", tc.query, rec.Body)
		}
		if strings.Contains(rec.Body.String(), `"object"`) {
			t.Errorf("%s: an OpenAI field in %s", tc.query, rec.Body)
		}
	}
	for _, tc := range []struct {
		path   string
		status int
		want   string // the object's id, or the error message
	}{
		{"/v1/models/" + local, 200, local},
		{"/v1/models/big", 200, "big"},
		{"/v1/models/claude-x", 404, "model: claude-x"},
		{"/v1/models?limit=0", 400, "limit"},
		{"/v1/models?after_id=nope", 400, "after_id"},
	} {
		rec := do(s, "GET", tc.path, "", "anthropic-version", "2023-06-01")
		if rec.Code != tc.status {
			t.Fatalf("%s: %d %s", tc.path, rec.Code, rec.Body)
		}
		if tc.status != 200 {
			if msg := errorMessage(t, "anthropic", rec.Body.Bytes()); !strings.Contains(msg, tc.want) {
				t.Errorf("%s: message %q, want it to say %q", tc.path, msg, tc.want)
			}
			continue
		}
		var m map[string]any
		json.Unmarshal(rec.Body.Bytes(), &m)
		if m["type"] != "model" || m["id"] != tc.want || m["display_name"] != tc.want {
			t.Errorf("%s: %s", tc.path, rec.Body)
		}
	}
	// Without the header: OpenAI's list.
	rec := do(s, "GET", "/v1/models", "")
	var list struct {
		Object string
		Data   []map[string]any
	}
	if json.Unmarshal(rec.Body.Bytes(), &list); list.Object != "list" || len(list.Data) != 2 || list.Data[0]["object"] != "model" {
		t.Errorf("OpenAI list: %s", rec.Body)
	}
}

// TestTypeErrorMessages: a value of the wrong JSON type is a 400 naming it
// by its path with array indices and saying, in JSON's words, what was
// expected and what came (never a Go type), on each API.
func TestTypeErrorMessages(t *testing.T) {
	s, _ := newTest(t, Options{})
	const m = `"model":"llama-3.2-1b-instruct"`
	for _, tc := range []struct {
		path, body, shape, want string
	}{
		{"/v1/chat/completions", `{` + m + `,"messages":[{"role":"user","content":"a"},{"role":"user","content":5}]}`, "openai",
			"Invalid type for 'messages[1].content': expected a string, an array or null, but got a number instead."},
		{"/v1/chat/completions", `{` + m + `,"messages":[{"role":"user","content":{"a":1}}]}`, "openai",
			"Invalid type for 'messages[0].content': expected a string, an array or null, but got an object instead."},
		{"/v1/chat/completions", `{` + m + `,"messages":"hi"}`, "openai",
			"Invalid type for 'messages': expected an array, but got a string instead."},
		{"/v1/chat/completions", `{` + m + `,"messages":[{"role":5,"content":"a"}]}`, "openai",
			"Invalid type for 'messages[0].role': expected a string, but got a number instead."},
		{"/v1/completions", `{` + m + `,"prompt":"a","max_tokens":1.5}`, "openai",
			"Invalid type for 'max_tokens': expected an integer, but got the number 1.5 instead."},
		{"/v1/chat/completions", `[1]`, "openai",
			"Invalid type for the request body: expected an object, but got an array instead."},
		{"/v1/responses", `{` + m + `,"input":[{"role":"user","content":"a"},{"role":"user","content":true}]}`, "openai",
			"Invalid type for 'input[1].content'"},
		{"/v1/messages", `{` + m + `,"max_tokens":5,"messages":[{"role":"user","content":5}]}`, "anthropic",
			"Invalid type for 'messages[0].content': expected a string or an array of content blocks, but got a number instead."},
		{"/v1/messages", `{` + m + `,"max_tokens":5,"messages":[{"role":"user","content":"a"}],"tool_choice":5}`, "anthropic",
			"Invalid type for 'tool_choice': expected an object, but got a number instead."},
	} {
		rec := do(s, "POST", tc.path, tc.body)
		if rec.Code != 400 {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, rec.Code, rec.Body)
			continue
		}
		msg := errorMessage(t, tc.shape, rec.Body.Bytes())
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%s %s:\n message %q\n want    %q", tc.path, tc.body, msg, tc.want)
		}
		for _, goName := range []string{"openai.", "anthropic.", "[]", "int", "Go value"} {
			if strings.Contains(strings.ReplaceAll(msg, "integer", ""), goName) && !strings.Contains(tc.want, goName) {
				t.Errorf("%s %s: message %q names a Go type", tc.path, tc.body, msg)
			}
		}
	}
}
