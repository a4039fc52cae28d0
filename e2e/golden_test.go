package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestGoldenGreedy drives the whole path (API → engine → hexagon → purego →
// hostsim) with the golden cases' token-id prompts through the Go SDK and
// checks that greedy decoding continues exactly as the reference forward pass
// of testdata/tinyllama does.
func TestGoldenGreedy(t *testing.T) {
	s := sharedServer(t)
	checkGolden(t, s)
}

// TestGoldenRenamedTensors serves a bundle whose graphs use other tensor
// names than mkmodel's defaults (every role renamed, bound by the manifest's
// hexserve.tensors; hostsim takes the names from the context binaries) and
// checks the golden greedy continuations through it.
func TestGoldenRenamedTensors(t *testing.T) {
	libs := hostsimLibs(t)
	names := "x=h_in,cos=rope.cos,sin=rope.sin,cmask=attn_mask,y=h_out," +
		"past_k=L{i}.k_cache,past_v=L{i}.v_cache,new_k=L{i}.k_new,new_v=L{i}.v_new"
	dir := mkmodelOnce(t, append([]string{"--contract", "chunked", "--prefill-chunk", "16", "--tensors", names}, tinyFlags...)...)
	var m struct {
		Hexserve struct {
			Tensors map[string]string `json:"tensors"`
		} `json:"hexserve"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "v79", "manifest.json"))
	if err == nil {
		err = json.Unmarshal(data, &m)
	}
	if err != nil || m.Hexserve.Tensors["past_k"] != "L{i}.k_cache" || m.Hexserve.Tensors["x"] != "h_in" {
		t.Fatalf("manifest tensors %v (%v)", m.Hexserve.Tensors, err)
	}
	// The context binaries carry the new names, not the defaults.
	bin0, err := os.ReadFile(filepath.Join(dir, "v79", "decode.bin"))
	if err != nil || !strings.Contains(string(bin0[:4096]), "L1.v_cache") || strings.Contains(string(bin0[:4096]), "past_k_0") {
		t.Fatalf("decode.bin does not carry the renamed tensors (%v)", err)
	}
	cfg := config{Bundle: dir, Server: "  api_keys: [\"" + apiKey + "\"]"}.write(t, libs)
	s := serve(t, cfg, true)
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	r := s.do(t, "GET", "/v1/models", "", "Authorization", "Bearer "+apiKey)
	if err := json.Unmarshal([]byte(r.Body), &models); r.Status != 200 || err != nil || len(models.Data) != 1 {
		t.Fatalf("models: %d %s", r.Status, r.Body)
	}
	s.Model = models.Data[0].ID
	checkGolden(t, s)
}

// goldenCase is a case of testdata/tinyllama/golden_tiny_public.json.
type goldenCase struct {
	Name          string    `json:"name"`
	PromptIDs     []int64   `json:"prompt_ids"`
	Greedy        []int64   `json:"greedy"`
	GreedyMargins []float64 `json:"greedy_margins"`
}

func goldenCases(t testing.TB) []goldenCase {
	var g struct{ Cases []goldenCase }
	data, err := os.ReadFile(filepath.Join(root, "testdata", "tinyllama", "golden_tiny_public.json"))
	if err == nil {
		err = json.Unmarshal(data, &g)
	}
	if err != nil {
		t.Fatal(err)
	}
	return g.Cases
}

// eosIDs are the tiny model's end-of-turn tokens.
var eosIDs = []int64{128001, 128008, 128009}

// goldenWant is c's greedy tokens up to the first end-of-turn.
func goldenWant(c goldenCase) []int64 {
	want := c.Greedy
	if i := slices.IndexFunc(want, func(id int64) bool { return slices.Contains(eosIDs, id) }); i >= 0 {
		want = want[:i]
	}
	return want
}

// int32s converts token ids.
func int32s(ids []int64) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// tokenCompletion is what the greedy checks read of a /v1/completions reply.
type tokenCompletion struct {
	Model   string `json:"model"`
	Choices []struct {
		TokenIDs     []int64 `json:"token_ids"`
		FinishReason string  `json:"finish_reason"`
	} `json:"choices"`
}

// complete sends a token-id prompt to model with greedy sampling, the token ids returned; it
// fails t unless the reply is a 200 with one choice.
func (s *hexserve) complete(t testing.TB, model string, prompt []int64, maxTokens int) (tokenCompletion, reply) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": prompt, "max_tokens": maxTokens, "temperature": 0,
		"return_token_ids": true})
	r := s.post(t, "/v1/completions", string(body))
	if r.Status != 200 {
		t.Fatalf("completion on %s: %d %s", model, r.Status, r.Body)
	}
	return choiceOf(t, r.Body), r
}

// choiceOf decodes a completion reply, failing t unless it has one choice.
func choiceOf(t testing.TB, body string) tokenCompletion {
	t.Helper()
	var got tokenCompletion
	if err := json.Unmarshal([]byte(body), &got); err != nil || len(got.Choices) != 1 {
		t.Fatalf("completion reply %s: %v", body, err)
	}
	return got
}

// checkGolden runs every golden case's prompt through /v1/completions with
// temperature 0 and compares the continuation token by token.
func checkGolden(t *testing.T, s *hexserve) {
	t.Helper()
	client := s.client()
	for _, c := range goldenCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			want := goldenWant(c) // the server stops at an end-of-turn token
			resp, err := client.Completions.New(t.Context(), openai.CompletionNewParams{
				Model:       openai.CompletionNewParamsModel(s.Model),
				Prompt:      openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: c.PromptIDs},
				MaxTokens:   openai.Int(int64(len(want))),
				Temperature: openai.Float(0),
			}, option.WithJSONSet("return_token_ids", true))
			if err != nil {
				t.Fatal(err)
			}
			if ids := choiceOf(t, resp.RawJSON()).Choices[0].TokenIDs; !slices.Equal(ids, want) {
				t.Errorf("greedy continuation of %d prompt tokens:\n got  %v\n want %v", len(c.PromptIDs), ids, want)
			}
		})
	}
}
