package modelfile

import (
	"fmt"
	"path/filepath"
)

// Folder is a model's folder and the path rule for the files its config
// names (a Genie bundle's tokenizer, extensions and parts, a manifest's
// artifacts): relative to the folder and inside it, unless AllowOutside
// (model.allow_outside_paths), when a file outside counts against
// engine.model_memory (Outside). Symbolic links inside the folder are
// followed: they are the folder owner's choice, not the config's.
type Folder struct {
	Dir          string
	AllowOutside bool
}

// Resolve returns the path of p, named by the config's field: relative
// paths are in the folder. outside reports a path outside it, which only
// AllowOutside accepts.
func (f Folder) Resolve(field, p string) (path string, outside bool, err error) {
	if p == "" {
		return "", false, fmt.Errorf("%s: empty path", field)
	}
	if filepath.IsAbs(p) {
		path = filepath.Clean(p)
	} else {
		path = filepath.Join(f.Dir, p)
	}
	rel, err := filepath.Rel(f.Dir, path)
	outside = err != nil || !filepath.IsLocal(rel)
	if outside && !f.AllowOutside {
		return "", true, fmt.Errorf("%s: %q is outside the model's folder %s (paths are relative to it, without \"..\"; set model.allow_outside_paths to allow it)", field, p, f.Dir)
	}
	return path, outside, nil
}
