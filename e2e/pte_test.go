package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// ExecuTorch .pte models of the public tiny model (mkmodel --format pte) served through the real
// binary: `serve --model FILE.pte` detection, the runner behind the engine and the API.

// mkpte writes (once per flag set) a tiny .pte with float16 weights and returns its path.
func mkpte(t testing.TB, flags ...string) string {
	t.Helper()
	hostsimLibs(t)
	dir := mkmodelOnce(t, append([]string{"--preset", "tiny", "--format", "pte", "--weights", "f16", "--name", "tiny"}, flags...)...)
	return filepath.Join(dir, "tiny.pte")
}

// servePTE serves model (a .pte or its folder) through model.path.
func servePTE(t *testing.T, model string) *hexserve {
	t.Helper()
	cfg := config{Model: fmt.Sprintf("  path: %q\n  aliases: [x]", model)}.write(t, hostsimLibs(t))
	return serve(t, cfg, true)
}

// completion sends a token-id prompt to the served model x with greedy sampling and returns
// the generated ids and the finish reason.
func (s *hexserve) completion(t testing.TB, prompt []int64, maxTokens int) ([]int64, string) {
	t.Helper()
	got, _ := s.complete(t, "x", prompt, maxTokens)
	return got.Choices[0].TokenIDs, got.Choices[0].FinishReason
}

// TestPTEGolden: float32 KV and logits give exactly the golden greedy tokens of every case, with
// the default prefill chunk, --prefill-chunk 16 and --shards 2 (the long case's prompt crosses
// CL − AR, so its tail goes through kv_forward).
func TestPTEGolden(t *testing.T) {
	for _, v := range []struct {
		name  string
		flags []string
	}{
		{"ar128", nil},
		{"ar16", []string{"--prefill-chunk", "16"}},
		{"shards2", []string{"--prefill-chunk", "32", "--shards", "2"}},
	} {
		t.Run(v.name, func(t *testing.T) {
			s := servePTE(t, mkpte(t, append([]string{"--kv", "f32", "--logits", "f32", "--ctx", "512"}, v.flags...)...))
			for _, c := range goldenCases(t) {
				want := goldenWant(c)
				got, _ := s.completion(t, c.PromptIDs, len(want))
				if !slices.Equal(got, want) {
					t.Errorf("%s: greedy continuation of %d prompt tokens:\n got  %v\n want %v", c.Name, len(c.PromptIDs), got, want)
				}
			}
		})
	}
}

// TestPTEContextLength: with a context smaller than prompt plus output the answer stops at the
// context (CL − 1 usable positions) with finish_reason "length", and /v1/models says so.
func TestPTEContextLength(t *testing.T) {
	s := servePTE(t, filepath.Dir(mkpte(t, "--kv", "f32", "--logits", "f32", "--ctx", "64", "--prefill-chunk", "16"))) // the folder form
	var models struct {
		Data []struct {
			MaxModelLen int `json:"max_model_len"`
		} `json:"data"`
	}
	if r := s.do(t, "GET", "/v1/models", ""); json.Unmarshal([]byte(r.Body), &models) != nil || len(models.Data) != 1 || models.Data[0].MaxModelLen != 63 {
		t.Fatalf("/v1/models: %s, want max_model_len 63", r.Body)
	}
	c := goldenCases(t)[1] // cross128: 130 prompt tokens do not fit; use its first 40
	prompt := c.PromptIDs[:40]
	got, finish := s.completion(t, prompt, 100)
	if finish != "length" || len(prompt)+len(got) > 63 || len(got) == 0 {
		t.Fatalf("%d prompt + %d generated tokens, finish %q; want finish length within 63 positions", len(prompt), len(got), finish)
	}
	// The tokens it did produce are the reference's (kv_forward up to position CL − 2).
	full, _ := servePTE(t, mkpte(t, "--kv", "f32", "--logits", "f32", "--ctx", "512")).completion(t, prompt, len(got))
	if !slices.Equal(got, full) {
		t.Errorf("tokens at the context limit differ from a large context:\n got  %v\n want %v", got, full)
	}
}

// pteTolerance bounds |logit − golden| for uint8 KV + uint16 logits on the tiny model (measured
// 0.36 by hexagon/executorch TestQuantizedTolerance over the golden checks' top-20 logits).
// A step's greedy token must then equal the golden one wherever the golden margin between the
// top two logits exceeds twice the tolerance.
const pteTolerance = 1.0

