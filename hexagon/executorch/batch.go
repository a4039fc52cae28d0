package executorch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/hexagon/slotpool"
	"github.com/hexserve/hexserve/inference"
)

// The Runner as an inference.Batcher: the shared caches become a pool of
// the decode layout's CL − 1 slots (those from CL − AR on only through
// kv_forward, see tail). A sequence owns one contiguous range
// of slots (its reserve) and, when forked, also reads its parent's slots of
// the shared rows; every range of a sequence lies above the ones it reads,
// so a row's attended slots come in position order, which keeps its
// logits bit-identical whatever the neighbours (attention sums its
// columns in slot order). A Step is one prefill_forward call whose rows
// carry their own input_pos and a mask row opening only their sequence's
// slots (and its earlier rows in the call), or, for a single row when
// measured costs say so, one kv_forward call.
var (
	_ inference.Batcher          = (*Runner)(nil)
	_ inference.SeqKVSnapshotter = (*Runner)(nil)
)

// BatchLimits: slotpool.Limits of AR rows per step and the decode
// layout's CL − 1 slots (the whole window; slots from CL − AR on are
// beyond prefill_forward's view: see tail). On a quantized (uint8 or
// uint16) cache a row reads its call's earlier rows at float32 and older
// rows from the cache, so its bits depend on where its chunk starts: the
// limits state the prefill window (AR, one graph of fixed rows in a real
// export) as the alignment of prompt runs (inference.BatchLimits.Align).
func (r *Runner) BatchLimits() inference.BatchLimits {
	l := slotpool.Limits(r.pre.ar, r.maxS)
	if r.pre.kT.DataType != qnn.Float32 {
		l.Align = l.Rows
	}
	return l
}

// OpenCheap opens a sequence below the tail when reserve fits there (see
// inference.CheapOpener): the engine evicts retained sequences rather than
// send every step through kv_forward.
func (r *Runner) OpenCheap(reserve int) (inference.SeqID, error) {
	if S := r.cl - r.pre.ar; reserve <= S {
		return r.OpenBelow(reserve, S)
	}
	return r.Open(reserve)
}

// tail reports whether a row of runs, or a committed row of any sequence,
// lives in a slot prefill_forward cannot see (CL − AR on): then the step
// goes through kv_forward, and the caches stay in its layout (re-striding
// to prefill_forward's would drop those slots). First-fit allocation keeps
// the tail for sequences that need the whole window.
func (r *Runner) tail(runs []inference.Run) bool {
	S := r.cl - r.pre.ar
	if r.Pool.Beyond(S) {
		return true
	}
	for _, run := range runs {
		if r.Pool.Seq(run.Seq).Slot(run.Start+len(run.Tokens)-1) >= S {
			return true
		}
	}
	return false
}

// StepCost is the cheaper of one prefill_forward call and rows kv_forward
// calls, each priced by its recent measured time (GraphStats.Recent, all
// shards: the hardware's cost, which follows load and latency changes), with
// a re-striding when the caches are in the other graph's layout.
func (r *Runner) StepCost(rows int) time.Duration {
	return min(r.prefillStepCost(), r.decodeStepCost(rows))
}

func (r *Runner) restrideCost() time.Duration {
	if r.stats.Restrides == 0 {
		return 0
	}
	return r.stats.Restride / time.Duration(r.stats.Restrides)
}

// callCost is one call of m (all shards) from its recent measured times;
// before any, 8 ms for prefill_forward and decode as dear as prefill.
func (r *Runner) callCost(m *method) time.Duration {
	if g := r.stats.Graphs[m.method]; g.Calls > g.Failed {
		return g.Recent * time.Duration(m.shards)
	}
	if m == r.dec {
		return r.callCost(r.pre)
	}
	return 8 * time.Millisecond
}

// prefillStepCost prices one prefill_forward call.
func (r *Runner) prefillStepCost() time.Duration {
	pre := r.callCost(r.pre)
	if r.kc.Stride != r.cl-r.pre.ar {
		pre += r.restrideCost()
	}
	return pre
}

// decodeStepCost prices rows kv_forward calls.
func (r *Runner) decodeStepCost(rows int) time.Duration {
	d := time.Duration(rows) * r.callCost(r.dec)
	if r.kc.Stride != r.cl-r.dec.ar {
		d += r.restrideCost()
	}
	return d
}

// options are a Step's candidate calls for the policy, in r.opts: rows kv_forward calls, then,
// unless a row lives in the tail, one prefill_forward call; each with a re-striding when the
// caches are in the other graph's layout.
func (r *Runner) options(rows int, runs []inference.Run) []plan.Option {
	restride := func(m *method) time.Duration {
		if r.kc.Stride != r.cl-m.ar {
			return r.restrideCost()
		}
		return 0
	}
	if r.names[0] == nil {
		r.names = [2][]string{{r.dec.method}, {r.pre.method}}
	}
	r.opts = append(r.opts[:0], plan.Option{Graphs: r.names[0], Execs: r.dec.shards, Calls: rows, Extra: restride(r.dec)})
	if !r.tail(runs) {
		r.opts = append(r.opts, plan.Option{Graphs: r.names[1], Execs: r.pre.shards, Extra: restride(r.pre)})
	}
	return r.opts
}

