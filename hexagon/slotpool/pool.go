// Package slotpool keeps the slots of a KV cache that several sequences
// share: the allocator (Pool: sequences' ranges, forks, growth, run checks),
// the cache's rows as the pool indexes them (KV), the cache itself with its
// layout, re-striding and write-back (Cache), and the Batcher methods
// built on both, which the runners holding one cache for many sequences
// (.pte, Genie and chunked QHexRT bundles) embed or call.
package slotpool

import (
	"fmt"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/inference"
)

// Pool is a KV cache's slots as sequences own them, for an
// inference.Batcher whose rows of several sequences share one cache: a
// sequence owns one contiguous range of slots (its reserve) and, when
// forked, also reads its parent's slots of the shared rows. Every range of
// a sequence lies above the ones it reads, so a row's attended slots come
// in position order, which keeps its logits bit-identical whatever the
// neighbours (attention sums its columns in slot order). A sequence that
// Shift has shifted is a ring instead (see Seq). The runners that hold one
// cache for many sequences (.pte, Genie and chunked QHexRT bundles) use it.
type Pool struct {
	ref  []int32 // holders per slot; 0: free
	seqs map[inference.SeqID]*Seq
	last inference.SeqID
	high int // slots [0, high) may hold rows
	max  int // sequences open at once
}

// Seq is one sequence of a Pool: rows [0, Shared) in its parent's slots
// Base…, its own rows from Shared on in slots [Lo, Hi). Rows are numbered
// by position. Once shifted (Gone > 0) it shares nothing: the sink rows
// [0, Keep) stay in slots Lo…, rows [Keep, Keep+Gone) are evicted, and the
// rows from Keep on live in a ring over slots [Lo+Keep, Hi).
type Seq struct {
	Base, Shared int
	Lo, Hi       int
	N            int // committed rows (positions: evicted rows count)
	Keep, Gone   int // sink rows and evicted rows (Shift)
	off          int // the ring's rotation: row Keep+off is in slot Lo+Keep
}

// Slot is the slot of row i.
func (s *Seq) Slot(i int) int {
	switch {
	case i < s.Shared:
		return s.Base + i
	case s.Gone > 0 && i >= s.Keep:
		r := s.Hi - s.Lo - s.Keep
		return s.Lo + s.Keep + ((i-s.Keep-s.off)%r+r)%r
	}
	return s.Lo + i - s.Shared
}

// Cap is the most rows the sequence may hold (evicted rows count).
func (s *Seq) Cap() int { return s.Shared + s.Hi - s.Lo + s.Gone }

// New is a pool of slots for up to sequences open at once.
func New(slots, sequences int) *Pool {
	return &Pool{ref: make([]int32, slots), seqs: map[inference.SeqID]*Seq{}, max: sequences}
}

// Slots is the number of slots.
func (p *Pool) Slots() int { return len(p.ref) }

// Open is the number of open sequences.
func (p *Pool) Open() int { return len(p.seqs) }

// High is one past the highest slot that may hold rows: slots at or above
// it are free.
func (p *Pool) High() int { return p.high }

// Seq is the open sequence id, or nil.
func (p *Pool) Seq(id inference.SeqID) *Seq { return p.seqs[id] }

// alloc finds n free contiguous slots in [above, below) (first fit) and
// takes them.
func (p *Pool) alloc(n, above, below int) (int, bool) {
	run := 0
	for i := max(above, 0); i < min(below, len(p.ref)); i++ {
		if p.ref[i] != 0 {
			run = 0
			continue
		}
		if run++; run == n {
			lo := i - n + 1
			for j := lo; j <= i; j++ {
				p.ref[j] = 1
			}
			p.high = max(p.high, i+1)
			return lo, true
		}
	}
	return 0, false
}

// New starts a sequence with reserve slots of its own (see
// inference.Batcher.Open); the error wraps inference.ErrNoSlots.
func (p *Pool) New(reserve int) (inference.SeqID, error) {
	return p.open(&Seq{}, reserve, 0, len(p.ref))
}

// NewBelow is New with the sequence's slots below slot below.
func (p *Pool) NewBelow(reserve, below int) (inference.SeqID, error) {
	return p.open(&Seq{}, reserve, 0, below)
}

