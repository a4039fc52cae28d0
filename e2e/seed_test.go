package e2e

import (
	"encoding/json"
	"testing"
)

// TestSeedColdWarm checks that a seeded request's text is a function of the
// request alone, not of the prefix cache: on 16-bit bundles (f16 and int8
// weights) each prompt gives the same text as the first request after start
// (cold) and repeated or after other prompts (warm, the prompt's rows
// reused). The prompts fit one prefill window.
func TestSeedColdWarm(t *testing.T) {
	libs := hostsimLibs(t)
	prompts := []string{
		"Tell me a story about a lighthouse keeper.",
		"What is the capital of France? Answer in one word, then explain.",
		"Tell me a story about a lighthouse.", // shares a prefix with the first
	}
	for _, weights := range []string{"f16", "int8"} {
		t.Run(weights, func(t *testing.T) {
			dir := mkmodelOnce(t, "--preset", "tiny", "--weights", weights, "--io", "f16", "--kv", "f16")
			cfg := config{Bundle: dir}.write(t, libs)
			texts := map[string][]string{}
			// Each server answers one prompt first (cold), then every
			// prompt twice (warm); the next server starts with the next prompt.
			for first := range prompts {
				s := serve(t, cfg, true)
				order := []string{prompts[first]}
				for _, p := range prompts {
					order = append(order, p, p)
				}
				for _, p := range order {
					texts[p] = append(texts[p], seeded(t, s, p))
				}
				if err := s.stop(); err != nil {
					t.Fatal(err)
				}
			}
			for p, ts := range texts {
				for i, txt := range ts {
					if txt != ts[0] {
						t.Errorf("%q: answer %d differs from the first (cold) one:\n%q\n%q", p, i, txt, ts[0])
						break
					}
				}
			}
		})
	}
}

// seeded runs one sampled, seeded chat completion and returns its text.
func seeded(t *testing.T, s *hexserve, prompt string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "tinyllama-public", "seed": 1234, "temperature": 1.5, "top_p": 1,
		"max_tokens": 24, "messages": []map[string]string{{"role": "user", "content": prompt}}})
	rep := s.post(t, "/v1/chat/completions", string(body))
	var r struct {
		Choices []struct{ Message struct{ Content string } }
	}
	if rep.Status != 200 || json.Unmarshal([]byte(rep.Body), &r) != nil || len(r.Choices) != 1 {
		t.Fatalf("%d %s", rep.Status, rep.Body)
	}
	return r.Choices[0].Message.Content
}