// Step evaluates runs in one prefill_forward call, or row by row through
// kv_forward, as the runners' one policy chooses (plan.Policy: by measured
// cost, giving an unmeasured or idle graph a call where it takes one).
func (r *Runner) Step(ctx context.Context, runs []inference.Run) ([]inference.Rows, error) {
	if err := r.checkRuns(runs); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	defer r.publish()
	rows := 0
	for _, run := range runs {
		rows += len(run.Tokens)
	}
	m := r.pre
	switch opts := r.options(rows, runs); {
	case r.whole(runs) || r.policy.Choose(&r.stats, opts) == 1:
	case rows == 1:
		m = r.dec // one call: its output buffer holds the row
	default:
		// One row per kv_forward call: the next call overwrites the output buffer.
		return r.RowByRow(ctx, runs, r.dec.logits, r.dec.vocab, func(one inference.Run) error {
			return r.runBatch(r.dec, []inference.Run{one})
		})
	}
	if err := r.runBatch(m, runs); err != nil {
		return nil, err
	}
	return r.Commit(runs, m.logits, m.vocab), nil
}

// whole reports whether runs must go through prefill_forward: on a
// quantized cache (BatchLimits.Align > 1) a run of several rows read row by
// row through kv_forward would read its earlier rows from the cache instead
// of at float32, so its bits would follow the measured costs (and the load).
// Rows in the tail go through kv_forward whatever the cache.
func (r *Runner) whole(runs []inference.Run) bool {
	if r.pre.kT.DataType == qnn.Float32 || r.tail(runs) {
		return false
	}
	for _, run := range runs {
		if len(run.Tokens) > 1 {
			return true
		}
	}
	return false
}

// checkRuns validates a Step.
func (r *Runner) checkRuns(runs []inference.Run) error {
	if err := r.life.Check(); err != nil {
		return err
	}
	if err := r.Pool.Check(runs, r.pre.ar, r.vocab); err != nil {
		return fmt.Errorf("executorch: %w", err)
	}
	return nil
}

// runBatch is run for rows of several sequences: tokens and positions per
// row, the mask per row, and each run's new entries copied to its slots.
func (r *Runner) runBatch(m *method, runs []inference.Run) error {
	st := &r.stats
	t0 := time.Now()
	if s := r.cl - m.ar; s != r.kc.Stride {
		r.sync()
		t0 = time.Now()
		r.valid = r.Pool.High() // restride keeps the pool's slots
		r.restride(s)
		st.Restrides++
		st.Restride += time.Since(t0)
		t0 = time.Now()
	}
	toks := r.batchToks[:0]
	o := 0
	for _, run := range runs {
		toks = append(toks, run.Tokens...)
		for i := range run.Tokens {
			m.posBuf[o] = int32(run.Start + i)
			o++
		}
	}
	r.batchToks = toks
	// Padding rows repeat the last row's position; their mask rows are
	// closed, so the graph skips them and their outputs are never read.
	for i := o; i < m.ar; i++ {
		m.posBuf[i] = m.posBuf[o-1]
	}
	if err := errors.Join(m.tokE.PutInts(m.vals[m.tokens].Bytes(), toks), m.posE.PutInts(m.vals[m.pos].Bytes(), m.posBuf)); err != nil {
		return fmt.Errorf("executorch: %s: %w", m.method, err)
	}
	t1 := time.Now()
	r.writeBatchMask(m, runs)
	t2 := time.Now()
	st.Embed += t1.Sub(t0)
	st.Mask += t2.Sub(t1)
	if err := r.runSteps(m, func(layers []int) { r.copyRuns(m, layers, runs) }); err != nil {
		return err
	}
	return nil
}

// writeBatchMask writes every row's mask: its sequence's slots of rows
// [0, Start), and, causally, its run's earlier rows in the new block.
// Padding rows attend to nothing, as Genie masks them (docs/executorch.md):
// the graph skips them and their outputs are never read.
func (r *Runner) writeBatchMask(m *method, runs []inference.Run) {
	r.Pool.WriteMask(m.masks, m.vals[m.mask].Bytes(), runs, m.ar, m.cl, m.cl-m.ar)
}

// copyRuns queues the copies of layers' new entries of each run into its
// slots (contiguous: a run's rows are all its own); runSteps starts them.
func (r *Runner) copyRuns(m *method, layers []int, runs []inference.Run) {
	q := r.queued[:0]
	o := 0
	for _, run := range runs {
		start := r.Pool.Seq(run.Seq).Slot(run.Start)
		for _, l := range layers {
			q = append(q, slotpool.Write{Layer: l, Slot: start, From: o, N: len(run.Tokens), K: m.kOut[l], V: m.vOut[l], Rows: m.ar, Stride: r.kc.Stride})
		}
		o += len(run.Tokens)
	}
	r.kc.Queue(q...)
	r.queued = q
}