func (p *Pool) open(s *Seq, reserve, above, below int) (inference.SeqID, error) {
	if reserve < 1 || reserve > len(p.ref) {
		return 0, fmt.Errorf("a sequence of %d slots in a pool of %d: %w", reserve, len(p.ref), inference.ErrNoSlots)
	}
	if len(p.seqs) >= p.max {
		return 0, fmt.Errorf("%d sequences open: %w", len(p.seqs), inference.ErrNoSlots)
	}
	lo, ok := p.alloc(reserve, above, below)
	if !ok {
		return 0, fmt.Errorf("no %d free contiguous slots: %w", reserve, inference.ErrNoSlots)
	}
	s.Lo, s.Hi = lo, lo+reserve
	p.last++
	p.seqs[p.last] = s
	return p.last, nil
}

// Fork shares parent's committed rows [0, rows) and reserves slots above
// them (see inference.Batcher.Fork).
func (p *Pool) Fork(parent inference.SeqID, rows, reserve int) (inference.SeqID, error) {
	ps := p.seqs[parent]
	switch {
	case ps == nil || rows < 1 || rows > ps.N:
		return 0, fmt.Errorf("fork of %d rows of sequence %d", rows, parent)
	case ps.Shared > 0 && rows > ps.Shared:
		return 0, fmt.Errorf("fork of %d rows of a fork sharing %d", rows, ps.Shared)
	case ps.Gone > 0 && rows > ps.Keep:
		return 0, fmt.Errorf("fork of %d rows of a sequence shifted past row %d", rows, ps.Keep)
	}
	s := &Seq{Base: ps.Slot(0), Shared: rows, N: rows}
	id, err := p.open(s, reserve, ps.Slot(rows-1)+1, len(p.ref))
	if err != nil {
		return 0, err
	}
	for i := range rows {
		p.ref[s.Slot(i)]++
	}
	return id, nil
}

// Move is a sequence's own committed rows moved by Grow: N slots from
// slot From to slot To (the ranges do not overlap). The caller copies the
// cache's entries.
type Move struct{ From, To, N int }

// Grow extends id's own range so that it holds rows rows in all (shared
// ones included): in place when the slots after it are free, else by
// moving it to a free range above its shared rows, returned as a Move
// (nil: nothing to copy). A sequence whose own rows a fork shares does not
// move. The error wraps inference.ErrNoSlots when the pool cannot hold
// the rows now.
func (p *Pool) Grow(id inference.SeqID, rows int) (*Move, error) {
	s := p.seqs[id]
	if s == nil {
		return nil, fmt.Errorf("grow of unknown sequence %d", id)
	}
	need := rows - s.Shared - s.Gone
	if need <= s.Hi-s.Lo {
		return nil, nil
	}
	if s.Gone > 0 {
		return nil, fmt.Errorf("grow of shifted sequence %d: a ring moves by GrowRing", id)
	}
	if s.Lo+need <= len(p.ref) && p.free(s.Hi, s.Lo+need) {
		for i := s.Hi; i < s.Lo+need; i++ {
			p.ref[i] = 1
		}
		s.Hi = s.Lo + need
		p.high = max(p.high, s.Hi)
		return nil, nil
	}
	own := s.N - s.Shared
	if own > 0 && p.ref[s.Lo] > 1 {
		return nil, fmt.Errorf("sequence %d is shared by a fork and cannot move: %w", id, inference.ErrNoSlots)
	}
	above := 0
	if s.Shared > 0 {
		above = s.Base + s.Shared
	}
	lo, ok := p.alloc(need, above, len(p.ref)) // the old range is still held: no overlap
	if !ok {
		return nil, fmt.Errorf("no %d free contiguous slots to grow into: %w", need, inference.ErrNoSlots)
	}
	for i := s.Lo; i < s.Hi; i++ {
		p.ref[i]--
	}
	var mv *Move
	if own > 0 {
		mv = &Move{From: s.Lo, To: lo, N: own}
	}
	s.Lo, s.Hi = lo, lo+need
	for p.high > 0 && p.ref[p.high-1] == 0 {
		p.high--
	}
	return mv, nil
}

// free reports whether slots [from, to) are free.
func (p *Pool) free(from, to int) bool {
	for i := from; i < to; i++ {
		if p.ref[i] != 0 {
			return false
		}
	}
	return true
}

// Beyond reports whether a committed row of any sequence lives in a slot
// at or above slot.
func (p *Pool) Beyond(slot int) bool {
	for _, s := range p.seqs {
		if s.N > 0 && s.Top(s.N) >= slot {
			return true
		}
	}
	return false
}

// Release frees id's own range and its hold on shared slots; an unknown id
// is a no-op.
func (p *Pool) Release(id inference.SeqID) {
	s := p.seqs[id]
	if s == nil {
		return
	}
	delete(p.seqs, id)
	for i := range s.Shared {
		p.ref[s.Slot(i)]--
	}
	for i := s.Lo; i < s.Hi; i++ {
		p.ref[i]--
	}
	for p.high > 0 && p.ref[p.high-1] == 0 {
		p.high--
	}
}

