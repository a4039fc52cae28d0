package qhexrt

import (
	"context"
	"fmt"
	"time"

	"github.com/hexserve/hexserve/hexagon/bundle"
	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/hexagon/slotpool"
	"github.com/hexserve/hexserve/inference"
)

// The Runner as an inference.Batcher, per contract:
//
//   - Chunked bundles keep one resident cache and treat its CTX slots as a
//     slotpool.Pool. A Step is one prefill-graph call whose rows carry their
//     own tokens, cos/sin (from each row's position) and mask row (its
//     sequence's slots, then its run's earlier rows in the window), or, for
//     a single row when measured costs say so, one decode call. The lm-head,
//     a separate one-row graph, runs when the engine asks for a row.
//   - QHexRT-contract bundles (prefill from position 0 only, no past input
//     on the prefill graph) give each open sequence its own KV buffers: a
//     set of per-layer K and V caches registered with the backend, and a
//     decode call bound to them, so switching sequences is choosing a call
//     (no copy). A Step runs its runs in turn. A run that ends within the
//     first window and starts at 0 or carries several tokens is one prefill
//     call from 0 over the sequence's tokens (rows before Start are
//     recomputed, to the same bits); other rows are decode calls. Fork
//     copies the parent's rows into the new set.
//
// Either way the golden-test path (evalAll) and the Batcher share the cache
// (set 0 is the resident cache on a QHexRT-contract bundle): opening a
// sequence forgets what evalAll held.
var (
	_ inference.Batcher          = (*Runner)(nil)
	_ inference.SeqKVSnapshotter = (*Runner)(nil)
)

// maxSetSequences bounds engine.max_sequences auto on a QHexRT-contract
// bundle: a Step runs each sequence's calls in turn, so sequences side by
// side share the NPU's time rather than its calls.
const maxSetSequences = 8

// defaultSeqKVBytes is the KV-set budget when Config.SeqKVBytes is 0. Sets
// are allocated when sequences open, so the budget costs nothing until
// engine.max_sequences sequences run at once.
const defaultSeqKVBytes = 512 << 20

// kvSet is one sequence's KV buffers on a QHexRT-contract bundle.
type kvSet struct {
	k, v     []*graphio.Tensor // per layer [CTX, kv_dim]
	call     *qnn.Call         // the decode graph bound to k, v
	id       inference.SeqID   // its sequence; 0: free
	n        int               // committed rows
	toks     []int32           // tokens of rows [0, len(toks)) (fewer after a restore)
	resident bool              // set 0: the resident cache, freed by Close
	restored bool              // rows came from the KV store: the next run finishes a prompt
}

// batch is the Batcher state.
type batch struct {
	pool  *slotpool.Pool  // chunked
	sets  []*kvSet        // QHexRT contract, allocated on demand
	last  inference.SeqID // the newest sequence
	lost  inference.SeqID // sequences up to it lost their rows in a failed graph call
	steps uint64          // Steps run: Rows of an earlier Step refuse reads
	// policy chooses a chunked single-row Step's graph among opts: decode,
	// prefill.
	policy plan.Policy
	opts   []plan.Option
	hid    []byte // hidden rows kept for the lm-head, one Step's
}

// invalidate is the cache rule after a failed graph call (graphio.
// Lifecycle): no row is valid, evalAll's nor any open sequence's (their Steps
// fail from now on; the engine releases them).
func (r *Runner) invalidate() {
	r.valid = 0
	r.batch.lost = r.batch.last
}

// chunked reports whether the bundle follows the chunked contract.
func (r *Runner) chunked() bool { return r.spec.contract == ContractChunked }

// kvSetBytes is one set's size.
func (r *Runner) kvSetBytes() int64 { return int64(2*len(r.kvK)) * int64(r.spec.ctx*r.kvRow) }

