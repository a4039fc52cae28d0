package server

import (
	"encoding/json"
	"strings"
	"testing"
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
