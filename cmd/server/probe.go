package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/hexagon/genie"
	"github.com/hexserve/hexserve/hexagon/pte"
	"github.com/hexserve/hexserve/hexagon/qhexrt/bundle"
	"github.com/hexserve/hexserve/internal/modelfile"
)

// generatedKey is tinyllama.GeneratedKey (the serving build does not link
// the test-model writers; a test checks they agree).
const generatedKey = "hexserve_generated_weights"

// modelProbe is what a model's files tell without loading it.
type modelProbe struct {
	// ContextLen is the tokens the KV cache holds, as the loaded model's
	// inference.ModelInfo.ContextLen reports it; 0: the files do not say.
	ContextLen int
	Family     string // the manifest's model.family; "" unknown
	// Generated is the files' own note that the weights are generated
	// (generatedKey, written by hexserve mkmodel); "" for real
	// weights.
	Generated string
	Shape     shape // what its config says of its sizes
	// Outside is the bytes of the files the model names outside its
	// folder (model.allow_outside_paths): its estimate counts them.
	Outside int64
}

// probeModel reads what can be known of model m at start, cheaply: a
// bundle's manifest (at most modelfile.MaxConfig, the files it names
// only stat'ed), or a .pte's program flatbuffer (mapped, not read; its
// decode is bounded by the pte reader's budget). No QNN runtime, no graph.
// A bundle's context is params.max_ctx (qhexrt's ContextLen); a .pte's is
// get_max_context_len − 1, executorch's CL − 1 (the mask's columns are CL =
// get_max_context_len in a static-llama export; the load reads them from
// the graphs and replaces this).
func probeModel(m config.Model) (modelProbe, error) {
	kind, file, err := locateModel(m.Location())
	if err != nil {
		return modelProbe{}, err
	}
	return kind.probe(m, file)
}

// probeBundle reads a bundle's manifest; the device's arch is unknown without the runtime
// (bundle.ReadUnknownArch).
func probeBundle(m config.Model, file string) (modelProbe, error) {
	b, err := bundle.ReadUnknownArch(file, m.Overrides)
	if err != nil {
		return modelProbe{}, err
	}
	return modelProbe{ContextLen: b.Manifest.Params.MaxCtx, Family: b.Manifest.Model.Family, Generated: bundleGenerated(b.Manifest),
		Shape: bundleShape(b, bundleRoot(file))}, nil
}

// bundleGenerated is the manifest's note of generated weights: the
// "mkmodel" note's generatedKey, or, in bundles written before
// it, the note itself ("generator": "hexserve mkmodel").
func bundleGenerated(m *bundle.Manifest) string {
	var note map[string]any
	if json.Unmarshal(m.Extra["mkmodel"], &note) != nil {
		return ""
	}
	if s, ok := note[generatedKey].(string); ok && s != "" {
		return s
	}
	if note["generator"] == "hexserve mkmodel" {
		return "hexserve mkmodel"
	}
	return ""
}

// probePTE reads a .pte's get_max_context_len.
func probePTE(_ config.Model, file string) (modelProbe, error) {
	f, err := pte.Open(file)
	if err != nil {
		return modelProbe{}, err
	}
	defer f.Close()
	v := f.Metadata["get_max_context_len"]
	if len(v) != 1 || v[0].Kind != pte.KindInt {
		return modelProbe{}, errors.New("pte: " + file + ": no get_max_context_len metadata")
	}
	if cl := v[0].Int; cl < 2 || cl > modelfile.MaxContext+1 {
		return modelProbe{}, fmt.Errorf("pte: %s: get_max_context_len %d is out of range", file, cl)
	}
	pr := modelProbe{ContextLen: int(v[0].Int) - 1, Shape: pteShape(f)}
	if g := f.Metadata[generatedKey]; len(g) == 1 && g[0].Kind == pte.KindString {
		pr.Generated = g[0].String
	}
	pr.Family, err = pteFamily(file)
	return pr, err
}

// pteFamily is the family of a .pte from the config.json beside it (ExecuTorch's metadata is the
// same for every model): "" without one, an error naming the reason for a family not served.
func pteFamily(file string) (string, error) {
	path := filepath.Join(filepath.Dir(file), "config.json")
	var hf struct {
		ModelType     string   `json:"model_type"`
		Architectures []string `json:"architectures"`
	}
	if err := modelfile.ReadJSON(path, &hf); errors.Is(err, os.ErrNotExist) {
		return "", nil // no config.json: an ExecuTorch export of Llama as before
	} else if err != nil {
		return "", fmt.Errorf("pte: %w", err)
	}
	family, err := genie.FamilyOf(hf.ModelType, hf.Architectures)
	if err != nil {
		return "", fmt.Errorf("pte: %s: model_type %q: %w", path, hf.ModelType, err)
	}
	return family, nil
}
