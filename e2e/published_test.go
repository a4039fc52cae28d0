package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hexserve/hexserve/internal/tinyllama"
)

// publishedConfig reads one of AI Hub's published genie_config.json files from
// ../shared/genie/families; without it the test skips, and fails under CI=true.
func publishedConfig(t *testing.T, name string) map[string]any {
	t.Helper()
	path := filepath.Join(root, "..", "shared", "genie", "families", name+".genie_config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		why := fmt.Sprintf("AI Hub's published %s is not here (../shared/genie/families): %v", name, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// partName matches a published part file name's "k_of_N".
var partName = regexp.MustCompile(`(\d+)_of_(\d+)`)

// fitPublished puts the test bundle's sizes into a published genie_config.json (as the Llama
// config is tested): context size, kv-dim, the RoPE width (pos-id-dim or rope-dim) and the part
// files, renamed in the published naming with the bundle's part count. Every other value (n-vocab,
// which Genie takes from the logits instead, end tokens, rope-theta, where RoPE is given) stays the
// published one.
func fitPublished(t *testing.T, g map[string]any, dir string, c tinyllama.Config, ctx int) {
	t.Helper()
	d := g["dialog"].(map[string]any)
	cx := d["context"].(map[string]any)
	cx["size"] = ctx
	eng := d["engine"].(map[string]any)
	htp := eng["backend"].(map[string]any)["QnnHtp"].(map[string]any)
	htp["kv-dim"] = c.HeadDim
	if _, ok := htp["pos-id-dim"]; ok {
		htp["pos-id-dim"] = c.HeadDim / 2
	}
	model := eng["model"].(map[string]any)
	if pe, ok := model["positional-encoding"].(map[string]any); ok {
		pe["rope-dim"] = c.HeadDim / 2
	}
	bins := model["binary"].(map[string]any)
	pub := bins["ctx-bins"].([]any)
	var ours []any
	for k := 1; k <= 3; k++ {
		name := partName.ReplaceAllString(pub[0].(string), fmt.Sprintf("%d_of_3", k))
		if err := os.Rename(filepath.Join(dir, fmt.Sprintf("tiny_part_%d_of_3.bin", k)), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		ours = append(ours, name)
	}
	bins["ctx-bins"] = ours
	b, _ := json.MarshalIndent(g, "", "    ")
	if err := os.WriteFile(filepath.Join(dir, "genie_config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// publishedBundle writes family's tiny test model (config c) as a 3-part Genie bundle with the
// published genie_config.json name fitted to it.
func publishedBundle(t *testing.T, name, family string, c tinyllama.Config, tok string) string {
	t.Helper()
	cfg, _ := json.Marshal(c)
	cfgPath := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	src := mkmodelOnce(t, "--format", "genie", "--family", family, "--config", cfgPath, "--name", "tiny", "--parts", "3",
		"--prefill-chunk", "16", "--ctx", "256", "--tokenizer", tok)
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	fitPublished(t, publishedConfig(t, name), dir, c, 256)
	return dir
}

// TestPublishedConfigs: AI Hub's published genie_config.json of Qwen2.5-7B (eos-token a number
// with eot-token, RoPE in QnnHtp), Falcon3-7B (kv-dim 256, pos-id-dim 128, rope-theta 1000042 in
// QnnHtp, bos = eos = 11) and Granite-3.1-8B (pad-token, positional-encoding θ 1e7), each with a
// test model of its family put in for the sizes, serve a chat; Mistral-7B's (a family not served)
// is refused at load with the reason.
func TestPublishedConfigs(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and serves a bundle for each of four published configs (-short; the full pass runs it)")
	}
	llamaTok := filepath.Join(root, "testdata", "tokenizer", "llama3.2", "tokenizer.json")
	granite, _ := tinyllama.FamilyPreset("granite", "tiny")
	granite.VocabSize = 128256 // the size of the test tokenizer (Llama 3.2's): no Granite tokenizer is here
	falcon, _ := tinyllama.FamilyPreset("falcon3", "tiny")
	qwen2, _ := tinyllama.FamilyPreset("qwen2", "tiny")
	for _, tc := range []struct {
		name, family string
		c            tinyllama.Config
		tok          string
		note         string  // the load's note of a published n-vocab other than the logits' width
		script       []int32 // the reply's ids, ending the turn ("stop"); none: 6 greedy tokens
	}{
		// n-vocab 131072 is below the logits' 151936 and the end tokens 151643–151645: as in
		// Genie, the logits' width is the vocabulary and <|im_end|> ends the turn.
		{"qwen2_5_7b_instruct", "qwen2", qwen2, filepath.Join(root, "..", "shared", "testdata", "families", "qwen2.5", "tokenizer.json"),
			"n-vocab is 131072 but the logits have 151936 entries", []int32{9707, 0, 151645}},
		{"falcon_v3_7b_instruct", "falcon3", falcon, llamaTok, "", nil},
		{"ibm_granite_v3_1_8b_instruct", "granite", granite, llamaTok, "n-vocab is 49155 but the logits have 128256 entries", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			libs := hostsimLibs(t)
			publishedConfig(t, tc.name) // skips without ../shared
			dir := publishedBundle(t, tc.name, tc.family, tc.c, tc.tok)
			var env []string
			if tc.script != nil {
				env = append(env, "HOSTSIM_SCRIPT="+idScript(t, tc.script...))
			}
			s := serve(t, config{Model: fmt.Sprintf("  path: %q\n  aliases: [x]", dir)}.write(t, libs), true, env...)
			if !strings.Contains(s.log.String(), tc.note) {
				t.Errorf("the load does not note %q:\n%s", tc.note, s.log)
			}
			r := s.post(t, "/v1/chat/completions", `{"model":"x","messages":[{"role":"user","content":"Hello there"}],"max_tokens":6,"temperature":0}`)
			var got struct {
				Choices []struct {
					Message      struct{ Content string } `json:"message"`
					FinishReason string                   `json:"finish_reason"`
				} `json:"choices"`
				Usage struct {
					Completion int `json:"completion_tokens"`
				} `json:"usage"`
			}
			if r.Status != 200 || json.Unmarshal([]byte(r.Body), &got) != nil || len(got.Choices) != 1 || got.Usage.Completion == 0 {
				t.Fatalf("chat: %d %s", r.Status, r.Body)
			}
			if c := got.Choices[0]; tc.script != nil && (c.FinishReason != "stop" || got.Usage.Completion != len(tc.script)) {
				t.Errorf("scripted reply %v: %q (%s, %d tokens), want it ended by its last token", tc.script, c.Message.Content, c.FinishReason, got.Usage.Completion)
			}
		})
	}
	t.Run("mistral_7b_instruct_v0_3", func(t *testing.T) {
		hostsimLibs(t)
		publishedConfig(t, "mistral_7b_instruct_v0_3")
		c := tinyllama.Tiny()
		dir := publishedBundle(t, "mistral_7b_instruct_v0_3", "llama", c, llamaTok)
		hf := map[string]any{"model_type": "mistral", "architectures": []string{"MistralForCausalLM"}, "vocab_size": c.VocabSize}
		b, _ := json.Marshal(hf)
		if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		s := servePTE0(t, dir)
		const want = "Mistral's SentencePiece v3 vocabulary and [INST] template (model_type mistral) are not served yet"
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(s.log.String(), want) && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
		}
		if !strings.Contains(s.log.String(), want) {
			t.Fatalf("the load did not fail with %q:\n%s", want, s.log)
		}
	})
}

// servePTE0 serves model through model.path without waiting for it to be healthy.
func servePTE0(t *testing.T, model string) *hexserve {
	t.Helper()
	cfg := config{Model: fmt.Sprintf("  path: %q\n  aliases: [x]", model)}.write(t, hostsimLibs(t))
	return serve(t, cfg, false)
}