// maxSets is how many KV sets fit the configured (or default) budget; set
// 0 is the resident cache, so at least one.
func (r *Runner) maxSets() int {
	budget := r.cfg.SeqKVBytes
	if budget <= 0 {
		budget = defaultSeqKVBytes
	}
	return int(min(max(budget/r.kvSetBytes(), 1), slotpool.MaxSequences))
}

// BatchLimits: on a chunked bundle slotpool.Limits of a prefill window of
// rows per Step and the CTX slots of the cache; on a QHexRT-contract
// bundle as many sequences as KV sets fit the budget (auto: at most
// maxSetSequences), each with CTX slots.
func (r *Runner) BatchLimits() inference.BatchLimits {
	if r.chunked() {
		return slotpool.Limits(r.window, r.spec.ctx)
	}
	n := r.maxSets()
	return inference.BatchLimits{Sequences: n, Rows: r.window, Slots: n * r.spec.ctx, Auto: min(n, maxSetSequences)}
}

// initBatch starts the Batcher state; evalAll's rows are forgotten.
func (r *Runner) initBatch() {
	r.valid = 0
	if r.batch.pool == nil && r.chunked() {
		r.batch.pool = slotpool.New(r.spec.ctx, slotpool.MaxSequences)
	}
	if r.batch.sets == nil && !r.chunked() {
		r.batch.sets = []*kvSet{{k: r.kvK, v: r.kvV, call: r.graphs[roleDecode].call, resident: true}}
	}
	if r.batch.hid == nil {
		g := r.graphs[rolePrefill]
		r.batch.hid = make([]byte, 0, r.window*g.y.Elem.Size()*r.spec.hidden)
	}
}

// Open starts a sequence with reserve slots.
func (r *Runner) Open(reserve int) (inference.SeqID, error) {
	if r.life.Closed() {
		return 0, ErrClosed
	}
	r.initBatch()
	if r.chunked() {
		id, err := r.batch.pool.New(reserve)
		if err != nil {
			return 0, fmt.Errorf("qhexrt: %w", err)
		}
		r.batch.last = id
		return id, nil
	}
	if reserve < 1 || reserve > r.spec.ctx {
		return 0, fmt.Errorf("qhexrt: a sequence of %d rows in a context of %d: %w", reserve, r.spec.ctx, inference.ErrNoSlots)
	}
	s, err := r.freeSet()
	if err != nil {
		return 0, err
	}
	r.batch.last++
	s.id, s.n, s.toks = r.batch.last, 0, s.toks[:0]
	s.restored = false
	return s.id, nil
}

// freeSet returns an unused KV set, allocating one while the budget allows.
func (r *Runner) freeSet() (*kvSet, error) {
	for _, s := range r.batch.sets {
		if s.id == 0 {
			return s, nil
		}
	}
	if len(r.batch.sets) >= r.maxSets() {
		return nil, fmt.Errorf("qhexrt: all %d KV sets in use: %w", len(r.batch.sets), inference.ErrNoSlots)
	}
	s, err := r.newSet()
	if err != nil {
		return nil, err
	}
	r.batch.sets = append(r.batch.sets, s)
	return s, nil
}

// newSet allocates a KV set and binds the decode graph to it.
func (r *Runner) newSet() (_ *kvSet, err error) {
	s := &kvSet{}
	defer func() {
		if err != nil {
			s.free()
		}
	}()
	for range r.spec.layers {
		k, v := &graphio.Tensor{Elem: r.kvET}, &graphio.Tensor{Elem: r.kvET}
		s.k, s.v = append(s.k, k), append(s.v, v)
		if err := k.Alloc(r.rt, r.spec.ctx*r.kvRow); err != nil {
			return nil, fmt.Errorf("qhexrt: KV set: %w", err)
		}
		if err := v.Alloc(r.rt, r.spec.ctx*r.kvRow); err != nil {
			return nil, fmt.Errorf("qhexrt: KV set: %w", err)
		}
	}
	if err := r.bindSet(s); err != nil {
		return nil, err
	}
	return s, nil
}