// Check validates a Step's runs against the pool (see CheckRuns): a run
// starts within its sequence's committed rows and above the shared (or
// evicted) ones, and ends within its reserve.
func (p *Pool) Check(runs []inference.Run, maxRows, vocab int) error {
	return CheckRuns(runs, maxRows, vocab, func(id inference.SeqID) (shared, n, capacity int, ok bool) {
		s := p.seqs[id]
		if s == nil {
			return 0, 0, 0, false
		}
		return max(s.Shared, s.Keep+s.Gone), s.N, s.Cap(), true
	})
}

// CheckRuns validates a Step's runs: known sequences, one run each,
// non-empty, starting within the sequence's committed rows but not in
// the ones it shares, ending within its capacity (rows reports these of a
// sequence, ok false for an unknown one), tokens in [0, vocab), 1 to
// maxRows rows in all.
func CheckRuns(runs []inference.Run, maxRows, vocab int, rows func(inference.SeqID) (shared, n, capacity int, ok bool)) error {
	total := 0
	seen := map[inference.SeqID]bool{}
	for _, run := range runs {
		shared, n, capacity, ok := rows(run.Seq)
		switch {
		case !ok:
			return fmt.Errorf("step on unknown sequence %d", run.Seq)
		case seen[run.Seq]:
			return fmt.Errorf("two runs of sequence %d in one step", run.Seq)
		case len(run.Tokens) == 0:
			return fmt.Errorf("an empty run of sequence %d", run.Seq)
		case run.Start < shared || run.Start > n:
			return fmt.Errorf("run at %d of sequence %d (%d shared, %d committed rows)", run.Start, run.Seq, shared, n)
		case run.Start+len(run.Tokens) > capacity:
			return fmt.Errorf("run to %d of sequence %d beyond its %d slots", run.Start+len(run.Tokens), run.Seq, capacity)
		}
		for i, t := range run.Tokens {
			if t < 0 || int(t) >= vocab {
				return fmt.Errorf("token %d at position %d is outside the vocabulary (%d)", t, run.Start+i, vocab)
			}
		}
		seen[run.Seq] = true
		total += len(run.Tokens)
	}
	if total == 0 || total > maxRows {
		return fmt.Errorf("a step of %d rows (1 to %d)", total, maxRows)
	}
	return nil
}

// OpenRows opens, in the mask row b of m whose element at is slot 0, the
// slots of s's rows [0, n) that it holds: its shared rows' slots and its
// own (evicted rows stay closed).
func (s *Seq) OpenRows(m *graphio.Mask, b []byte, at, n int) {
	s.Held(n, func(slot, _, k int) { m.Fill(b, at+slot, at+slot+k, true) })
}

// WriteMask writes the mask b (rows rows of width columns, slot 0 at each
// row's column 0) of one call for runs, whose rows come in order: each row
// opens its sequence's slots of rows [0, Start) and, when the call's new
// entries are a block at column block (-1: none), its run's rows in the
// block up to itself. Everything else, padding rows included, is closed.
func (p *Pool) WriteMask(m *graphio.Mask, b []byte, runs []inference.Run, rows, width, block int) {
	m.Fill(b, 0, rows*width, false)
	o := 0
	for _, run := range runs {
		s := p.seqs[run.Seq]
		for i := range run.Tokens {
			row := (o + i) * width
			s.OpenRows(m, b, row, run.Start)
			if block >= 0 {
				m.Fill(b, row+block+o, row+block+o+i+1, true)
			}
		}
		o += len(run.Tokens)
	}
}

// MaxSequences bounds the sequences open in one pool at once.
const MaxSequences = 64

// autoSlots is the slots per sequence engine.max_sequences auto counts on.
const autoSlots = 256

// Limits are the inference.BatchLimits of a runner whose Steps carry up to
// rows rows over one pool of slots slots: MaxSequences sequences, and
// engine.max_sequences auto resolves to min(MaxSequences, rows, slots ÷
// 256 rounded), at least 1 (16 for a 4096-token Genie bundle, 2 for a
// 512-slot bundle).
func Limits(rows, slots int) inference.BatchLimits {
	auto := max(1, min(MaxSequences, rows, (slots+autoSlots/2)/autoSlots))
	return inference.BatchLimits{Sequences: MaxSequences, Rows: rows, Slots: slots, Auto: auto}
}
