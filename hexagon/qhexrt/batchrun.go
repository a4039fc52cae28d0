package qhexrt

import (
	"context"
	"fmt"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/sample"
)

// stepSets runs a QHexRT-contract bundle's Step: each run in turn on its
// own KV set, keeping the hidden rows the lm-head will read.
func (r *Runner) stepSets(ctx context.Context, runs []inference.Run) ([]inference.Rows, error) {
	out := make([]inference.Rows, len(runs))
	for i, run := range runs {
		s := r.set(run.Seq)
		if err := r.setRun(ctx, s, run); err != nil {
			return nil, err
		}
		out[i] = r.kept(len(run.Tokens))
	}
	return out, nil
}

// setRun evaluates one run on s: a prefill call from 0 over the sequence's
// tokens when the run ends within the first window and starts at 0 or
// carries several tokens or finishes a restored prompt (and s knows its
// tokens before Start), then decode
// calls for the rows left. The hidden rows of the run are appended to
// batch.hid.
func (r *Runner) setRun(ctx context.Context, s *kvSet, run inference.Run) error {
	end := run.Start + len(run.Tokens)
	s.toks = append(s.toks[:min(run.Start, len(s.toks))], run.Tokens...)
	known := len(s.toks) == end
	p := run.Start
	// After a restore the run is the rest of a prompt, which goes through
	// the prefill graph as it would without the restore.
	prompt := run.Start == 0 || len(run.Tokens) > 1 || s.restored
	s.restored = false
	if known && prompt && run.Start < r.window {
		p = min(end, r.window)
		if err := r.setPrefill(s, p); err != nil {
			return err
		}
		r.keep(r.graphs[rolePrefill], run.Start, p)
	}
	if !known {
		s.toks = s.toks[:0] // rows without tokens: decode only from now on
	}
	for pos := p; pos < end; pos++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.setDecode(s, pos, run.Tokens[pos-run.Start]); err != nil {
			return err
		}
		r.keep(r.graphs[roleDecode], 0, 1)
	}
	s.n = end
	return nil
}

// setPrefill runs the prefill graph from 0 over s's first n tokens and
// copies the new K/V into s.
func (r *Runner) setPrefill(s *kvSet, n int) error {
	g := r.graphs[rolePrefill]
	if err := r.putRows(g, s.toks[:n], 0); err != nil {
		return err
	}
	if err := r.execute(g); err != nil {
		return err
	}
	r.copyKV(s.k, s.v, 0, g.newK, g.newV, g.rows, 0, n)
	return nil
}

// setDecode runs s's decode call on tok at pos and copies its K/V row.
func (r *Runner) setDecode(s *kvSet, pos int, tok int32) error {
	g := r.graphs[roleDecode]
	if err := r.putRows(g, []int32{tok}, pos); err != nil {
		return err
	}
	g.masks.Row(g.mask.B, pos, r.spec.ctx)
	c := g.call
	g.call = s.call // the decode graph bound to s's caches
	err := r.execute(g)
	if g.call == s.call { // (a reload after a device restart binds g afresh)
		g.call = c
	}
	if err != nil {
		return err
	}
	r.copyKV(s.k, s.v, pos, g.newK, g.newV, 1, 0, 1)
	return nil
}

// putRows writes g's x rows for toks (the rest zero) and cos/sin from
// position start.
func (r *Runner) putRows(g *graphIO, toks []int32, start int) error {
	xs := g.x.Elem.Size() * r.spec.hidden
	for i, t := range toks {
		if err := r.embed.put(g.x.B[i*xs:(i+1)*xs], t, g.x.Elem, r.convScratch); err != nil {
			return fmt.Errorf("qhexrt: position %d: %w", start+i, err)
		}
	}
	clear(g.x.B[len(toks)*xs:])
	g.rope.rows(g.cos.B, g.sin.B, start, g.rows)
	return nil
}

// keep appends g's hidden rows [from, to) to batch.hid, in the prefill
// graph's y type.
func (r *Runner) keep(g *graphIO, from, to int) {
	e := r.graphs[rolePrefill].y.Elem
	ys := g.y.Elem.Size() * r.spec.hidden
	if g.y.Elem.Same(e) {
		r.batch.hid = append(r.batch.hid, g.y.B[from*ys:to*ys]...)
		return
	}
	for i := from; i < to; i++ {
		g.y.Elem.Get(r.convScratch, g.y.B[i*ys:(i+1)*ys])
		n := len(r.batch.hid)
		r.batch.hid = append(r.batch.hid, make([]byte, e.Size()*r.spec.hidden)...)
		e.Put(r.batch.hid[n:], r.convScratch)
	}
}

