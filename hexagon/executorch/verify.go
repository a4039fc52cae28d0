package executorch

import (
	"context"
	"fmt"
	"time"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/inference"
)

// MaxVerify is the most tokens one prefill_forward call may evaluate after
// valid committed slots: AR, within start + n ≤ CL − AR.
func (r *Runner) MaxVerify(valid int) int {
	n := min(r.pre.ar, r.cl-r.pre.ar-valid)
	if n < 2 {
		return 0
	}
	return n
}

// Verify evaluates seq[valid:] (the last accepted token and a draft) in one
// prefill_forward call over the cache. Every row's entries go to their
// slots, but only rows the next call's valid keeps count: the mask opens
// slots [0, start) of each call, never ones past it.
func (r *Runner) Verify(ctx context.Context, seq []int32, valid int) (inference.Rows, error) {
	if err := r.check(seq); err != nil {
		return nil, err
	}
	valid = min(max(valid, 0), r.valid)
	k := len(seq) - valid
	if k < 1 || k > r.MaxVerify(valid) {
		return nil, fmt.Errorf("executorch: verify of %d tokens after %d: at most %d fit", k, valid, r.MaxVerify(valid))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.valid = valid
	defer r.publish()
	if err := r.run(r.pre, seq[valid:], valid); err != nil {
		return nil, err
	}
	return rows{r.pre, k}, nil
}

// rows are the logits rows of one prefill call (all computed by it).
type rows struct {
	m *method
	n int
}

func (w rows) Len() int { return w.n }

func (w rows) Logits(ctx context.Context, i int) (inference.Logits, error) {
	if i < 0 || i >= w.n {
		return inference.Logits{}, fmt.Errorf("executorch: row %d of %d", i, w.n)
	}
	return graphio.Row(w.m.logits, i, w.m.vocab), nil
}

// Costs are the mean measured times of one prefill_forward call (any k up
// to AR costs one call) and one kv_forward step, over all shards.
func (r *Runner) Costs(k int) (verify, decode time.Duration) {
	s := r.Stats()
	shards := time.Duration(len(r.pre.calls))
	verify, decode = s.Graphs[r.pre.method].Mean()*shards, s.Graphs[r.dec.method].Mean()*shards
	if verify == 0 {
		verify = 8 * time.Millisecond
	}
	if decode == 0 {
		decode = verify
	}
	return verify, decode
}
