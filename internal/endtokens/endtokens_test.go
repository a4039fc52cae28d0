package endtokens

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hexserve/hexserve/internal/testerr"
)

type vocab map[string]int32

func (v vocab) VocabSize() int { return 200 }
func (v vocab) TokenID(s string) (int32, bool) {
	id, ok := v[s]
	return id, ok
}

// TestResolve: the model's list ∪ generation_config.json's, else
// tokenizer_config.json's eos_token, else an error.
func TestResolve(t *testing.T) {
	v := vocab{"<|im_end|>": 150, "<|endoftext|>": 151}
	for _, tc := range []struct {
		name    string
		own     []int32
		gen     string // generation_config.json ("" none)
		tokCfg  string // tokenizer_config.json ("" none)
		want    []int32
		wantErr []string
	}{
		{"own only", []int32{1, 2}, "", "", []int32{1, 2}, nil},
		{"own and a list", []int32{1, 2}, `{"eos_token_id": [2, 3]}`, `{"eos_token": "<|im_end|>"}`, []int32{1, 2, 3}, nil},
		{"own and one", []int32{1}, `{"eos_token_id": 151}`, "", []int32{1, 151}, nil},
		{"generation config only", nil, `{"eos_token_id": [150, 151]}`, "", []int32{150, 151}, nil},
		{"tokenizer config string", nil, `{"bos_token_id": 1}`, `{"eos_token": "<|im_end|>"}`, []int32{150}, nil},
		{"tokenizer config object", nil, "", `{"eos_token": {"content": "<|endoftext|>", "special": true}}`, []int32{151}, nil},
		{"none", nil, `{}`, `{"eos_token": null}`, nil, []string{"no end tokens", "dialog.context.eos-token", "never end a turn"}},
		{"unknown token", nil, "", `{"eos_token": "</s>"}`, nil, []string{"tokenizer_config.json", `"</s>" is not a token`}},
		{"out of range", nil, `{"eos_token_id": 500}`, "", nil, []string{"generation_config.json", "500 is outside"}},
		{"bad generation config", nil, `{"eos_token_id": "x"}`, "", nil, []string{"generation_config.json", "eos_token_id", "want a token id"}},
		{"trailing bytes", nil, `{"eos_token_id": 1} {}`, "", nil, []string{"generation_config.json", "bytes after the JSON value"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.gen != "" {
				os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(tc.gen), 0o644)
			}
			if tc.tokCfg != "" {
				os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(tc.tokCfg), 0o644)
			}
			s, err := Resolve(tc.own, "dialog.context.eos-token", []string{t.TempDir(), dir}, v)
			if tc.wantErr != nil {
				testerr.Mentions(t, err, tc.wantErr...)
				return
			}
			if err != nil || !slices.Equal(s.IDs, tc.want) || len(s.Sources) == 0 {
				t.Fatalf("Resolve = %+v, %v; want %v", s, err, tc.want)
			}
		})
	}
}
