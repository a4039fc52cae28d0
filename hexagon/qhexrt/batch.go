package qhexrt

import (
	"context"
	"fmt"
	"time"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/hexagon/slotpool"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/sample"
)

// The Runner as an inference.Batcher. Its sequences' KV rows are kept by
// one of two types, chosen at Open by the bundle's contract:
//
//   - poolSeqs (chunked bundles): one resident cache whose CTX slots the
//     shared slotpool.Batcher hands out, as the Genie and .pte runners do.
//   - kvSets (QHexRT-contract bundles, whose prefill graph starts at 0 and
//     has no past inputs): a KV buffer set per open sequence, each with a
//     decode call bound to it.
//
// The Runner keeps what both share: how a call's inputs are written
// (embeddings, cos/sin, masks), the K/V copy of a call's new rows, and the
// lm-head, which runs when the engine asks for a row's logits.
var (
	_ inference.Batcher          = (*Runner)(nil)
	_ inference.SeqKVSnapshotter = (*Runner)(nil)
	_ inference.ContextShifter   = (*Runner)(nil)
)

// seqKeeper keeps the open sequences' KV rows and runs a Step on them.
type seqKeeper interface {
	Open(reserve int) (inference.SeqID, error)
	Fork(parent inference.SeqID, rows, reserve int) (inference.SeqID, error)
	Grow(id inference.SeqID, rows int) error
	Release(id inference.SeqID)
	SaveSeqKV(id inference.SeqID, from, to int, dst []byte) error
	RestoreSeqKV(id inference.SeqID, from int, src []byte) error
	Shift(id inference.SeqID, keep, n int) error

	limits() inference.BatchLimits
	cost(rows int) time.Duration
	check(runs []inference.Run) error
	step(ctx context.Context, runs []inference.Run) ([]inference.Rows, error)
	// rows is where id's committed rows live: the cache, the slot of a
	// row, and how many (0, false: unknown).
	rows(id inference.SeqID) (kv slotpool.KV, slot func(int) int, n int, ok bool)
	// restoredTokens records the tokens of id's restored rows
	// (inference.SeqTokenRecorder).
	restoredTokens(id inference.SeqID, toks []int32)
	// unbind closes the calls bound to sequences' caches (before a reload
	// or Close closes the contexts); reset, after a reload, forgets every
	// sequence's rows (their Steps fail through the Runner's lost) and binds
	// them again; close frees the caches.
	unbind()
	reset() error
	close()
}

// newKeeper is the bundle's contract's seqKeeper.
func (r *Runner) newKeeper() seqKeeper {
	if r.spec.contract == ContractChunked {
		return newPoolSeqs(r)
	}
	return newKVSets(r)
}

// Open starts a sequence with reserve rows.
func (r *Runner) Open(reserve int) (inference.SeqID, error) {
	id, err := r.seqs.Open(reserve)
	r.last = max(r.last, id)
	return id, err
}

// Fork starts a sequence on parent's rows [0, rows): shared slots on a
// chunked bundle, a copy into a KV set of its own otherwise.
func (r *Runner) Fork(parent inference.SeqID, rows, reserve int) (inference.SeqID, error) {
	id, err := r.seqs.Fork(parent, rows, reserve)
	r.last = max(r.last, id)
	return id, err
}

// BatchLimits: on a chunked bundle slotpool.Limits of a prefill window of
// rows per Step and the CTX slots of the cache; on a QHexRT-contract
// bundle as many sequences as KV sets fit the budget (auto: at most
// maxSetSequences), each with CTX slots.
func (r *Runner) BatchLimits() inference.BatchLimits { return r.seqs.limits() }

// StepCost is the measured cost of the calls a Step of rows makes, by the
// runners' one policy (plan.Policy), with Config.Costs for a graph not
// measured yet: on a chunked bundle one prefill call (or for one row the
// cheaper of it and a decode call), on a QHexRT-contract bundle rows
// decode calls (the runs go in turn); and rows lm-head calls.
func (r *Runner) StepCost(rows int) time.Duration {
	return r.seqs.cost(rows) + r.cost(plan.Option{Graphs: []string{r.spec.key(roleLMHead)}, Calls: rows})
}

