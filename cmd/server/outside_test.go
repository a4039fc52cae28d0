//go:build !nomkmodel

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/hexagon/genie"
	"github.com/hexserve/hexserve/hexagon/genie/geniesim"
	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/internal/testjson"
)

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
