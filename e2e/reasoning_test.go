package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// The scripted reply of the reasoning tests: Qwen3's form, its markers
// spelled out in the Llama tokenizer's pieces.
const (
	thought      = "I add two and two."
	thoughtReply = "It is 4."
)

// startReasoning serves the tiny model with model.reasoning_parser qwen3
// and a script whose every reply is reply.
func startReasoning(t *testing.T, reply string) *hexserve {
	t.Helper()
	libs := hostsimLibs(t)
	cfg := config{Bundle: bundle(t), Server: fmt.Sprintf("  api_keys: [%q]", apiKey),
		Model: "  reasoning_parser: qwen3"}.write(t, libs)
	s := serve(t, cfg, true, "HOSTSIM_SCRIPT="+scriptFile(t, reply))
	var models struct{ Data []struct{ ID string } }
	if err := json.Unmarshal([]byte(s.call(t, "GET", "/v1/models", "").Body), &models); err != nil || len(models.Data) != 1 {
		t.Fatalf("models: %v %+v", err, models)
	}
	s.Model = models.Data[0].ID
	return s
}

// call sends body with the test key in OpenAI's and Anthropic's headers.
func (s *hexserve) call(t *testing.T, method, path, body string) reply {
	t.Helper()
	return s.do(t, method, path, body, "Content-Type", "application/json", "Authorization", "Bearer "+apiKey, "x-api-key", apiKey)
}

