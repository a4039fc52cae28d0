package qhexrt

import (
	"context"
	"fmt"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/inference"
)

// Fork starts a sequence on a copy of parent's rows [0, rows) in a KV set
// of its own (of a shifted parent, at most its sink, as in the slot pool).
func (ks *kvSets) Fork(parent inference.SeqID, rows, reserve int) (inference.SeqID, error) {
	if ks.r.life.Closed() {
		return 0, ErrClosed
	}
	ps := ks.set(parent)
	switch {
	case ps == nil || rows < 1 || !ps.held(0, rows):
		return 0, fmt.Errorf("qhexrt: fork of %d rows of sequence %d", rows, parent)
	case rows+reserve > ks.r.spec.ctx:
		return 0, fmt.Errorf("qhexrt: a fork of %d+%d rows in a context of %d: %w", rows, reserve, ks.r.spec.ctx, inference.ErrNoSlots)
	}
	id, err := ks.Open(1)
	if err != nil {
		return 0, err
	}
	s := ks.set(id)
	copyKV(s.kv, 0, ps.kv, 0, rows) // rows [0, rows) of either are in slots [0, rows)
	s.seq.N = rows
	s.toks = append(s.toks[:0], ps.toks[:min(rows, len(ps.toks))]...)
	return id, nil
}

// Grow checks that id can hold rows rows: a KV set always holds the context
// (past it, after Shift, the rows it evicted).
func (ks *kvSets) Grow(id inference.SeqID, rows int) error {
	s := ks.set(id)
	switch {
	case s == nil:
		return fmt.Errorf("qhexrt: grow of unknown sequence %d", id)
	case rows > s.seq.Cap():
		return fmt.Errorf("qhexrt: a sequence of %d rows in a context of %d: %w", rows, ks.r.spec.ctx, inference.ErrNoSlots)
	}
	return nil
}

// Release frees id's KV set at once.
func (ks *kvSets) Release(id inference.SeqID) {
	if s := ks.set(id); s != nil {
		s.reset(0)
	}
}

// Shift evicts id's n oldest rows after its first keep: its set becomes a
// ring at the original positions (kvSet), whose next rows go into the
// freed slots. The decode graph's mask opens the sink and the kept rows;
// nothing is re-rotated (RoPE is a host input). keep stays what the first
// Shift set.
func (ks *kvSets) Shift(id inference.SeqID, keep, n int) error {
	s := ks.set(id)
	switch {
	case s == nil:
		return fmt.Errorf("qhexrt: shift of unknown sequence %d", id)
	case s.seq.Gone > 0 && keep != s.seq.Keep:
		return fmt.Errorf("qhexrt: shift of sequence %d after %d rows: its sink is %d rows", id, keep, s.seq.Keep)
	case keep < 0 || n < 1 || keep >= ks.r.spec.ctx || keep+s.seq.Gone+n > s.seq.N:
		return fmt.Errorf("qhexrt: shift of sequence %d by %d rows after %d: it holds rows up to %d, %d evicted", id, n, keep, s.seq.N, s.seq.Gone)
	}
	s.seq.Keep, s.seq.Gone = keep, s.seq.Gone+n
	s.toks = s.toks[:0] // no prefill from 0 any more: decode only
	return nil
}

// SaveSeqKV copies rows [from, to) of sequence id (committed and held ones)
// into dst, in KVLayout's row format.
func (ks *kvSets) SaveSeqKV(id inference.SeqID, from, to int, dst []byte) error {
	if ks.r.life.Closed() {
		return ErrClosed
	}
	s := ks.set(id)
	switch {
	case s == nil:
		return fmt.Errorf("qhexrt: unknown sequence %d", id)
	case from > to || !s.held(from, to):
		return fmt.Errorf("qhexrt: SaveSeqKV rows [%d, %d) of sequence %d: only [0, %d) are committed (%d evicted after %d)", from, to, id, s.seq.N, s.seq.Gone, s.seq.Keep)
	case len(dst) != (to-from)*s.kv.RowBytes():
		return fmt.Errorf("qhexrt: saving rows [%d, %d) needs %d bytes, got %d", from, to, (to-from)*s.kv.RowBytes(), len(dst))
	}
	s.kv.Rows(s.seq.Slot, from, to, dst, false)
	return nil
}

