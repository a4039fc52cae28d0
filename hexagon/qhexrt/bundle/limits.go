package bundle

import (
	"fmt"

	"github.com/hexserve/hexserve/internal/modelfile"
)

// checkLimits refuses params outside the sane limits.
func checkLimits(p Params) error {
	for _, f := range []struct {
		key    string
		v, max int
	}{{"params.hidden", p.Hidden, modelfile.MaxHidden}, {"params.vocab", p.Vocab, modelfile.MaxVocab}, {"params.n_layers", p.NLayers, modelfile.MaxLayers},
		{"params.max_ctx", p.MaxCtx, modelfile.MaxContext}, {"params.kv_dim", p.KVDim, modelfile.MaxHidden}, {"params.head_dim", p.HeadDim, modelfile.MaxHeadDim}} {
		if f.v <= 0 {
			return fmt.Errorf("%s must be positive, got %d", f.key, f.v)
		}
		if f.v > f.max {
			return fmt.Errorf("%s is %d, more than hexserve supports (%d)", f.key, f.v, f.max)
		}
	}
	return nil
}

// LocalFile resolves rel, an artifact path from a manifest, against dir and
// checks it is a regular file of at most max bytes (<= 0: any). rel must
// stay inside dir (modelfile.Folder's rule, without
// model.allow_outside_paths), so a manifest cannot make the server open
// /etc/passwd.
func LocalFile(dir, key, rel string, max int64) (string, int64, error) {
	p, _, err := modelfile.Folder{Dir: dir}.Resolve(key, rel)
	if err != nil {
		return "", 0, err
	}
	size, err := modelfile.Stat(p, max)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %w", key, err)
	}
	return p, size, nil
}
