package e2e

import (
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hexserve/hexserve/internal/tinyllama"
	"github.com/hexserve/hexserve/tokenizer"
)

// TestOllamaGoldenRaw sends each golden case's prompt as text (begin-of-text
// included, as the tokenizer decodes it) to /api/generate with raw and
// temperature 0, and checks the reply is the text of the golden greedy
// tokens: the Ollama path reaches the model untemplated and decodes as the
// reference forward pass does.
//
// The golden prompts are random token ids, and only "short" survives the
// trip through text: BPE encodes the other cases' text to other ids (other
// merges), so no text prompt can reach their goldens. For those the test
// checks the same thing against the reference forward pass itself
// (internal/tinyllama, which made the goldens): the greedy continuation of
// the ids the text encodes to, over the steps whose top-two margin (≥ 1e-3)
// leaves no doubt about the argmax under float32 arithmetic.
func TestOllamaGoldenRaw(t *testing.T) {
	s := sharedServer(t)
	tok, err := tokenizer.Load(filepath.Join(bundle(t), "v79", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range goldenCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			golden, want := int32s(c.PromptIDs), int32s(goldenWant(c))
			prompt := tok.Decode(golden, false)
			ids := tok.Encode(prompt, false, true)
			if !slices.Equal(ids, golden) {
				if testing.Short() && len(ids) > 200 {
					t.Skip("-short: the reference forward pass over a long prompt is left to the full run")
				}
				want = referenceGreedy(t, ids, len(want), int32s(eosIDs))
				t.Logf("the text encodes to %d ids, not the golden %d: checking %d reference greedy tokens", len(ids), len(c.PromptIDs), len(want))
			}
			body, _ := json.Marshal(map[string]any{"model": s.Model, "prompt": prompt, "raw": true, "stream": false,
				"options": map[string]any{"temperature": 0, "num_predict": len(want)}})
			r := s.do(t, "POST", "/api/generate", string(body), "Authorization", "Bearer "+apiKey)
			var got struct {
				Response        string `json:"response"`
				Done            bool   `json:"done"`
				PromptEvalCount int    `json:"prompt_eval_count"`
				EvalCount       int    `json:"eval_count"`
			}
			if err := json.Unmarshal([]byte(r.Body), &got); r.Status != 200 || err != nil || !got.Done {
				t.Fatalf("%d %s (%v)", r.Status, r.Body, err)
			}
			if w := tok.Decode(want, false); got.Response != w {
				t.Errorf("greedy continuation of %d prompt tokens:\n got  %q\n want %q", len(c.PromptIDs), got.Response, w)
			}
			if got.PromptEvalCount != len(ids) || got.EvalCount != len(want) {
				t.Errorf("counts: prompt %d, eval %d; want %d, %d", got.PromptEvalCount, got.EvalCount, len(ids), len(want))
			}
		})
	}
}

// referenceGreedy is the reference forward pass's greedy continuation of
// prompt, at most n tokens, ending before an end-of-turn token and before the
// first step whose top-two logit margin is under 1e-3.
func referenceGreedy(t *testing.T, prompt []int32, n int, eos []int32) []int32 {
	t.Helper()
	m, err := tinyllama.NewModel(tinyllama.Tiny())
	if err != nil {
		t.Fatal(err)
	}
	s := m.NewSession()
	var h []float64
	for _, id := range prompt {
		if h, err = s.Append(int(id)); err != nil {
			t.Fatal(err)
		}
	}
	var out []int32
	for len(out) < n {
		l := m.Logits(h)
		best := tinyllama.Argmax(l)
		second := math.Inf(-1)
		for i, v := range l {
			if i != best && v > second {
				second = v
			}
		}
		if l[best]-second < 1e-3 || slices.Contains(eos, int32(best)) {
			break
		}
		out = append(out, int32(best))
		if h, err = s.Append(best); err != nil {
			t.Fatal(err)
		}
	}
	if len(out) == 0 {
		t.Fatal("the reference has no confident greedy token")
	}
	return out
}

// TestOllamaShowOldClients decodes /api/show of the tiny bundle into the
// fields of Ollama 0.6.5's api.ShowResponse and checks what that CLI's
// `ollama show` (cmd/cmd.go showInfo) reads without checking, before 0.12:
// model_info's general.architecture as a string and general.parameter_count,
// <arch>.context_length and <arch>.embedding_length as numbers (a missing
// one panics the CLI), then the other shape keys Ollama sends, from the
// bundle's own sizes (mkmodel's tiny preset).
func TestOllamaShowOldClients(t *testing.T) {
	s := sharedServer(t)
	r := s.do(t, "POST", "/api/show", `{"model":"`+s.Model+`"}`, "Authorization", "Bearer "+apiKey)
	var show struct { // api.ShowResponse, Ollama v0.6.5
		License, Modelfile, Parameters, Template, System string
		Details                                          struct {
			ParentModel       string `json:"parent_model"`
			Format, Family    string
			ParameterSize     string `json:"parameter_size"`
			QuantizationLevel string `json:"quantization_level"`
		}
		ModelInfo     map[string]any `json:"model_info"`
		ProjectorInfo map[string]any `json:"projector_info"`
		Capabilities  []string
	}
	if err := json.Unmarshal([]byte(r.Body), &show); r.Status != 200 || err != nil || show.ModelInfo == nil || show.ProjectorInfo != nil {
		t.Fatalf("%d %s (%v)", r.Status, r.Body, err)
	}
	arch, ok := show.ModelInfo["general.architecture"].(string)
	if !ok || arch != "llama" {
		t.Fatalf("general.architecture %v", show.ModelInfo["general.architecture"])
	}
	h, layers, ffn, heads, kv, vocab := 64.0, 2.0, 256.0, 4.0, 2.0, 128256.0
	want := map[string]float64{
		"general.parameter_count":         vocab*h + layers*(2*h*h+2*h*h*kv/heads+3*h*ffn+2*h) + h,
		arch + ".context_length":          512,
		arch + ".embedding_length":        h,
		arch + ".block_count":             layers,
		arch + ".attention.head_count":    heads,
		arch + ".attention.head_count_kv": kv,
		arch + ".feed_forward_length":     ffn,
		arch + ".vocab_size":              vocab,
	}
	for key, w := range want {
		if got, ok := show.ModelInfo[key].(float64); !ok || got != w {
			t.Errorf("model_info %s = %v, want %v", key, show.ModelInfo[key], w)
		}
	}
	if show.Details.QuantizationLevel == "" || !slices.Contains(show.Capabilities, "completion") {
		t.Errorf("details %+v, capabilities %v", show.Details, show.Capabilities)
	}
}
