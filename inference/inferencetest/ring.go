package inferencetest

import (
	"fmt"
	"slices"

	"github.com/hexserve/hexserve/inference"
)

// Ring is a Pool that is an inference.ContextShifter, as a Genie or QHexRT
// bundle's ring buffer is: Shift evicts a sequence's rows after its sink,
// and a row's logits then depend on the rows its sequence still holds (the
// sink and the rows after the evicted ones), so output past a shift shows
// which rows were kept.
type Ring struct {
	*Pool
	max    int
	shifts []Shift
}

// Shift records a Shift call.
type Shift struct {
	Seq        inference.SeqID
	Keep, N    int
	Position   int // the sequence's next position
	HeldBefore int
}

var _ inference.ContextShifter = (*Ring)(nil)

// NewRing returns a fake ring-buffer pool whose positions stop at
// maxPositions (0: no limit).
func NewRing(info inference.ModelInfo, lim inference.BatchLimits, maxPositions int) *Ring {
	return &Ring{Pool: NewPool(info, lim), max: maxPositions}
}

// MaxPositions implements inference.ContextShifter.
func (r *Ring) MaxPositions() int { return r.max }

// Shift implements inference.ContextShifter. A fork's shared rows are
// copied first (the fake's rows are its own already).
func (r *Ring) Shift(id inference.SeqID, keep, n int) error {
	p := r.Pool
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.seqs[id]
	if s == nil || keep < 0 || n <= 0 || keep+n > len(s.toks) {
		return fmt.Errorf("inferencetest: shift of %d rows after %d of sequence %d", n, keep, id)
	}
	pos := len(s.toks) + s.evicted
	if r.max > 0 && pos+n > r.max {
		return fmt.Errorf("inferencetest: shift at position %d past %d positions", pos, r.max)
	}
	r.shifts = append(r.shifts, Shift{Seq: id, Keep: keep, N: n, Position: pos, HeldBefore: len(s.toks)})
	s.toks = slices.Delete(s.toks, keep, keep+n)
	s.from = slices.Delete(s.from, keep, keep+n)
	s.evicted += n
	s.keep = keep
	if s.shared > 0 {
		s.reserve += s.shared // the fork's rows are now its own slots
		p.used += s.shared
		s.shared = 0
	}
	return nil
}

// Shifts are the Shift calls so far.
func (r *Ring) Shifts() []Shift {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.shifts)
}