// bindSet binds a call of the decode graph to s's caches and the decode
// graph's other buffers.
func (r *Runner) bindSet(s *kvSet) error {
	g := r.graphs[roleDecode]
	for _, c := range r.contexts {
		if c.Path() != g.ref.file {
			continue
		}
		gr, err := c.Graph(g.ref.name)
		if err != nil {
			return fmt.Errorf("qhexrt: %s graph %q: %w", c.Path(), g.ref.name, err)
		}
		in, out := r.ioBindings(g, s.k, s.v)
		if s.call, err = gr.Bind(in, out); err != nil {
			return fmt.Errorf("qhexrt: binding a KV set to graph %q: %w", g.ref.name, err)
		}
		return nil
	}
	return fmt.Errorf("qhexrt: no context holds graph %q", g.ref.name)
}

// ioBindings are g's bindings with the past inputs bound to ks, vs (nil:
// none, the QHexRT prefill).
func (r *Runner) ioBindings(g *graphIO, ks, vs []*graphio.Tensor) (in, out []qnn.Binding) {
	n := r.spec.names
	in = []qnn.Binding{{Name: n.X, Buffer: g.x.Buf}, {Name: n.Cos, Buffer: g.cos.Buf},
		{Name: n.Sin, Buffer: g.sin.Buf}, {Name: n.CMask, Buffer: g.mask.Buf}}
	out = []qnn.Binding{{Name: n.Y, Buffer: g.y.Buf}}
	for i := range ks {
		in = append(in, qnn.Binding{Name: bundle.Layer(n.PastK, i), Buffer: ks[i].Buf},
			qnn.Binding{Name: bundle.Layer(n.PastV, i), Buffer: vs[i].Buf})
	}
	for i := range r.spec.layers {
		out = append(out, qnn.Binding{Name: g.newK[i].Info.Name, Buffer: g.newK[i].Buf},
			qnn.Binding{Name: g.newV[i].Info.Name, Buffer: g.newV[i].Buf})
	}
	return in, out
}

// free releases a set's call and (unless it is the resident cache) buffers.
func (s *kvSet) free() {
	if s.resident {
		return
	}
	if s.call != nil {
		s.call.Close()
		s.call = nil
	}
	for i := len(s.k) - 1; i >= 0; i-- {
		s.v[i].Free()
		s.k[i].Free()
	}
}

// closeSets releases the calls of the extra KV sets (before their
// contexts close); freeSets also frees their buffers.
func (r *Runner) closeSets() {
	for _, s := range r.batch.sets {
		if !s.resident && s.call != nil {
			s.call.Close()
			s.call = nil
		}
	}
}

func (r *Runner) freeSets() {
	for i := len(r.batch.sets) - 1; i >= 0; i-- {
		r.batch.sets[i].free()
	}
	r.batch.sets = nil
}

// rebindSets binds the extra sets again after a reload; every sequence's
// rows are lost with the device.
func (r *Runner) rebindSets() error {
	for _, s := range r.batch.sets {
		s.n, s.toks = 0, s.toks[:0]
		if s.resident {
			s.call = r.graphs[roleDecode].call
			continue
		}
		if err := r.bindSet(s); err != nil {
			return err
		}
	}
	return nil
}

// set returns the KV set of sequence id.
func (r *Runner) set(id inference.SeqID) *kvSet {
	if id == 0 {
		return nil
	}
	for _, s := range r.batch.sets {
		if s.id == id {
			return s
		}
	}
	return nil
}

