//go:build !nomkmodel

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/hexagon/genie"
	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/internal/testjson"
)

// TestGenieEndTokens: a loaded Genie bundle ends turns at its eos-token ∪ generation_config.json's
// eos_token_id, else at tokenizer_config.json's eos_token; with none of them the load fails
// instead of serving a model that never ends a turn.
func TestGenieEndTokens(t *testing.T) {
	libs := hostsimLibDir(t)
	src := tinyGenie(t, "f32", simfile.WeightF16)
	tok, err := os.ReadFile(filepath.Join("..", "..", "testdata", "tokenizer", "llama3.2", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		eos         any // dialog.context.eos-token (nil: removed)
		gen, tokCfg string
		want        []int32
		err         string
	}{
		{"eos-token list", []any{128001, 128008, 128009}, "", "", []int32{128001, 128008, 128009}, ""},
		{"eos-token number and generation_config", 128009, `{"eos_token_id": [128001, 128009]}`, "", []int32{128009, 128001}, ""},
		{"generation_config only", nil, `{"eos_token_id": 128008}`, `{"eos_token": "<|eot_id|>"}`, []int32{128008}, ""},
		{"tokenizer_config only", []any{}, "", `{"eos_token": {"content": "<|eot_id|>"}}`, []int32{128009}, ""},
		{"none", nil, "", "", nil, "no end tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ents, _ := os.ReadDir(src)
			for _, e := range ents {
				b, _ := os.ReadFile(filepath.Join(src, e.Name()))
				os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644)
			}
			os.WriteFile(filepath.Join(dir, "tokenizer.json"), tok, 0o644)
			testjson.Edit(t, filepath.Join(dir, genie.ConfigFile), func(m map[string]any) {
				ctx := m["dialog"].(map[string]any)["context"].(map[string]any)
				if tc.eos == nil {
					delete(ctx, "eos-token")
				} else {
					ctx["eos-token"] = tc.eos
				}
			})
			for name, body := range map[string]string{"generation_config.json": tc.gen, "tokenizer_config.json": tc.tokCfg} {
				if body != "" {
					os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
				}
			}
			cfg := config.Default()
			cfg.Model.SetLocation(dir)
			cfg.Model.Libraries = librariesIn(libs)
			model, _, _, err := loadModel(cfg, zerolog.Nop())
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("load: %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer model.Close()
			if got := model.Info().EOS; !slices.Equal(got, tc.want) {
				t.Errorf("end tokens %v, want %v", got, tc.want)
			}
		})
	}
}
