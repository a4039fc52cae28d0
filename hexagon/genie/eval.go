package genie

import (
	"context"
	"errors"

	"github.com/hexserve/hexserve/inference"
)

// Eval is the single-sequence path as a wrapper over the Batcher (one sequence holding the whole
// pool), until the engine's one-path change removes it from inference.Model.
func (r *Runner) Eval(ctx context.Context, seq []int32, valid int) (inference.Logits, int, error) {
	if len(seq) == 0 {
		return inference.Logits{}, 0, errors.New("genie: empty sequence")
	}
	if r.evalSeq == 0 {
		id, err := r.Open(r.slots)
		if err != nil {
			return inference.Logits{}, 0, err
		}
		r.evalSeq = id + 1
	}
	id, w := r.evalSeq-1, r.BatchLimits().Rows
	from := min(max(valid, 0), r.pool.Seq(id).N, len(seq)-1)
	var rows []inference.Rows
	for at := from; at < len(seq); at += w {
		var err error
		if rows, err = r.Step(ctx, []inference.Run{{Seq: id, Start: at, Tokens: seq[at:min(at+w, len(seq))]}}); err != nil {
			r.pool.Seq(id).N = 0
			return inference.Logits{}, 0, err
		}
	}
	l, err := rows[0].Logits(ctx, rows[0].Len()-1)
	return l, from, err
}

// dropEval releases Eval's sequence when the Batcher path opens one (its rows are then lost).
func (r *Runner) dropEval() {
	if r.evalSeq != 0 {
		r.pool.Release(r.evalSeq - 1)
		r.evalSeq = 0
	}
}