// TestPTEQuantized: with uint8 KV and uint16 logits, every golden step whose margin exceeds
// 2·pteTolerance yields the golden token, teacher-forced (the prompt plus the golden tokens
// before it, one generated token per request, so one early flip does not end the check).
func TestPTEQuantized(t *testing.T) {
	s := servePTE(t, mkpte(t, "--kv", "u8", "--logits", "u16", "--ctx", "512", "--prefill-chunk", "32"))
	checked := 0
	for _, c := range goldenCases(t) {
		for i, m := range c.GreedyMargins {
			if m <= 2*pteTolerance || slices.Contains(eosIDs, c.Greedy[i]) {
				continue
			}
			got, _ := s.completion(t, append(slices.Clone(c.PromptIDs), c.Greedy[:i]...), 1)
			if len(got) != 1 || got[0] != c.Greedy[i] {
				t.Errorf("%s step %d (golden margin %.2f): got %v, want %d", c.Name, i, m, got, c.Greedy[i])
			}
			checked++
		}
	}
	if checked < 5 {
		t.Fatalf("only %d golden steps have a margin above %g", checked, 2*pteTolerance)
	}
	t.Logf("%d teacher-forced steps checked", checked)
}

// TestPTEMultiTurn: the second turn of a chat reuses the first turn's cache rows (cached_tokens),
// also after another conversation replaced them (restored from the KV store, engine.kv_cache),
// and answers exactly as a fresh server does.
func TestPTEMultiTurn(t *testing.T) {
	model := mkpte(t, "--kv", "f32", "--logits", "f32", "--ctx", "512", "--prefill-chunk", "16")
	chat := func(s *hexserve, msgs []map[string]string) (string, int) {
		body, _ := json.Marshal(map[string]any{"model": "x", "messages": msgs, "max_tokens": 12, "temperature": 0})
		r := s.post(t, "/v1/chat/completions", string(body))
		var resp struct {
			Choices []struct {
				Message struct{ Content string }
			}
			Usage struct {
				PromptTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			}
		}
		if r.Status != 200 || json.Unmarshal([]byte(r.Body), &resp) != nil || len(resp.Choices) != 1 {
			t.Fatalf("chat: %d %s", r.Status, r.Body)
		}
		return resp.Choices[0].Message.Content, resp.Usage.PromptTokensDetails.CachedTokens
	}
	system := map[string]string{"role": "system", "content": strings.Repeat("You answer briefly. ", 8)}
	turn1 := []map[string]string{system, {"role": "user", "content": "Name a colour."}}
	a := servePTE(t, model)
	first, _ := chat(a, turn1)
	turn2 := append(slices.Clone(turn1), map[string]string{"role": "assistant", "content": first}, map[string]string{"role": "user", "content": "And another one?"})
	second, cached := chat(a, turn2)
	if cached == 0 {
		t.Errorf("the second turn reused no cached tokens")
	}
	// Another conversation takes the resident cache; the first one's rows come back from the store.
	chat(a, []map[string]string{{"role": "user", "content": "Count to five, in words please."}})
	again, restored := chat(a, turn2)
	if restored == 0 || again != second {
		t.Errorf("after another conversation: %d cached tokens, %q (want > 0 and %q)", restored, again, second)
	}
	fresh, _ := chat(servePTE(t, model), turn2)
	if second != fresh {
		t.Errorf("second turn with the cache %q, fresh %q", second, fresh)
	}
	t.Logf("turn 2: %d cached tokens; after another conversation: %d", cached, restored)
}

// TestPTESpeculative: with predictions verified through prefill_forward over the cache, greedy
// output equals the output without speculation, for a right and a wrong prediction; a right one
// is mostly accepted.
func TestPTESpeculative(t *testing.T) {
	model := mkpte(t, "--kv", "f32", "--logits", "f32", "--ctx", "512", "--prefill-chunk", "16")
	libs := hostsimLibs(t)
	off := serve(t, config{Model: fmt.Sprintf("  path: %q", model), Extra: "engine:\n  speculative:\n    enabled: false"}.write(t, libs), true)
	on := serve(t, config{Model: fmt.Sprintf("  path: %q", model)}.write(t, libs), true,
		"HOSTSIM_LATENCY_US_PREFILL=64500", "HOSTSIM_LATENCY_US_DECODE=55000")
	base := map[string]any{"model": "tiny", "temperature": 0, "max_tokens": 24,
		"messages": []map[string]string{{"role": "user", "content": "Tell the story of a lighthouse keeper who wrote code."}}}
	want, _ := complete(t, off, "/v1/chat/completions", base)
	for _, p := range []struct{ name, content string }{{"right", want}, {"wrong", "the sea rose over rocks while the keeper slept and dreamed of France"}} {
		req := clone(base)
		req["prediction"] = map[string]any{"type": "content", "content": p.content}
		got, u := complete(t, on, "/v1/chat/completions", req)
		if got != want {
			t.Errorf("%s prediction changed the output\ngot  %q\nwant %q", p.name, got, want)
		}
		t.Logf("%s prediction: %d of %d completion tokens accepted, %d rejected", p.name, u.Details.Accepted, u.Completion, u.Details.Rejected)
		if p.name == "right" && u.Details.Accepted < u.Completion/2 {
			t.Errorf("a right prediction had %d of %d tokens accepted", u.Details.Accepted, u.Completion)
		}
	}
}
