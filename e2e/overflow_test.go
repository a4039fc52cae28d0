package e2e

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

const (
	overflowSystem = "You are a terse assistant for the overflow test."
	overflowTools  = `[{"type":"function","function":{"name":"get_weather","description":"Weather in a city",` +
		`"parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
)

// TestOverflowConversation holds a 30-turn conversation, about 5× the
// window, on the tiny QHexRT bundle, a Genie bundle and a .pte of 512 tokens
// each, through /api/chat (Ollama's default truncate) and
// /v1/chat/completions (context_overflow truncate_middle; on the bundle also
// rolling): every turn is answered, the prompt /apply-template shows for it
// under the same policy starts with the system prompt and the tools and ends
// with the last user turn, the reply carries X-Hexserve-Context-Truncated once
// the history no longer fits, usage counts that prompt, and the kept
// system-and-tools prefix is reused from the KV cache (cached_tokens). On
// each model, a chat completion cut by the window has usage.total_tokens equal
// to max_model_len, one cut by max_tokens not (windowUsage).
func TestOverflowConversation(t *testing.T) {
	if testing.Short() {
		t.Skip("30 turns on each of three 512-token models")
	}
	type api struct{ name, path, policy string }
	middle := api{"openai-middle", "/v1/chat/completions", "truncate_middle"}
	ollama := api{"ollama", "/api/chat", "rolling"}
	for _, m := range []struct {
		name  string
		serve func(t *testing.T) *hexserve
		apis  []api
	}{
		{"bundle", serveTiny, []api{{"openai-rolling", "/v1/chat/completions", "rolling"}, middle, ollama}}, // rolling first: no other run's rows to reuse
		// AR 32 and 16 (the .pte's flags are other tests', so it is built once): a prompt near the
		// window stays within the CL − AR past slots of the prefill graph (with AR 128, a tail past
		// 384 tokens is read one token per call: 2–7× slower here).
		{"genie", func(t *testing.T) *hexserve {
			return serveGenie(t, mkgenie(t, "--ctx", "512", "--prefill-chunk", "32"))
		}, []api{middle, ollama}},
		{"pte", func(t *testing.T) *hexserve {
			return servePTE(t, mkpte(t, "--kv", "f32", "--logits", "f32", "--ctx", "512", "--prefill-chunk", "16"))
		}, []api{middle, ollama}},
	} {
		t.Run(m.name, func(t *testing.T) {
			s := m.serve(t)
			window := s.overflowModel(t)
			prefix := s.overflowPrefix(t)
			rep := s.post(t, "/tokenize", `{"content":`+strconv.Quote(prefix)+`}`)
			var pt struct{ Count int }
			if json.Unmarshal([]byte(rep.Body), &pt) != nil || pt.Count < 100 {
				t.Fatalf("tokenize: %s", rep.Body)
			}
			for _, a := range m.apis {
				t.Run(a.name, func(t *testing.T) { s.overflowConversation(t, a.path, a.policy, prefix, pt.Count, window) })
			}
			t.Run("window-usage", func(t *testing.T) { s.windowUsage(t, window) })
		})
	}
}

// serveTiny serves the tiny QHexRT bundle.
func serveTiny(t *testing.T) *hexserve {
	return serve(t, config{Bundle: bundle(t)}.write(t, hostsimLibs(t)), true)
}

// overflowModel sets s.Model to the served model's id and returns its window
// (max_model_len).
func (s *hexserve) overflowModel(t *testing.T) int {
	t.Helper()
	var models struct {
		Data []struct {
			ID     string
			Window int `json:"max_model_len"`
		}
	}
	if rep := s.do(t, "GET", "/v1/models", ""); json.Unmarshal([]byte(rep.Body), &models) != nil || len(models.Data) == 0 || models.Data[0].Window == 0 {
		t.Fatalf("models: %s", rep.Body)
	}
	s.Model = models.Data[0].ID
	return models.Data[0].Window
}

// overflowConversation holds the 30 turns through path under policy and
// checks each (see TestOverflowConversation); prefixTokens is the length of
// prefix, the system prompt and tools.
func (s *hexserve) overflowConversation(t *testing.T, path, policy, prefix string, prefixTokens, window int) {
	history := []map[string]any{{"role": "system", "content": overflowSystem}}
	truncated, lastRead, lastCached := 0, 0, 0
	for turn := range 30 {
		user := fmt.Sprintf("Turn %d: tell me about topic %d. %s", turn, turn, strings.Repeat("Some more words here. ", 8))
		history = append(history, map[string]any{"role": "user", "content": user})
		prompt, tokens := s.applied(t, history, policy)
		if !strings.HasPrefix(prompt, prefix) || !strings.HasSuffix(prompt, strings.TrimSpace(user)+"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n") {
			t.Fatalf("turn %d: the fitted prompt\n%q\ndoes not start with the system prompt and tools\n%q\nor end with the last user turn", turn, prompt, prefix)
		}
		reply, read, cached, rep := s.overflowTurn(t, path, policy, history)
		lastRead, lastCached = read, cached
		if n := rep.Header.Get("X-Hexserve-Context-Truncated"); n != "" {
			truncated++
			if cached >= 0 && cached < prefixTokens-2 { // the last tokens may merge with what follows
				t.Errorf("turn %d: %d cached tokens; the %d of the system prompt and tools should be reused", turn, cached, prefixTokens)
			}
		}
		if read != tokens {
			t.Errorf("turn %d: %d prompt tokens read, /apply-template's prompt has %d", turn, read, tokens)
		}
		history = append(history, map[string]any{"role": "assistant", "content": reply})
	}
	_, full := s.applied(t, history, "error")
	t.Logf("%d tokens of conversation after 30 turns (window %d), %d turns truncated, last turn's prompt %d tokens (%d cached)", full, window, truncated, lastRead, lastCached)
	if full < 3*window || truncated < 20 {
		t.Fatalf("the conversation has %d tokens, %d turns truncated: want ≥ 3 windows of %d, mostly truncated", full, truncated, window)
	}
}

// windowUsage checks the signal that tells a reply cut by the window from one
// cut by max_tokens on the OpenAI APIs, whose finish_reason is "length" for
// both (docs/api.md): usage.total_tokens equals the window only for the former.
func (s *hexserve) windowUsage(t *testing.T, window int) {
	prompt := strconv.Quote(strings.Repeat("word ", window-64)) // about 30 tokens of room
	for _, c := range []struct {
		maxTokens string
		atWindow  bool
	}{{"", true}, {`,"max_tokens":4`, false}} {
		rep := s.post(t, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%s}],"temperature":0%s}`, s.Model, prompt, c.maxTokens))
		var out struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			}
			Usage struct {
				Total int `json:"total_tokens"`
			}
		}
		if rep.Status != 200 || json.Unmarshal([]byte(rep.Body), &out) != nil || len(out.Choices) != 1 {
			t.Fatalf("chat completions: %d %s", rep.Status, rep.Body)
		}
		if f := out.Choices[0].FinishReason; f != "length" || (out.Usage.Total == window) != c.atWindow {
			t.Errorf("max_tokens %q: finish_reason %q, total_tokens %d; want length, at the window %d: %v", c.maxTokens, f, out.Usage.Total, window, c.atWindow)
		}
	}
}

