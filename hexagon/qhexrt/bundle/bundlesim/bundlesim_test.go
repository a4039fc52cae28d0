package bundlesim

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/qhexrt/bundle"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// TestWriteReads writes the tiny model in both layouts and reads the result
// back with hexagon/qhexrt/bundle: the settings, the context files and the note
// are what the options asked for.
func TestWriteReads(t *testing.T) {
	cfg, err := tinyllama.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	tensors := bundle.DefaultTensors()
	tensors.X = "embeds"
	for _, c := range []struct {
		shared   bool
		contract string
		bins     []string
	}{
		{false, bundle.ContractQHexRT, []string{"prefill.bin", "decode.bin", "lmhead.bin"}},
		{true, bundle.ContractChunked, []string{"model.bin", "lmhead.bin"}},
	} {
		dir := filepath.Join(t.TempDir(), "v79")
		o := Options{Config: cfg, Source: "preset tiny", Name: "t", Arch: "v79", Contract: c.contract,
			Mask: bundle.MaskU16, Ctx: 64, PrefillChunk: 16, Weights: simfile.WeightInt8, IO: simfile.F16,
			KV: simfile.F16, Shared: c.shared, Tensors: tensors, Note: map[string]any{"io": "f16"},
			Tokenizer: filepath.Join("..", "..", "..", "..", "testdata", "tokenizer", "llama3.2", "tokenizer.json")}
		if err := Write(dir, o); err != nil {
			t.Fatal(err)
		}
		b, err := bundle.Read(dir, "v79")
		if err != nil {
			t.Fatal(err)
		}
		s := b.Settings
		if s.Contract != c.contract || s.Mask != bundle.MaskU16 || s.PrefillWindow != 16 || b.Manifest.Params.MaxCtx != 64 ||
			s.Tensors.X != "embeds" || b.Manifest.Model.Name != "t" {
			t.Errorf("shared=%v: settings %+v, params %+v", c.shared, s, b.Manifest.Params)
		}
		for _, f := range append(c.bins, "embed_f16.bin", "tokenizer.json", "LICENSE", "NOTICE") {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("shared=%v: %v", c.shared, err)
			}
		}
		var note map[string]any
		if err := json.Unmarshal(b.Manifest.Extra["mkmodel"], &note); err != nil || note["io"] != "f16" || note["source"] != "preset tiny" {
			t.Errorf("shared=%v: mkmodel note %v (%v)", c.shared, note, err)
		}
	}
	if err := Write(t.TempDir(), Options{Config: cfg, Contract: "x"}); err == nil {
		t.Error("an unknown contract was accepted")
	}
}