// dataLines are the JSON objects of an SSE body's data lines (or of an
// NDJSON body's lines), [DONE] left out; a data line that is not JSON fails t.
func dataLines(t *testing.T, body string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(body, "\n") {
		l, data := strings.CutPrefix(l, "data: ")
		if l == "[DONE]" || !data && !strings.HasPrefix(l, "{") {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// at reads a path of keys and indexes from v ("" when it is absent).
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func str(v any) string { s, _ := v.(string); return s }

// TestReasoningAPIs: with a reasoning parser, <think>…</think> comes back
// apart from the answer in every API, whole and streamed, and is counted.
func TestReasoningAPIs(t *testing.T) {
	binary(t)
	s := startReasoning(t, "<think>\n"+thought+"\n</think>\n\n"+thoughtReply)
	user := `[{"role":"user","content":"What is 2+2?"}]`
	check := func(name, reasoning, answer string) {
		t.Helper()
		if reasoning != thought || answer != thoughtReply {
			t.Errorf("%s: reasoning %q, answer %q; want %q, %q\n%s", name, reasoning, answer, thought, thoughtReply, s.log)
		}
	}

	t.Run("chat", func(t *testing.T) {
		r := s.call(t, "POST", "/v1/chat/completions", `{"model":"`+s.Model+`","messages":`+user+`}`)
		var v map[string]any
		_ = json.Unmarshal([]byte(r.Body), &v)
		msg := at(v, "choices", 0, "message")
		check("chat", str(at(msg, "reasoning_content")), str(at(msg, "content")))
		if n, _ := at(v, "usage", "completion_tokens_details", "reasoning_tokens").(float64); n < 5 {
			t.Errorf("reasoning_tokens %v: %s", n, r.Body)
		}
		r = s.call(t, "POST", "/v1/chat/completions", `{"model":"`+s.Model+`","stream":true,"stream_options":{"include_usage":true},"messages":`+user+`}`)
		var reasoning, content strings.Builder
		tokens := 0.0
		for _, f := range dataLines(t, r.Body) {
			reasoning.WriteString(str(at(f, "choices", 0, "delta", "reasoning_content")))
			content.WriteString(str(at(f, "choices", 0, "delta", "content")))
			if n, ok := at(f, "usage", "completion_tokens_details", "reasoning_tokens").(float64); ok {
				tokens = n
			}
		}
		check("chat stream", reasoning.String(), content.String())
		if tokens < 5 {
			t.Errorf("streamed reasoning_tokens %v", tokens)
		}
	})

	t.Run("chat SDK", func(t *testing.T) {
		c := s.client()
		resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: s.Model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 2+2?")}})
		if err != nil {
			t.Fatal(err)
		}
		var rc string
		_ = json.Unmarshal([]byte(resp.Choices[0].Message.JSON.ExtraFields["reasoning_content"].Raw()), &rc)
		check("chat SDK", rc, resp.Choices[0].Message.Content)
		if resp.Usage.CompletionTokensDetails.ReasoningTokens < 5 {
			t.Errorf("reasoning tokens %d", resp.Usage.CompletionTokensDetails.ReasoningTokens)
		}
	})

	t.Run("responses", func(t *testing.T) {
		r := s.call(t, "POST", "/v1/responses", `{"model":"`+s.Model+`","input":"What is 2+2?"}`)
		var v map[string]any
		_ = json.Unmarshal([]byte(r.Body), &v)
		if at(v, "output", 0, "type") != "reasoning" {
			t.Fatalf("output %s", r.Body)
		}
		check("responses", str(at(v, "output", 0, "content", 0, "text")), str(at(v, "output_text")))
		if n, _ := at(v, "usage", "output_tokens_details", "reasoning_tokens").(float64); n < 5 {
			t.Errorf("reasoning_tokens %v", n)
		}
		// The reasoning item goes back as input.
		in, _ := json.Marshal(at(v, "output"))
		r2 := s.call(t, "POST", "/v1/responses", `{"model":"`+s.Model+`","input":[{"role":"user","content":"What is 2+2?"},`+string(in[1:len(in)-1])+`,{"role":"user","content":"And 3+3?"}]}`)
		if r2.Status != 200 {
			t.Errorf("reasoning item as input: %d %s", r2.Status, r2.Body)
		}

		r = s.call(t, "POST", "/v1/responses", `{"model":"`+s.Model+`","stream":true,"input":"What is 2+2?"}`)
		var reasoning, text strings.Builder
		var done string
		for _, e := range dataLines(t, r.Body) {
			switch at(e, "type") {
			case "response.reasoning_text.delta":
				reasoning.WriteString(str(at(e, "delta")))
			case "response.reasoning_text.done":
				done = str(at(e, "text"))
			case "response.output_text.delta":
				text.WriteString(str(at(e, "delta")))
			}
		}
		check("responses stream", reasoning.String(), text.String())
		if done != thought {
			t.Errorf("reasoning_text.done %q", done)
		}
	})

	t.Run("anthropic", func(t *testing.T) {
		body := `{"model":"` + s.Model + `","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},"messages":` + user + `}`
		r := s.call(t, "POST", "/v1/messages", body)
		var v map[string]any
		_ = json.Unmarshal([]byte(r.Body), &v)
		if at(v, "content", 0, "type") != "thinking" || str(at(v, "content", 0, "signature")) == "" {
			t.Fatalf("content %s", r.Body)
		}
		check("anthropic", str(at(v, "content", 0, "thinking")), str(at(v, "content", 1, "text")))
		// The signed block goes back and is accepted.
		turn, _ := json.Marshal(at(v, "content"))
		r2 := s.call(t, "POST", "/v1/messages", `{"model":"`+s.Model+`","max_tokens":64,"messages":[{"role":"user","content":"What is 2+2?"},{"role":"assistant","content":`+string(turn)+`},{"role":"user","content":"And 3+3?"}]}`)
		if r2.Status != 200 {
			t.Errorf("thinking block sent back: %d %s", r2.Status, r2.Body)
		}
		r3 := s.call(t, "POST", "/v1/messages", `{"model":"`+s.Model+`","max_tokens":1024,"thinking":{"type":"enabled","budget_tokens":1024},"messages":`+user+`}`)
		if r3.Status != 400 || !strings.Contains(r3.Body, `"type":"invalid_request_error"`) || !strings.Contains(r3.Body, "budget_tokens") {
			t.Errorf("budget_tokens = max_tokens: %d %s", r3.Status, r3.Body)
		}

		r = s.call(t, "POST", "/v1/messages", strings.Replace(body, `"max_tokens"`, `"stream":true,"max_tokens"`, 1))
		var thinking, text strings.Builder
		sig := ""
		for _, e := range dataLines(t, r.Body) {
			switch at(e, "delta", "type") {
			case "thinking_delta":
				thinking.WriteString(str(at(e, "delta", "thinking")))
			case "signature_delta":
				sig = str(at(e, "delta", "signature"))
			case "text_delta":
				text.WriteString(str(at(e, "delta", "text")))
			}
		}
		check("anthropic stream", thinking.String(), text.String())
		if sig != str(at(v, "content", 0, "signature")) {
			t.Errorf("streamed signature %q, whole %q", sig, at(v, "content", 0, "signature"))
		}
	})

	t.Run("ollama", func(t *testing.T) {
		for _, tc := range []struct{ path, body, thinking, content string }{
			{"/api/chat", `{"model":"` + s.Model + `","think":true,"messages":` + user + `}`, "message.thinking", "message.content"},
			{"/api/generate", `{"model":"` + s.Model + `","think":true,"prompt":"What is 2+2?"}`, "thinking", "response"},
		} {
			get := func(m map[string]any, path string) string {
				var p []any
				for _, k := range strings.Split(path, ".") {
					p = append(p, k)
				}
				return str(at(m, p...))
			}
			r := s.call(t, "POST", tc.path, strings.Replace(tc.body, `"think"`, `"stream":false,"think"`, 1))
			var v map[string]any
			_ = json.Unmarshal([]byte(r.Body), &v)
			check(tc.path, get(v, tc.thinking), get(v, tc.content))
			r = s.call(t, "POST", tc.path, tc.body)
			var thinking, content strings.Builder
			for _, l := range dataLines(t, r.Body) {
				thinking.WriteString(get(l, tc.thinking))
				content.WriteString(get(l, tc.content))
			}
			check(tc.path+" stream", thinking.String(), content.String())
		}
	})
}

// TestReasoningStructured: with response_format the reasoning is free text
// and only the answer follows the grammar. The Llama template leaves the
// opening to the model, so the server opens <think> in the prompt; the
// script then writes the reasoning, </think> and a JSON object, which a
// grammar applied from the first token would have refused.
func TestReasoningStructured(t *testing.T) {
	binary(t)
	s := startReasoning(t, thought+"\n</think>\n\n"+`{"sum": 4}`)
	r := s.call(t, "POST", "/v1/chat/completions", `{"model":"`+s.Model+`","max_tokens":64,"response_format":{"type":"json_object"},"messages":[{"role":"user","content":"What is 2+2?"}]}`)
	var v map[string]any
	_ = json.Unmarshal([]byte(r.Body), &v)
	msg := at(v, "choices", 0, "message")
	if r.Status != 200 || str(at(msg, "reasoning_content")) != thought || str(at(msg, "content")) != `{"sum": 4}` {
		t.Fatalf("%d %s\n%s", r.Status, r.Body, s.log)
	}
}
