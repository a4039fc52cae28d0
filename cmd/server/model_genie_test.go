//go:build !nomkmodel

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/hexagon/genie"
	"github.com/hexserve/hexserve/hexagon/genie/geniesim"
	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/internal/costtest"
	"github.com/hexserve/hexserve/internal/testjson"
)

// TestGenieEndTokens: a loaded Genie bundle ends turns at its eos-token ∪ generation_config.json's
// eos_token_id, else at tokenizer_config.json's eos_token; with none of them the load fails
// instead of serving a model that never ends a turn.
func TestGenieEndTokens(t *testing.T) {
	costtest.SkipNumericUnderRace(t, "writes a Genie bundle per end-token case")
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
			if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
				t.Fatal(err)
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

// TestOutsidePartsCounted: a Genie part outside the bundle's folder is refused unless
// model.allow_outside_paths, and when allowed its size is in the model's estimate, so a budget
// its files exceed refuses the load before it starts (the 1.5 GB model estimated at 9 MB).
func TestOutsidePartsCounted(t *testing.T) {
	dir := tinyGenie(t, "f32", simfile.WeightF16)
	part := geniesim.PartFile("tiny", 2, 3)
	out := filepath.Join(t.TempDir(), part)
	if err := os.Rename(filepath.Join(dir, part), out); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(out, 100<<20); err != nil { // sparse: 100 MB on paper
		t.Fatal(err)
	}
	testjson.Edit(t, filepath.Join(dir, genie.ConfigFile), func(m map[string]any) {
		bins := m["dialog"].(map[string]any)["engine"].(map[string]any)["model"].(map[string]any)["binary"].(map[string]any)
		bins["ctx-bins"].([]any)[1] = out
	})
	for _, allow := range []bool{false, true} {
		cfg := config.Default()
		cfg.Model.SetLocation(dir)
		cfg.Model.AllowOutsidePaths = allow
		cfg.Engine.ModelMemory = 50 << 20
		pr, err := probeModel(cfg.Model)
		if !allow {
			if err == nil || !strings.Contains(err.Error(), "ctx-bins[1]") || !strings.Contains(err.Error(), "model.allow_outside_paths") {
				t.Errorf("outside part without allow_outside_paths: %v", err)
			}
			continue
		}
		if err != nil || pr.Outside != 100<<20 {
			t.Fatalf("probe: %+v, %v", pr, err)
		}
		c := newCatalog(cfg, nil, prometheus.NewRegistry(), zerolog.Nop())
		if c.details[0].Size < 100<<20 {
			t.Errorf("estimate %d bytes, without the outside part", c.details[0].Size)
		}
	}
}
