package qhexrt

import (
	"context"
	"fmt"
	"time"

	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/inference"
)

// Speculative decoding: a verify call runs the prefill graph once over the
// KV cache, at start = valid, on the last accepted token and the draft; the
// lm-head, a separate graph, then runs row by row as the engine asks, so a
// rejected draft token stops it. Only chunked bundles, whose prefill graph
// takes past KV, can do this: a qhexrt prefill always starts at position 0.

var _ inference.Verifier = (*Runner)(nil)

// MaxVerify is the most tokens one Verify call may evaluate over rows
// [0, valid): a prefill window, within the context. It is 0 on qhexrt
// bundles, which decode plainly.
func (r *Runner) MaxVerify(valid int) int {
	if r.spec.contract != ContractChunked || valid <= 0 {
		return 0
	}
	return max(0, min(r.window, r.spec.ctx-valid))
}

// Verify makes rows [valid, len(seq)) hold seq[valid:] with one prefill
// graph call and returns their logits, computed lazily (see inference.Verifier).
func (r *Runner) Verify(ctx context.Context, seq []int32, valid int) (inference.Rows, error) {
	if err := r.check(seq); err != nil {
		return nil, err
	}
	n := len(seq) - valid
	switch {
	case valid > r.valid:
		return nil, fmt.Errorf("qhexrt: verify from row %d beyond the %d valid rows", valid, r.valid)
	case n < 1 || n > r.MaxVerify(valid):
		return nil, fmt.Errorf("qhexrt: cannot verify %d tokens after %d rows (at most %d)", n, valid, r.MaxVerify(valid))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !r.fixedCosts {
		var m [nRoles]bool
		r.plan.Costs, m = r.measuredCosts()
		r.plan.DecodeMeasured = m[roleDecode]
	}
	r.valid, r.next, r.contFrom = valid, 0, 0
	r.calls++
	defer r.publish()
	if err := r.run(seq, plan.Step{Prefill: true, Start: valid, N: n}, false, nil, nil); err != nil {
		return nil, err
	}
	// The engine continues after any accepted prefix: an Eval of m tokens
	// with valid m-1, for m in [valid+2, len(seq)+1], is a decode step.
	r.contFrom, r.next = valid+2, len(seq)+1
	r.rows = verifyRows{r: r, n: n, call: r.calls}
	return &r.rows, nil
}

// Costs estimates one Verify call of k tokens (a prefill window and k
// lm-head rows) and one decode step with its lm-head, from measured times.
func (r *Runner) Costs(k int) (verify, decode time.Duration) {
	c, _ := r.measuredCosts()
	return c.Prefill + time.Duration(k)*c.LMHead, c.Decode + c.LMHead
}

// verifyRows are a Verify call's rows; the prefill graph's y holds them
// until the next graph call.
type verifyRows struct {
	r    *Runner
	n    int
	next int    // rows are asked for in order
	call uint64 // the Runner's call count when they were made
}

func (v *verifyRows) Len() int { return v.n }

// Logits runs the lm-head on row i.
func (v *verifyRows) Logits(ctx context.Context, i int) (inference.Logits, error) {
	r := v.r
	switch {
	case r.calls != v.call:
		return inference.Logits{}, fmt.Errorf("qhexrt: verify rows read after a later call")
	case i < v.next || i >= v.n:
		return inference.Logits{}, fmt.Errorf("qhexrt: verify row %d out of order (next %d of %d)", i, v.next, v.n)
	}
	if err := ctx.Err(); err != nil {
		return inference.Logits{}, err
	}
	v.next = i + 1
	defer r.publish()
	if err := r.lmhead(r.graphs[rolePrefill], i); err != nil {
		return inference.Logits{}, err
	}
	return r.graphs[roleLMHead].logits, nil
}
