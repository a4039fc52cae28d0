package genie

import (
	"context"
	"errors"

	"github.com/hexserve/hexserve/inference"
)

// Eval satisfies inference.Model until the engine's one-path change removes it: an engine over a
// Batcher never calls it.
func (r *Runner) Eval(context.Context, []int32, int) (inference.Logits, int, error) {
	return inference.Logits{}, 0, errors.New("genie: the runner serves through inference.Batcher only")
}