// kept is the Rows of the last n hidden rows kept.
func (r *Runner) kept(n int) *lazyRows {
	e := r.graphs[rolePrefill].y.Elem
	ys := e.Size() * r.spec.hidden
	h := r.batch.hid
	return &lazyRows{r: r, step: r.batch.steps, e: e, y: h[len(h)-n*ys : len(h) : len(h)], n: n}
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
	case r.batch.steps != w.step:
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

// SaveSeqKV copies rows [from, to) of sequence id (committed ones) into dst,
// in KVLayout's row format.
func (r *Runner) SaveSeqKV(id inference.SeqID, from, to int, dst []byte) error {
	ks, vs, slot, n, err := r.seqRows(id)
	if err != nil {
		return err
	}
	if from < 0 || to < from || to > n {
		return fmt.Errorf("qhexrt: SaveSeqKV rows [%d, %d) of sequence %d: only [0, %d) are committed", from, to, id, n)
	}
	return r.saveRows(ks, vs, slot, from, to, dst)
}

// RestoreSeqKV copies saved rows into sequence id from row from (at most
// its committed rows); they are then committed.
func (r *Runner) RestoreSeqKV(id inference.SeqID, from int, src []byte) error {
	ks, vs, slot, n, err := r.seqRows(id)
	if err != nil {
		return err
	}
	rb := r.kvRowAll()
	rows := len(src) / rb
	limit := r.spec.ctx
	if ps := r.batch.pool; ps != nil {
		limit = ps.Seq(id).Cap()
	}
	switch {
	case len(src)%rb != 0:
		return fmt.Errorf("qhexrt: RestoreSeqKV: %d bytes is not a whole number of %d-byte rows", len(src), rb)
	case from < 0 || from > n:
		return fmt.Errorf("qhexrt: RestoreSeqKV into sequence %d from row %d: only [0, %d) are committed", id, from, n)
	case from+rows > limit:
		return fmt.Errorf("qhexrt: RestoreSeqKV rows [%d, %d) exceed sequence %d's %d rows", from, from+rows, id, limit)
	case r.batch.pool != nil && from < r.batch.pool.Seq(id).Shared:
		return fmt.Errorf("qhexrt: RestoreSeqKV from row %d into the %d rows sequence %d shares", from, r.batch.pool.Seq(id).Shared, id)
	}
	r.restoreRows(ks, vs, slot, from, src)
	if ps := r.batch.pool; ps != nil {
		ps.Seq(id).N = from + rows
	} else {
		s := r.set(id)
		s.n, s.toks = from+rows, s.toks[:min(from, len(s.toks))]
	}
	return nil
}

// seqRows finds where sequence id's rows live: the caches, the slot of a
// row, and the committed rows.
func (r *Runner) seqRows(id inference.SeqID) (ks, vs []*graphio.Tensor, slot func(int) int, n int, err error) {
	if r.life.Closed() {
		return nil, nil, nil, 0, ErrClosed
	}
	if p := r.batch.pool; p != nil {
		if s := p.Seq(id); s != nil {
			return r.kvK, r.kvV, s.Slot, s.N, nil
		}
	}
	if s := r.set(id); s != nil {
		return s.k, s.v, func(i int) int { return i }, s.n, nil
	}
	return nil, nil, nil, 0, fmt.Errorf("qhexrt: unknown sequence %d", id)
}

// RestoredTokens records the tokens of a QHexRT-contract sequence's restored
// (or kept) rows, so that the rest of its prompt is one prefill call from 0
// as it is without them (inference.SeqTokenRecorder). Pool sequences need no
// tokens: their prefill graph starts anywhere.
func (r *Runner) RestoredTokens(id inference.SeqID, toks []int32) {
	if s := r.set(id); s != nil && r.batch.pool == nil && len(toks) <= s.n {
		s.toks = append(s.toks[:0], toks...)
		s.n, s.restored = len(toks), true
	}
}

// copyKV copies rows [from, from+n) of every layer's K and V in srcK, srcV
// (rows rows per layer: a graph's new entries, or a cache of CTX) into
// slots slot… of the caches dstK, dstV.
func (r *Runner) copyKV(dstK, dstV []*graphio.Tensor, slot int, srcK, srcV []*graphio.Tensor, rows, from, n int) {
	for i := range dstK {
		r.kvSlots.Copy(dstK[i].B, r.spec.ctx, slot, srcK[i].B, rows, from, n)
		r.kvSlots.Copy(dstV[i].B, r.spec.ctx, slot, srcV[i].B, rows, from, n)
	}
}
