package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hexserve/hexserve/hexagon/genie"
	"github.com/hexserve/hexserve/hexagon/qhexrt"
	"github.com/hexserve/hexserve/hexagon/qhexrt/bundle"
	"github.com/hexserve/hexserve/internal/modelfile"
)

// modelKinds is what a model path may name, for the errors below.
const modelKinds = "want a bundle folder, a manifest, a `.pte` or a Genie bundle"

// errNotModel reports a path that names no model of any kind.
var errNotModel = errors.New("not a model: " + modelKinds)

// checkModelPath tells, before anything loads, whether path can name a
// model, with one clear error for the common mistakes: a path that does not
// exist, a tokenizer.json or any other file given as the model, a folder
// that holds none of the kinds (the error lists what was looked for). The
// readers of each kind still check the model itself.
func checkModelPath(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("model %s: no such file or folder (%s)", path, modelKinds)
		}
		return fmt.Errorf("model %s: %w", path, err)
	}
	if !st.IsDir() {
		if !st.Mode().IsRegular() {
			return nil // a device, a FIFO: the bundle reader says what it is, without opening it
		}
		if modelFile(path, st.Size()) {
			return nil
		}
		if filepath.Base(path) == "tokenizer.json" {
			return fmt.Errorf("model %s: %w (this is a tokenizer: name the folder or manifest beside it)", path, errNotModel)
		}
		return fmt.Errorf("model %s: %w", path, errNotModel)
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return fmt.Errorf("model %s: %w", path, err)
	}
	for _, e := range ents {
		name := e.Name()
		switch {
		case name == bundle.ManifestName, (e.IsDir() || e.Type()&fs.ModeSymlink != 0) && qhexrt.PlausibleArch(name),
			strings.HasSuffix(name, ".pte"), name == genie.ConfigFile:
			return nil
		}
	}
	return fmt.Errorf("model %s: not a model: the folder holds none of %s, an arch folder (v79/, …) with one, a .pte file, "+
		"or a Genie bundle's %s (%s)", path, bundle.ManifestName, genie.ConfigFile, modelKinds)
}

// modelFile reports whether the regular file path is a model file: a .pte
// (ExecuTorch's ET12 identifier), a Genie bundle's genie_config.json or a
// bundle manifest (a JSON object with schema_version).
func modelFile(path string, size int64) bool {
	if isPTE(path) || filepath.Base(path) == genie.ConfigFile {
		return true
	}
	if size > modelfile.MaxConfig {
		return false // a tokenizer.json, a context binary, ...
	}
	data, err := modelfile.ReadFile(path, modelfile.MaxConfig)
	if err != nil || !bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
		return false
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal(data, &keys) != nil {
		return false
	}
	_, manifest := keys["schema_version"]
	return manifest
}