// overflowPrefix is the prompt text every fitted prompt starts with: the
// system block and the tools, up to the first user message's content.
func (s *hexserve) overflowPrefix(t *testing.T) string {
	t.Helper()
	p, _ := s.applied(t, []map[string]any{{"role": "system", "content": overflowSystem}, {"role": "user", "content": "Z"}}, "error")
	i := strings.LastIndex(p, "Z")
	if i < 0 || !strings.Contains(p[:i], overflowSystem) || !strings.Contains(p[:i], "get_weather") {
		t.Fatalf("prompt %q", p)
	}
	return p[:i]
}

// applied is /apply-template's prompt of msgs under policy with room for a
// 16-token reply, and its token count.
func (s *hexserve) applied(t *testing.T, msgs []map[string]any, policy string) (string, int) {
	t.Helper()
	b, _ := json.Marshal(msgs)
	rep := s.post(t, "/apply-template", fmt.Sprintf(`{"messages":%s,"tools":%s,"max_tokens":16,"context_overflow":%q}`, b, overflowTools, policy))
	var out struct{ Prompt string }
	if rep.Status != 200 || json.Unmarshal([]byte(rep.Body), &out) != nil {
		t.Fatalf("apply-template: %d %s", rep.Status, rep.Body)
	}
	rep = s.post(t, "/tokenize", `{"content":`+strconv.Quote(out.Prompt)+`}`)
	var tok struct{ Count int }
	if rep.Status != 200 || json.Unmarshal([]byte(rep.Body), &tok) != nil {
		t.Fatalf("tokenize: %d %s", rep.Status, rep.Body)
	}
	return out.Prompt, tok.Count
}

// overflowTurn sends history to path (Ollama's /api/chat with its default
// truncate, or chat completions with policy) and returns the reply
// text, the prompt tokens read and cached, and the raw reply.
func (s *hexserve) overflowTurn(t *testing.T, path, policy string, history []map[string]any) (string, int, int, reply) {
	t.Helper()
	b, _ := json.Marshal(history)
	var body string
	if path == "/api/chat" {
		body = fmt.Sprintf(`{"model":%q,"stream":false,"messages":%s,"tools":%s,"options":{"temperature":0,"num_predict":16}}`, s.Model, b, overflowTools)
	} else {
		body = fmt.Sprintf(`{"model":%q,"messages":%s,"tools":%s,"temperature":0,"max_tokens":16,"context_overflow":%q}`, s.Model, b, overflowTools, policy)
	}
	rep := s.post(t, path, body)
	if rep.Status != 200 {
		t.Fatalf("%s: %d %s", path, rep.Status, rep.Body)
	}
	var out struct {
		Message struct{ Content string } `json:"message"`
		Done    bool                     `json:"done"`
		Read    int                      `json:"prompt_eval_count"`
		Choices []struct {
			Message      struct{ Content string } `json:"message"`
			FinishReason string                   `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			Details      struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(rep.Body), &out); err != nil {
		t.Fatalf("%s: %v: %s", path, err, rep.Body)
	}
	if path == "/api/chat" {
		if !out.Done {
			t.Fatalf("not done: %s", rep.Body)
		}
		// Ollama reports no cached count; the prefix reuse is checked on
		// chat completions.
		return out.Message.Content, out.Read, -1, rep
	}
	if len(out.Choices) != 1 || out.Choices[0].FinishReason == "" {
		t.Fatalf("unanswered: %s", rep.Body)
	}
	return out.Choices[0].Message.Content, out.Usage.PromptTokens, out.Usage.Details.Cached, rep
}
