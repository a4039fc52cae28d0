package qhexrt

import (
	"context"
	"time"

	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/hexagon/slotpool"
	"github.com/hexserve/hexserve/inference"
)

// poolSeqs are a chunked bundle's sequences: the resident cache's CTX
// slots as the shared slotpool.Batcher hands them out (Open, Fork, Grow,
// Release, SaveSeqKV, RestoreSeqKV, Shift: a shifted sequence's slots wrap).
// A Step is one prefill-graph call whose
// rows carry their own tokens, cos/sin (from each row's position) and mask
// row (its sequence's slots, then its run's earlier rows in the window),
// or, for a single row when the runners' one policy says so, one decode
// call.
type poolSeqs struct {
	slotpool.Batcher
	r      *Runner
	kv     slotpool.KV
	policy plan.Policy
	opts   []plan.Option // a one-row Step's: decode, prefill
}

func newPoolSeqs(r *Runner) *poolSeqs {
	p := &poolSeqs{r: r, kv: r.kvOf(r.kvK, r.kvV, r.spec.ctx),
		opts: []plan.Option{{Graphs: []string{r.spec.key(roleDecode)}}, {Graphs: []string{r.spec.key(rolePrefill)}}}}
	p.Batcher = slotpool.NewBatcher(&r.life, r.spec.ctx, slotpool.MaxSequences, func() slotpool.KV { return p.kv })
	return p
}

func (p *poolSeqs) limits() inference.BatchLimits { return slotpool.Limits(p.r.window, p.r.spec.ctx) }

func (p *poolSeqs) cost(rows int) time.Duration {
	if rows == 1 {
		return p.r.cost(p.opts[p.policy.Best(&p.r.stats, p.opts)])
	}
	return p.r.cost(p.opts[1])
}

func (p *poolSeqs) check(runs []inference.Run) error {
	return p.Pool.Check(runs, p.r.window, p.r.spec.vocab)
}

func (p *poolSeqs) rows(id inference.SeqID) (slotpool.KV, func(int) int, int, bool) {
	s := p.Pool.Seq(id)
	if s == nil {
		return slotpool.KV{}, nil, 0, false
	}
	return p.kv, s.Slot, s.N, true
}

func (p *poolSeqs) restoredTokens(inference.SeqID, []int32) {}
func (p *poolSeqs) unbind()                                 {}
func (p *poolSeqs) reset() error                            { return nil }
func (p *poolSeqs) close()                                  {}

// step runs one prefill call over all runs, or for a single row the graph
// the policy chooses (by measured cost, giving an unmeasured or idle graph a
// call).
func (p *poolSeqs) step(_ context.Context, runs []inference.Run) ([]inference.Rows, error) {
	r := p.r
	g := r.graphs[rolePrefill]
	if len(runs) == 1 && len(runs[0].Tokens) == 1 && p.policy.Choose(&r.stats, p.opts) == 0 {
		g = r.graphs[roleDecode]
	}
	if err := p.call(g, runs); err != nil {
		return nil, err
	}
	out := make([]inference.Rows, len(runs))
	o := 0
	ys := g.y.Elem.Size() * r.spec.hidden
	for i, run := range runs {
		n := len(run.Tokens)
		out[i] = &lazyRows{r: r, step: r.steps, e: g.y.Elem, y: g.y.B[o*ys : (o+n)*ys], n: n}
		p.Pool.Seq(run.Seq).N = run.Start + n
		o += n
	}
	return out, nil
}

// call runs g once over runs' rows: tokens, cos/sin per row position, mask
// rows over the pool, then each run's new K/V copied to its slots.
func (p *poolSeqs) call(g *graphIO, runs []inference.Run) error {
	r := p.r
	st := &r.stats
	t0 := time.Now()
	o := 0
	for _, run := range runs {
		if err := r.putRows(g, o, run.Tokens, run.Start); err != nil {
			return err
		}
		o += len(run.Tokens)
	}
	r.padRows(g, o)
	t1 := time.Now()
	// Every row opens its sequence's slots of rows [0, Start), then (prefill
	// graph) its run's earlier rows in the window, causally; padding rows
	// attend to nothing. The decode graph's row attends to itself.
	w, block := r.spec.ctx, -1
	if g.role == rolePrefill {
		w, block = r.spec.ctx+g.rows, r.spec.ctx
	}
	p.Pool.WriteMask(g.masks, g.mask.B, runs, g.rows, w, block)
	t2 := time.Now()
	st.Embed += t1.Sub(t0)
	st.Mask += t2.Sub(t1)
	if err := r.execute(g); err != nil {
		return err
	}
	t3 := time.Now()
	o = 0
	for _, run := range runs {
		// A run's rows are its own, in one span of slots or, round a
		// shifted sequence's ring, two.
		p.Pool.Seq(run.Seq).Spans(run.Start, run.Start+len(run.Tokens), func(slot, row, k int) {
			copyKV(p.kv, slot, g.kvNew, o+row-run.Start, k)
		})
		o += len(run.Tokens)
	}
	st.KVCopy += time.Since(t3)
	return nil
}
