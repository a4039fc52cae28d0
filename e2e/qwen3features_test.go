package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestQwen3EngineFeatures: the engine's features on a Qwen3 Genie bundle (f32, 3 parts, AR 32),
// served beside the Llama tiny bundle in one server (models: list), with the 1B latency floors:
// both models give their golden greedy tokens, alone and with requests of both in flight at once
// (answers under load equal answers alone); a continued prompt reuses its prefix (cached_tokens)
// and, evicted from the NPU's two sequences by other conversations, comes back from the KV store;
// a prediction (speculative verification) changes nothing in the answer and has tokens accepted;
// a json_schema response_format gives JSON of the schema.
func TestQwen3EngineFeatures(t *testing.T) {
	if testing.Short() {
		t.Skip("two models at the 1B floors with 18 requests in flight (-short; the full pass runs it)")
	}
	tok := qwen3Tokenizer(t) // skips without Qwen3's tokenizer (fails under CI=true)
	hostsimLibs(t)
	qwen := mkmodelOnce(t, "--family", "qwen3", "--preset", "tiny", "--weights", "f16", "--name", "tiny", "--tokenizer", tok,
		"--format", "genie", "--precision", "f32", "--parts", "3", "--prefill-chunk", "32", "--ctx", "512")
	cfg := modelsConfig(t, []string{
		fmt.Sprintf("{path: %q, id: qwen3, preload: true, max_sequences: 2}", qwen),
		fmt.Sprintf("{path: %q, id: llama, preload: true}", bundle(t)),
	}, "", "engine:\n  kv_cache:\n    memory: 64MiB")
	s := serve(t, cfg, true, "HOSTSIM_LATENCY_US_PREFILL=37000", "HOSTSIM_LATENCY_US_DECODE=18600")

	qcases, qeos := familyGolden(t, "qwen3")
	type job struct {
		model  string
		prompt []int64
		want   []int64
	}
	var jobs []job
	for _, c := range qcases {
		want := c.Greedy[:16]
		if i := slices.IndexFunc(want, func(id int64) bool { return slices.Contains(qeos, id) }); i >= 0 {
			want = want[:i]
		}
		jobs = append(jobs, job{"qwen3", c.PromptIDs, want})
	}
	for _, c := range goldenCases(t)[:2] {
		jobs = append(jobs, job{"llama", c.PromptIDs, goldenWant(c)[:16]})
	}
	t.Run("alone", func(t *testing.T) {
		for _, j := range jobs {
			if got, _ := s.complete(t, j.model, j.prompt, len(j.want)); !slices.Equal(got.Choices[0].TokenIDs, j.want) {
				t.Errorf("%s, %d prompt tokens: got %v, want %v", j.model, len(j.prompt), got.Choices[0].TokenIDs, j.want)
			}
		}
	})
	t.Run("under load", func(t *testing.T) {
		var wg sync.WaitGroup
		got := make([][]int64, 3*len(jobs))
		for i := range got {
			j := jobs[i%len(jobs)]
			wg.Go(func() {
				body, _ := json.Marshal(map[string]any{"model": j.model, "prompt": j.prompt, "max_tokens": len(j.want), "temperature": 0, "return_token_ids": true})
				if r := s.post(t, "/v1/completions", string(body)); r.Status == 200 {
					got[i] = choiceOf(t, r.Body).Choices[0].TokenIDs
				}
			})
		}
		wg.Wait()
		for i, g := range got {
			if j := jobs[i%len(jobs)]; !slices.Equal(g, j.want) {
				t.Errorf("request %d (%s, %d prompt tokens) under load: got %v, alone %v", i, j.model, len(j.prompt), g, j.want)
			}
		}
	})
	t.Run("prefix cache and KV store", func(t *testing.T) {
		cached := func(p []int) int {
			body, _ := json.Marshal(map[string]any{"model": "qwen3", "prompt": p, "max_tokens": 2, "temperature": 0})
			r := s.post(t, "/v1/completions", string(body))
			var u struct {
				Usage struct {
					Details struct {
						Cached int `json:"cached_tokens"`
					} `json:"prompt_tokens_details"`
				} `json:"usage"`
			}
			if r.Status != 200 || json.Unmarshal([]byte(r.Body), &u) != nil {
				t.Fatalf("completion: %d %s", r.Status, r.Body)
			}
			return u.Usage.Details.Cached
		}
		conv := func(base int) []int {
			p := make([]int, 140) // past one prefill window
			for i := range p {
				p[i] = base + 7*i
			}
			return p
		}
		a := conv(1000)
		cached(a)
		if got := cached(append(a, 5, 6)); got != len(a) {
			t.Errorf("a continued at once: cached_tokens %d, want %d", got, len(a))
		}
		for _, base := range []int{20000, 40000, 60000} { // other conversations take the two sequences
			cached(conv(base))
		}
		if got := cached(append(a, 5, 6, 7)); got < len(a) {
			t.Errorf("a continued after 3 other conversations: cached_tokens %d, want >= %d", got, len(a))
		}
		if m := s.metrics(t); !regexp.MustCompile(`(?m)^hexserve_kv_store_hits_total{model="qwen3"} [1-9]`).MatchString(m) {
			t.Errorf("no KV store hit on qwen3:\n%s", grepLines(m, "hexserve_kv_store_hits"))
		}
	})
	chat := map[string]any{"model": "qwen3", "temperature": 0, "max_tokens": 24, "reasoning_effort": "none", // the answer, not a <think>
		"messages": []map[string]string{{"role": "user", "content": "Tell me about the lighthouse keeper and the sea"}}}
	t.Run("speculative", func(t *testing.T) {
		want, _ := complete(t, s, "/v1/chat/completions", chat)
		req := clone(chat)
		req["prediction"] = map[string]any{"type": "content", "content": want}
		got, u := complete(t, s, "/v1/chat/completions", req)
		if got != want {
			t.Errorf("a prediction changed the answer:\n got  %q\n want %q", got, want)
		}
		if u.Details.Accepted == 0 {
			t.Errorf("no prediction token accepted (%+v): speculation did not run", u)
		}
	})
	t.Run("structured", func(t *testing.T) {
		req := clone(chat)
		req["max_tokens"] = 64
		req["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "answer", "strict": true,
			"schema": map[string]any{"type": "object", "additionalProperties": false, "required": []string{"ok"},
				"properties": map[string]any{"ok": map[string]any{"type": "string", "enum": []string{"yes", "no"}}}}}}
		got, _ := complete(t, s, "/v1/chat/completions", req)
		var v struct{ OK string }
		if err := json.Unmarshal([]byte(strings.TrimSpace(got)), &v); err != nil || (v.OK != "yes" && v.OK != "no") {
			t.Errorf("json_schema answer %q: %v", got, err)
		}
	})
}
