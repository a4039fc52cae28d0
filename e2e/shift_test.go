package e2e

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
)

// shifted sends a greedy token-id completion with context_shift set as given (n_keep: the
// sink after BOS) and returns its token ids and finish reason.
func (s *hexserve) shifted(t testing.TB, prompt []int64, maxTokens int, shift bool) ([]int64, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "x", "prompt": prompt, "max_tokens": maxTokens, "temperature": 0,
		"return_token_ids": true, "context_shift": shift, "n_keep": 8})
	r := s.post(t, "/v1/completions", string(body))
	if r.Status != 200 {
		t.Fatalf("completion: %d %s", r.Status, r.Body)
	}
	c := choiceOf(t, r.Body).Choices[0]
	return c.TokenIDs, c.FinishReason
}

var shiftsMetric = regexp.MustCompile(`(?m)^hexserve_context_shifts_total\{kind="(\w+)",model="[^"]+"\} (\d+)$`)

// shiftCount is the sum of /metrics' hexserve_context_shifts_total of kind (0: none).
func shiftCount(metrics, kind string) int {
	n := 0
	for _, m := range shiftsMetric.FindAllStringSubmatch(metrics, -1) {
		if m[1] == kind {
			k, _ := strconv.Atoi(m[2])
			n += k
		}
	}
	return n
}

// TestContextShiftPTE: on a 512-token .pte (the re-read path: its RoPE is in-graph) a
// completion with context_shift goes on past the window to max_tokens, 1,200 tokens (2.3
// windows): until the first shift its tokens are the unshifted reply's (which stops at the
// window), two runs give the same tokens, /metrics counts the re-reads, and three other streams
// side by side with it answer as they do alone.
func TestContextShiftPTE(t *testing.T) {
	if testing.Short() {
		t.Skip("1,200 tokens past the window with re-reads, twice, and three streams beside it (-short; the full pass runs it)")
	}
	s := servePTE(t, mkpte(t, "--kv", "f32", "--logits", "f32", "--ctx", "512", "--prefill-chunk", "16"))
	prompt := goldenCases(t)[0].PromptIDs
	const n = 1200
	got, finish := s.shifted(t, prompt, n, true)
	if finish != "length" || len(got) != n {
		t.Fatalf("shifted: %d tokens, finish %q; want %d, length", len(got), finish, n)
	}
	plain, finish := s.shifted(t, prompt, n, false)
	if finish != "length" || len(plain) >= n || !slices.Equal(got[:len(plain)], plain) {
		t.Fatalf("unshifted: %d tokens, finish %q, equal to the shifted run's first: %v", len(plain), finish, slices.Equal(got[:len(plain)], plain))
	}
	again, _ := s.shifted(t, prompt, n, true)
	if !slices.Equal(again, got) {
		t.Errorf("two shifted runs differ")
	}
	if k := shiftCount(s.metrics(t), "reread"); k < 4 { // 2 runs × at least 2 shifts
		t.Errorf("hexserve_context_shifts_total{kind=\"reread\"} = %d, want at least 4", k)
	}
	others := [][]int64{goldenCases(t)[1].PromptIDs, prompt[:len(prompt)/2], append(slices.Clone(prompt), prompt...)}
	alone := make([][]int64, len(others))
	for i, p := range others {
		alone[i], _ = s.shifted(t, p, 60, false)
	}
	side := make([][]int64, len(others)+1)
	var wg sync.WaitGroup
	for i := range side {
		wg.Go(func() {
			if i == len(others) {
				side[i], _ = s.shifted(t, prompt, n, true)
				return
			}
			side[i], _ = s.shifted(t, others[i], 60, false)
		})
	}
	wg.Wait()
	for i := range others {
		if !slices.Equal(side[i], alone[i]) {
			t.Errorf("stream %d beside a shifting one:\n got  %v\n want %v", i, side[i], alone[i])
		}
	}
	if !slices.Equal(side[len(others)], got) {
		t.Errorf("the shifting stream among three others differs from alone")
	}
	// The Ollama API shifts by default, as Ollama does; shift false stops at the window.
	for _, c := range []struct {
		shift  string
		reason string
		count  func(int) bool
	}{
		{"", "length", func(n int) bool { return n == 700 }},
		{`"shift":false,`, "length", func(n int) bool { return n < 512 }},
	} {
		rep := s.post(t, "/api/chat", `{"model":"x","stream":false,`+c.shift+`"messages":[{"role":"user","content":"Tell me a story."}],`+
			`"options":{"temperature":0,"num_predict":700}}`)
		var out struct {
			DoneReason string `json:"done_reason"`
			EvalCount  int    `json:"eval_count"`
		}
		if json.Unmarshal([]byte(rep.Body), &out) != nil || out.DoneReason != c.reason || !c.count(out.EvalCount) {
			t.Errorf("/api/chat %s: %d %s", c.shift, rep.Status, rep.Body)
		}
	}
}
