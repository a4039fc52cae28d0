package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// seedPrompts fit one prefill window of the bundles; the third shares a
// prefix with the first.
var seedPrompts = []string{
	"Tell me a story about a lighthouse keeper.",
	"What is the capital of France? Answer in one word, then explain.",
	"Tell me a story about a lighthouse.",
}

// TestSeedColdWarm checks that a seeded request's text is a function of the
// request alone, not of the prefix cache: on 16-bit bundles (f16 and int8
// weights) each prompt gives the same text as the first request after start
// (cold) and repeated or after other prompts (warm, the prompt's rows
// reused). The prompts fit one prefill window.
func TestSeedColdWarm(t *testing.T) {
	libs := hostsimLibs(t)
	for _, weights := range []string{"f16", "int8"} {
		t.Run(weights, func(t *testing.T) {
			dir := mkmodelOnce(t, "--preset", "tiny", "--weights", weights, "--io", "f16", "--kv", "f16")
			seedColdWarm(t, config{Bundle: dir}.write(t, libs), "tinyllama-public", false)
		})
	}
}

// TestSeedColdWarmPTE is TestSeedColdWarm on a tiny .pte of each cache
// precision (uint8 KV with uint16 logits, mkmodel's default; uint16 KV;
// float32) with a 16-row prefill window, so the prompts span several chunks
// and a warm prompt's reused rows end inside the window the cold one ran;
// every warm request also runs beside two other streams.
func TestSeedColdWarmPTE(t *testing.T) {
	for _, v := range []struct{ name, kv, logits string }{{"u8", "u8", "u16"}, {"u16", "u16", "u16"}, {"f32", "f32", "f32"}} {
		t.Run(v.name, func(t *testing.T) {
			model := mkpte(t, "--kv", v.kv, "--logits", v.logits, "--ctx", "512", "--prefill-chunk", "16")
			cfg := config{Model: fmt.Sprintf("  path: %q\n  aliases: [x]", model)}.write(t, hostsimLibs(t))
			seedColdWarm(t, cfg, "x", true)
		})
	}
}

// seedColdWarm starts a server of cfg (serving model) once per prompt: it
// answers that prompt first (cold), then every prompt twice (warm; with
// load, beside two other streams); each prompt's answers must be the same
// text.
func seedColdWarm(t *testing.T, cfg, model string, load bool) {
	texts := map[string][]string{}
	for first := range seedPrompts {
		s := serve(t, cfg, true)
		texts[seedPrompts[first]] = append(texts[seedPrompts[first]], seeded(t, s, model, seedPrompts[first]))
		for _, p := range seedPrompts {
			for range 2 {
				stop := func() error { return nil }
				if load {
					stop = alongside(s, model, 2)
				}
				texts[p] = append(texts[p], seeded(t, s, model, p))
				if err := stop(); err != nil {
					t.Fatal(err)
				}
			}
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
}

// alongside starts n streams of other seeded requests to model on s; the
// returned function waits for them and reports the first failure.
func alongside(s *hexserve, model string, n int) func() error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		body, _ := json.Marshal(map[string]any{"model": model, "seed": 7 + i, "temperature": 1, "max_tokens": 16 + 8*i,
			"messages": []map[string]string{{"role": "user", "content": strings.Repeat("Count sheep. ", 1+3*i)}}})
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(s.URL+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != 200 {
					err = fmt.Errorf("a stream alongside: status %d", resp.StatusCode)
				}
			}
			errs[i] = err
		}()
	}
	return func() error {
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// seeded runs one sampled, seeded chat completion and returns its text.
func seeded(t *testing.T, s *hexserve, model, prompt string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "seed": 1234, "temperature": 1.5, "top_p": 1,
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
