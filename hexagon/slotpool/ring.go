package slotpool

import (
	"fmt"

	"github.com/hexserve/hexserve/inference"
)

// A sequence past its window is a ring at the original positions
// (inference.ContextShifter): Shift evicts its oldest rows after the sink
// and its next rows reuse their slots, so its slots wrap. Its rows keep
// their positions (the runner writes each row's RoPE from its position),
// nothing is re-rotated or re-read; a row attends the sink and the kept
// rows, in slot order, which is the same for a given shift history
// whatever the neighbours.

// Spans calls fn for rows [from, to) of s in runs of consecutive slots: k
// rows from row on, in slots slot…. The rows must be held (not evicted).
func (s *Seq) Spans(from, to int, fn func(slot, row, k int)) {
	for from < to {
		k := to - from
		switch {
		case from < s.Shared:
			k = min(k, s.Shared-from)
		case s.Gone > 0 && from < s.Keep:
			k = min(k, s.Keep-from)
		case s.Gone > 0:
			k = min(k, s.Hi-s.Slot(from))
		}
		fn(s.Slot(from), from, k)
		from += k
	}
}

// Held calls fn, as Spans does, for the rows of [0, n) that s holds: all of
// them, or once shifted the sink and the rows after the evicted ones.
func (s *Seq) Held(n int, fn func(slot, row, k int)) {
	if s.Gone == 0 {
		s.Spans(0, n, fn)
		return
	}
	s.Spans(0, min(s.Keep, n), fn)
	s.Spans(s.Keep+s.Gone, n, fn)
}

// Top is the highest slot of the rows of [0, n) that s holds (-1: none).
func (s *Seq) Top(n int) int {
	top := -1
	s.Held(n, func(slot, _, k int) { top = max(top, slot+k-1) })
	return top
}

// Shift evicts id's n oldest committed rows after its first keep rows (the
// sink; the same at every Shift of a sequence) and frees their slots for
// its next rows, which keep counting positions: Cap counts the evicted
// rows. A sequence whose slots past the sink another sequence also holds
// (a fork's shared rows, or its own rows a fork shares) first copies its
// rows into a range of its own: the returned Moves, which the caller
// copies in the cache. The error wraps inference.ErrNoSlots when that
// range is not free.
func (p *Pool) Shift(id inference.SeqID, keep, n int) ([]Move, error) {
	s := p.seqs[id]
	switch {
	case s == nil:
		return nil, fmt.Errorf("shift of unknown sequence %d", id)
	case keep < 0 || n < 1:
		return nil, fmt.Errorf("shift of sequence %d by %d rows after %d", id, n, keep)
	case s.Gone > 0 && keep != s.Keep:
		return nil, fmt.Errorf("shift of sequence %d after %d rows: its sink is %d rows", id, keep, s.Keep)
	case keep+s.Gone+n > s.N:
		return nil, fmt.Errorf("shift of sequence %d by %d rows after %d: it holds rows up to %d, %d evicted", id, n, keep, s.N, s.Gone)
	}
	var mv []Move
	if s.Shared > 0 || p.held(s.Lo+keep-s.Shared, s.Hi) {
		var err error
		if mv, err = p.relocate(s, s.Shared+s.Hi-s.Lo); err != nil {
			return nil, fmt.Errorf("shift of sequence %d: %w", id, err)
		}
	}
	s.Keep, s.Gone = keep, s.Gone+n
	return mv, nil
}

// GrowRing is Grow for a shifted sequence: rows rows in all (evicted ones
// included). When its slots cannot hold them it moves to a free range of
// that size, its held rows in position order (the Moves).
func (p *Pool) GrowRing(id inference.SeqID, rows int) ([]Move, error) {
	s := p.seqs[id]
	if s == nil || s.Gone == 0 {
		return nil, fmt.Errorf("grow of sequence %d as a ring: it has not shifted", id)
	}
	need := rows - s.Gone
	if need <= s.Hi-s.Lo {
		return nil, nil
	}
	return p.relocate(s, need)
}

// held reports whether another sequence holds one of slots [from, to).
func (p *Pool) held(from, to int) bool {
	for i := max(from, 0); i < to; i++ {
		if p.ref[i] > 1 {
			return true
		}
	}
	return false
}

// relocate moves s's held rows, in position order, to a free range of size
// slots of its own, releasing its old slots and its hold on shared ones.
func (p *Pool) relocate(s *Seq, size int) ([]Move, error) {
	lo, ok := p.alloc(size, 0, len(p.ref)) // the old slots are still held: no overlap
	if !ok {
		return nil, fmt.Errorf("no %d free contiguous slots for its own copy: %w", size, inference.ErrNoSlots)
	}
	var mv []Move
	to := lo
	s.Held(s.N, func(slot, _, k int) {
		mv = append(mv, Move{From: slot, To: to, N: k})
		to += k
	})
	for i := range s.Shared {
		p.ref[s.Base+i]--
	}
	for i := s.Lo; i < s.Hi; i++ {
		p.ref[i]--
	}
	s.Base, s.Shared, s.Lo, s.Hi, s.off = 0, 0, lo, lo+size, s.Gone
	for p.high > 0 && p.ref[p.high-1] == 0 {
		p.high--
	}
	return mv, nil
}

// Shift evicts id's n oldest rows after its first keep (see Pool.Shift),
// copying its rows first when it shares slots with another sequence.
func (b *Batcher) Shift(id inference.SeqID, keep, n int) error {
	if err := b.check(); err != nil {
		return err
	}
	mv, err := b.Pool.Shift(id, keep, n)
	if err != nil {
		return fmt.Errorf("%s: %w", b.life.Prefix, err)
	}
	b.move(mv)
	return nil
}

// move copies moved rows in the cache.
func (b *Batcher) move(mv []Move) {
	if len(mv) == 0 {
		return
	}
	c := b.cache()
	for _, m := range mv {
		c.Move(m)
	}
	b.life.Stats.KVMoves++
}