// RestoreSeqKV copies saved rows into sequence id from row from (at most
// its committed rows; not into a shifted set); they are then committed.
func (ks *kvSets) RestoreSeqKV(id inference.SeqID, from int, src []byte) error {
	if ks.r.life.Closed() {
		return ErrClosed
	}
	s := ks.set(id)
	if s == nil {
		return fmt.Errorf("qhexrt: unknown sequence %d", id)
	}
	rb := s.kv.RowBytes()
	rows := len(src) / rb
	switch {
	case len(src)%rb != 0:
		return fmt.Errorf("qhexrt: RestoreSeqKV: %d bytes is not a whole number of %d-byte rows", len(src), rb)
	case from < 0 || from > s.seq.N || s.seq.Gone > 0:
		return fmt.Errorf("qhexrt: RestoreSeqKV into sequence %d from row %d: only [0, %d) are committed (%d evicted)", id, from, s.seq.N, s.seq.Gone)
	case from+rows > ks.r.spec.ctx:
		return fmt.Errorf("qhexrt: RestoreSeqKV rows [%d, %d) exceed sequence %d's %d rows", from, from+rows, id, ks.r.spec.ctx)
	}
	s.kv.Rows(s.seq.Slot, from, from+rows, src, true)
	s.seq.N, s.toks = from+rows, s.toks[:min(from, len(s.toks))]
	return nil
}

// restoredTokens records the tokens of id's restored (or kept) rows, so
// that the rest of its prompt is one prefill call from 0 as it is without
// them.
func (ks *kvSets) restoredTokens(id inference.SeqID, toks []int32) {
	if s := ks.set(id); s != nil && s.seq.Gone == 0 && len(toks) <= s.seq.N {
		s.toks = append(s.toks[:0], toks...)
		s.seq.N, s.restored = len(toks), true
	}
}

// step runs each run in turn on its own KV set, keeping the hidden rows the
// lm-head will read.
func (ks *kvSets) step(ctx context.Context, runs []inference.Run) ([]inference.Rows, error) {
	out := make([]inference.Rows, len(runs))
	for i, run := range runs {
		if err := ks.run(ctx, ks.set(run.Seq), run); err != nil {
			return nil, err
		}
		out[i] = ks.r.kept(len(run.Tokens))
	}
	return out, nil
}

// run evaluates one run on s: a prefill call from 0 over the sequence's
// tokens when the run ends within the first window and starts at 0 or
// carries several tokens or finishes a restored prompt (and s knows its
// tokens before Start), then decode calls for the rows left. The hidden
// rows of the run are kept (Runner.keep).
func (ks *kvSets) run(ctx context.Context, s *kvSet, run inference.Run) error {
	r := ks.r
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
		if err := ks.prefill(s, p); err != nil {
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
		if err := ks.decode(s, pos, run.Tokens[pos-run.Start]); err != nil {
			return err
		}
		r.keep(r.graphs[roleDecode], 0, 1)
	}
	s.seq.N = end
	return nil
}

// prefill runs the prefill graph from 0 over s's first n tokens and copies
// the new K/V into s.
func (ks *kvSets) prefill(s *kvSet, n int) error {
	r := ks.r
	g := r.graphs[rolePrefill]
	if err := r.putRows(g, 0, s.toks[:n], 0); err != nil {
		return err
	}
	r.padRows(g, n)
	if err := r.execute(g); err != nil {
		return err
	}
	copyKV(s.kv, 0, g.kvNew, 0, n)
	return nil
}

// decode runs s's decode call on tok at pos and copies its K/V row into
// pos's slot.
func (ks *kvSets) decode(s *kvSet, pos int, tok int32) error {
	r := ks.r
	g := r.graphs[roleDecode]
	if err := r.putRows(g, 0, []int32{tok}, pos); err != nil {
		return err
	}
	s.mask(g.masks, g.mask.B, pos)
	c := g.call
	g.call = s.call // the decode graph bound to s's caches
	err := r.execute(g)
	if g.call == s.call { // (a reload after a device restart binds g afresh)
		g.call = c
	}
	if err != nil {
		return err
	}
	copyKV(s.kv, s.seq.Slot(pos), g.kvNew, 0, 1)
	return nil
}

// mask writes the decode mask of a row at pos: the slots of the rows before
// it that s holds (after a Shift, the sink and the kept rows).
func (s *kvSet) mask(m *graphio.Mask, b []byte, pos int) {
	m.Fill(b, 0, s.kv.Stride, false)
	s.seq.OpenRows(m, b, 0, pos)
}