// cost is o's measured cost, or (a graph not measured yet) its estimate
// from Config.Costs (plan.V79Costs when zero).
func (r *Runner) cost(o plan.Option) time.Duration {
	if c, ok := r.stats.Cost(o); ok {
		return c
	}
	c := r.cfg.Costs
	if c == (plan.Costs{}) {
		c = plan.V79Costs
	}
	est := map[string]time.Duration{r.spec.key(rolePrefill): c.Prefill, r.spec.key(roleDecode): c.Decode, r.spec.key(roleLMHead): c.LMHead}
	var d time.Duration
	for _, name := range o.Graphs {
		d += est[name]
	}
	return d * time.Duration(max(o.Calls, 1))
}

// Step evaluates runs (see inference.Batcher).
func (r *Runner) Step(ctx context.Context, runs []inference.Run) ([]inference.Rows, error) {
	if err := r.life.Check(); err != nil {
		return nil, err
	}
	for _, run := range runs {
		if run.Seq <= r.lost {
			return nil, fmt.Errorf("qhexrt: sequence %d lost its rows in a failed graph call", run.Seq)
		}
		if m := r.spec.maxPositions; m > 0 && run.Start+len(run.Tokens) > m {
			return nil, fmt.Errorf("qhexrt: run to position %d of sequence %d: the model was trained for %d (params.max_position_embeddings)",
				run.Start+len(run.Tokens), run.Seq, m)
		}
	}
	if err := r.seqs.check(runs); err != nil {
		return nil, fmt.Errorf("qhexrt: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.steps++
	r.hid = r.hid[:0]
	defer r.publish()
	return r.seqs.step(ctx, runs)
}

// invalidate is the cache rule after a failed graph call (graphio.
// Lifecycle): no open sequence's rows are valid (their Steps fail from now
// on; the engine releases them).
func (r *Runner) invalidate() { r.lost = r.last }

// SaveSeqKV copies rows [from, to) of sequence id (committed ones) into dst,
// in KVLayout's row format.
func (r *Runner) SaveSeqKV(id inference.SeqID, from, to int, dst []byte) error {
	return r.seqs.SaveSeqKV(id, from, to, dst)
}

// RestoreSeqKV copies saved rows into sequence id from row from (at most
// its committed rows); they are then committed.
func (r *Runner) RestoreSeqKV(id inference.SeqID, from int, src []byte) error {
	return r.seqs.RestoreSeqKV(id, from, src)
}

// putRows writes g's x rows [at, at+len(toks)) for toks and their cos/sin
// rows from position start.
func (r *Runner) putRows(g *graphIO, at int, toks []int32, start int) error {
	xs := g.x.Elem.Size() * r.spec.hidden
	for i, t := range toks {
		if err := r.embed.put(g.x.B[(at+i)*xs:(at+i+1)*xs], t, g.x.Elem, r.convScratch); err != nil {
			return fmt.Errorf("qhexrt: position %d: %w", start+i, err)
		}
	}
	rb := g.rope.rowBytes
	g.rope.rows(g.cos.B[at*rb:], g.sin.B[at*rb:], start, len(toks))
	return nil
}

// padRows zeroes g's x rows from row at on and gives them position 0 (their
// mask rows are closed: the graph skips them).
func (r *Runner) padRows(g *graphIO, at int) {
	clear(g.x.B[at*g.x.Elem.Size()*r.spec.hidden:])
	rb := g.rope.rowBytes
	for i := at; i < g.rows; i++ {
		g.rope.rows(g.cos.B[i*rb:], g.sin.B[i*rb:], 0, 1)
	}
}

// kvOf is a cache of per-layer K and V tensors as a slotpool.KV: rows of
// kv_dim elements, stride rows per layer (CTX for a cache, a graph's rows
// for its new-entry outputs).
func (r *Runner) kvOf(k, v []*graphio.Tensor, stride int) slotpool.KV {
	kv := slotpool.KV{Stride: stride, KS: r.kvSlots, VS: r.kvSlots}
	for i := range k {
		kv.K, kv.V = append(kv.K, k[i].B), append(kv.V, v[i].B)
	}
	return kv
}

// copyKV copies rows [from, from+n) of every layer of src into slots slot…
// of dst.
func copyKV(dst slotpool.KV, slot int, src slotpool.KV, from, n int) {
	for l := range dst.K {
		dst.KS.Copy(dst.K[l], dst.Stride, slot, src.K[l], src.Stride, from, n)
		dst.VS.Copy(dst.V[l], dst.Stride, slot, src.V[l], src.Stride, from, n)
	}
}

// keep appends g's hidden rows [from, to) to hid, in the prefill graph's y
// type.
func (r *Runner) keep(g *graphIO, from, to int) {
	e := r.graphs[rolePrefill].y.Elem
	ys := g.y.Elem.Size() * r.spec.hidden
	if g.y.Elem.Same(e) {
		r.hid = append(r.hid, g.y.B[from*ys:to*ys]...)
		return
	}
	for i := from; i < to; i++ {
		g.y.Elem.Get(r.convScratch, g.y.B[i*ys:(i+1)*ys])
		n := len(r.hid)
		r.hid = append(r.hid, make([]byte, e.Size()*r.spec.hidden)...)
		e.Put(r.hid[n:], r.convScratch)
	}
}

// kept is the Rows of the last n hidden rows kept.
func (r *Runner) kept(n int) *lazyRows {
	e := r.graphs[rolePrefill].y.Elem
	ys := e.Size() * r.spec.hidden
	h := r.hid
	return &lazyRows{r: r, step: r.steps, e: e, y: h[len(h)-n*ys : len(h) : len(h)], n: n}
}

// lazyRows are one run's hidden rows of a Step; the lm-head runs on a row
// when it is asked for.
type lazyRows struct {
	r    *Runner
	step uint64
	e    graphio.Elem
	y    []byte // n rows of hidden elements
	n    int
}

func (w *lazyRows) Len() int { return w.n }

// Logits runs the lm-head on row i; the result is valid until the next
// call on the Runner.
func (w *lazyRows) Logits(ctx context.Context, i int) (sample.Logits, error) {
	r := w.r
	switch {
	case r.steps != w.step:
		return sample.Logits{}, fmt.Errorf("qhexrt: step rows read after a later step")
	case i < 0 || i >= w.n:
		return sample.Logits{}, fmt.Errorf("qhexrt: row %d of %d", i, w.n)
	}
	if err := ctx.Err(); err != nil {
		return sample.Logits{}, err
	}
	defer r.publish()
	ys := len(w.y) / w.n
	if err := r.lmheadOn(w.y[i*ys:(i+1)*ys], w.e); err != nil {
		return sample.Logits{}, err
	}
	return r.graphs[roleLMHead].logits, nil
}

// Grow lets id hold rows rows: on a chunked bundle its own range grows in
// place or moves (its cache entries copied); a KV set always holds the
// context.
func (r *Runner) Grow(id inference.SeqID, rows int) error { return r.seqs.Grow(id, rows) }

// Release ends a sequence; its slots (or KV set) are free at once.
func (r *Runner) Release(id inference.SeqID) { r.seqs.Release(id) }

// Shift evicts n of id's committed rows after its first keep (see
// inference.ContextShifter): its KV set (QHexRT contract) or its slots in
// the shared pool (chunked) become a ring at the original positions.
func (r *Runner) Shift(id inference.SeqID, keep, n int) error {
	if err := r.life.Check(); err != nil {
		return err
	}
	return r.seqs.Shift(id, keep, n)
}

// RestoredTokens records the tokens of a QHexRT-contract sequence's restored
// (or kept) rows, so that the rest of its prompt is one prefill call from 0
// as it is without them (inference.SeqTokenRecorder). Pool sequences need no
// tokens: their prefill graph starts anywhere.
func (r *Runner) RestoredTokens(id inference.SeqID, toks []int32) { r.seqs.restoredTokens(id, toks) }

// MaxPositions is the bundle's params.max_position_embeddings (0: not
// given).
func (r *Runner) MaxPositions() int { return r.spec.maxPositions }
