package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
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
	var golden struct {
		Cases []struct {
			Name      string  `json:"name"`
			PromptIDs []int64 `json:"prompt_ids"`
			Greedy    []int64 `json:"greedy"`
		} `json:"cases"`
	}
	data, err := os.ReadFile(filepath.Join(root, "testdata", "tinyllama", "golden_tiny_public.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatal(err)
	}
	eos := []int64{128001, 128008, 128009}
	client := s.client()
	for _, c := range golden.Cases {
		t.Run(c.Name, func(t *testing.T) {
			want := c.Greedy
			if i := slices.IndexFunc(want, func(id int64) bool { return slices.Contains(eos, id) }); i >= 0 {
				want = want[:i] // the server stops at an end-of-turn token
			}
			resp, err := client.Completions.New(t.Context(), openai.CompletionNewParams{
				Model:       openai.CompletionNewParamsModel(s.Model),
				Prompt:      openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: c.PromptIDs},
				MaxTokens:   openai.Int(int64(len(want))),
				Temperature: openai.Float(0),
			}, option.WithJSONSet("return_token_ids", true))
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Choices []struct {
					TokenIDs []int64 `json:"token_ids"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(resp.RawJSON()), &got); err != nil || len(got.Choices) != 1 {
				t.Fatalf("response %s: %v", resp.RawJSON(), err)
			}
			if ids := got.Choices[0].TokenIDs; !slices.Equal(ids, want) {
				t.Errorf("greedy continuation of %d prompt tokens:\n got  %v\n want %v", len(c.PromptIDs), ids, want)
			}
		})
	}
}