// Fork starts a sequence on parent's rows [0, rows): shared slots on a
// chunked bundle, a copy into a KV set of its own otherwise.
func (r *Runner) Fork(parent inference.SeqID, rows, reserve int) (inference.SeqID, error) {
	if r.life.Closed() {
		return 0, ErrClosed
	}
	r.initBatch()
	if r.chunked() {
		id, err := r.batch.pool.Fork(parent, rows, reserve)
		if err != nil {
			return 0, fmt.Errorf("qhexrt: %w", err)
		}
		r.batch.last = id
		return id, nil
	}
	ps := r.set(parent)
	switch {
	case ps == nil || rows < 1 || rows > ps.n:
		return 0, fmt.Errorf("qhexrt: fork of %d rows of sequence %d", rows, parent)
	case rows+reserve > r.spec.ctx:
		return 0, fmt.Errorf("qhexrt: a fork of %d+%d rows in a context of %d: %w", rows, reserve, r.spec.ctx, inference.ErrNoSlots)
	}
	id, err := r.Open(1)
	if err != nil {
		return 0, err
	}
	s := r.set(id)
	r.copyKV(s.k, s.v, 0, ps.k, ps.v, r.spec.ctx, 0, rows)
	s.n = rows
	s.toks = append(s.toks[:0], ps.toks[:min(rows, len(ps.toks))]...)
	return id, nil
}

// Grow lets id hold rows rows: on a chunked bundle its own range grows in
// place or moves (its cache entries copied); a KV set always holds the
// context.
func (r *Runner) Grow(id inference.SeqID, rows int) error {
	if r.chunked() && r.batch.pool != nil {
		mv, err := r.batch.pool.Grow(id, rows)
		if err != nil {
			return fmt.Errorf("qhexrt: %w", err)
		}
		if mv != nil {
			t0 := time.Now()
			r.copyKV(r.kvK, r.kvV, mv.To, r.kvK, r.kvV, r.spec.ctx, mv.From, mv.N)
			r.stats.KVCopy += time.Since(t0)
		}
		return nil
	}
	switch {
	case r.set(id) == nil:
		return fmt.Errorf("qhexrt: grow of unknown sequence %d", id)
	case rows > r.spec.ctx:
		return fmt.Errorf("qhexrt: a sequence of %d rows in a context of %d: %w", rows, r.spec.ctx, inference.ErrNoSlots)
	}
	return nil
}

// Release ends a sequence; its slots (or KV set) are free at once.
func (r *Runner) Release(id inference.SeqID) {
	if r.batch.pool != nil {
		r.batch.pool.Release(id)
	}
	if s := r.set(id); s != nil {
		s.id, s.n, s.toks = 0, 0, s.toks[:0]
		s.restored = false
	}
}

// StepCost estimates one Step of rows tokens from measured call costs: on
// a chunked bundle one prefill call (or one decode call for a single row)
// and rows lm-head calls; on a QHexRT-contract bundle rows decode calls
// with their lm-heads (the runs go in turn).
func (r *Runner) StepCost(rows int) time.Duration {
	c, _ := r.measuredCosts()
	if !r.chunked() {
		return time.Duration(rows) * (c.Decode + c.LMHead)
	}
	call := c.Prefill
	if rows == 1 {
		call = min(call, c.Decode)
	}
	return call + time.Duration(rows)*c.LMHead
}

// Step evaluates runs (see inference.Batcher).
func (r *Runner) Step(ctx context.Context, runs []inference.Run) ([]inference.Rows, error) {
	if err := r.life.Check(); err != nil {
		return nil, err
	}
	r.initBatch()
	if err := r.checkRuns(runs); err != nil {
		return nil, fmt.Errorf("qhexrt: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.calls++
	r.batch.steps++
	r.batch.hid = r.batch.hid[:0]
	defer r.publish()
	if r.chunked() {
		return r.stepPool(runs)
	}
	return r.stepSets(ctx, runs)
}

// checkRuns validates a Step's runs.
func (r *Runner) checkRuns(runs []inference.Run) error {
	for _, run := range runs {
		if run.Seq <= r.batch.lost {
			return fmt.Errorf("sequence %d lost its rows in a failed graph call", run.Seq)
		}
	}
	if r.chunked() {
		return r.batch.pool.Check(runs, r.window, r.spec.vocab)
	}
	// A sequence's own buffers hold the whole context.
	return slotpool.CheckRuns(runs, r.window, r.spec.vocab, func(id inference.SeqID) (shared, n, capacity int, ok bool) {
		if s := r.set(id); s != nil {
			return 0, s.n, r.spec.ctx, true
		}
		return 0, 0, 0, false
	})
}

// stepPool runs a chunked bundle's Step: one prefill call over all runs,
// or for a single row one decode call, as the runners' one policy chooses
// (plan.Policy: by measured cost, giving an unmeasured or idle graph a
// call).
func (r *Runner) stepPool(runs []inference.Run) ([]inference.Rows, error) {
	g := r.graphs[rolePrefill]
	if len(runs) == 1 && len(runs[0].Tokens) == 1 {
		if r.batch.opts == nil {
			r.batch.opts = []plan.Option{{Graphs: []string{r.spec.key(roleDecode)}}, {Graphs: []string{r.spec.key(rolePrefill)}}}
		}
		if r.batch.policy.Choose(&r.stats, r.batch.opts) == 0 {
			g = r.graphs[roleDecode]
		}
	}
	if err := r.poolCall(g, runs); err != nil {
		return nil, err
	}
	out := make([]inference.Rows, len(runs))
	o := 0
	ys := g.y.Elem.Size() * r.spec.hidden
	for i, run := range runs {
		n := len(run.Tokens)
		out[i] = &lazyRows{r: r, step: r.batch.steps, e: g.y.Elem, y: g.y.B[o*ys : (o+n)*ys], n: n}
		r.batch.pool.Seq(run.Seq).N = run.Start + n
		o += n
	}
	return out, nil
}

// poolCall runs g once over runs' rows: tokens, cos/sin per row position,
// mask rows over the pool, then each run's new K/V copied to its slots.
func (r *Runner) poolCall(g *graphIO, runs []inference.Run) error {
	st := &r.stats
	t0 := time.Now()
	xs := g.x.Elem.Size() * r.spec.hidden
	rb := g.rope.rowBytes
	o := 0
	for _, run := range runs {
		for i, tok := range run.Tokens {
			if err := r.embed.put(g.x.B[(o+i)*xs:(o+i+1)*xs], tok, g.x.Elem, r.convScratch); err != nil {
				return fmt.Errorf("qhexrt: position %d: %w", run.Start+i, err)
			}
		}
		g.rope.rows(g.cos.B[o*rb:], g.sin.B[o*rb:], run.Start, len(run.Tokens))
		o += len(run.Tokens)
	}
	clear(g.x.B[o*xs:])
	// Padding rows sit at position 0; their mask rows are closed (poolMask).
	for i := o; i < g.rows; i++ {
		g.rope.rows(g.cos.B[i*rb:], g.sin.B[i*rb:], 0, 1)
	}
	t1 := time.Now()
	r.poolMask(g, runs)
	t2 := time.Now()
	st.Embed += t1.Sub(t0)
	st.Mask += t2.Sub(t1)
	if err := r.execute(g); err != nil {
		return err
	}
	t3 := time.Now()
	o = 0
	for _, run := range runs {
		slot := r.batch.pool.Seq(run.Seq).Slot(run.Start) // a run's rows are its own: contiguous
		r.copyKV(r.kvK, r.kvV, slot, g.newK, g.newV, g.rows, o, len(run.Tokens))
		o += len(run.Tokens)
	}
	st.KVCopy += time.Since(t3)
	return nil
}

// poolMask writes every row's mask: its sequence's slots of rows
// [0, Start), then (prefill graph) its run's earlier rows in the window,
// causally; padding rows attend to nothing, as Genie masks them, so the
// graph skips them and their outputs are never read. The decode graph's
// mask is the past slots only (the row attends to itself).
func (r *Runner) poolMask(g *graphIO, runs []inference.Run) {
	w, block := r.spec.ctx, -1
	if g.role == rolePrefill {
		w, block = r.spec.ctx+g.rows, r.spec.ctx
	}
	r.batch.pool.WriteMask(g.masks, g.mask.B, runs, g.rows, w, block)
}
