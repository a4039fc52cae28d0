package slotpool

import (
	"fmt"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/sample"
)

// KV is a KV cache as a Pool's slots index it: per layer a K and a V
// buffer in layouts KS and VS, Stride slots per row.
type KV struct {
	K, V   [][]byte
	KS, VS graphio.Slots
	Stride int
}

// Move copies the rows of a sequence Grow moved.
func (c KV) Move(mv Move) {
	for l := range c.K {
		c.KS.Copy(c.K[l], c.Stride, mv.To, c.K[l], c.Stride, mv.From, mv.N)
		c.VS.Copy(c.V[l], c.Stride, mv.To, c.V[l], c.Stride, mv.From, mv.N)
	}
}

// Rows copies rows [from, to), row i in slot slotOf(i), between the cache
// and buf (per row, per layer: K then V): into the cache when restore, else
// out of it.
func (c KV) Rows(slotOf func(int) int, from, to int, buf []byte, restore bool) {
	kb, vb := c.KS.Bytes(1), c.VS.Bytes(1)
	o := 0
	for i := from; i < to; i++ {
		slot := slotOf(i)
		for l := range c.K {
			if restore {
				c.KS.Copy(c.K[l], c.Stride, slot, buf[o:o+kb], 1, 0, 1)
				c.VS.Copy(c.V[l], c.Stride, slot, buf[o+kb:o+kb+vb], 1, 0, 1)
			} else {
				c.KS.Copy(buf[o:o+kb], 1, 0, c.K[l], c.Stride, slot, 1)
				c.VS.Copy(buf[o+kb:o+kb+vb], 1, 0, c.V[l], c.Stride, slot, 1)
			}
			o += kb + vb
		}
	}
}

// RowBytes is the size of one row of the cache: every layer's K and V
// slot.
func (c KV) RowBytes() int { return len(c.K) * (c.KS.Bytes(1) + c.VS.Bytes(1)) }

// Batcher is the sequence-keeping part of an inference.Batcher and an
// inference.SeqKVSnapshotter whose sequences share one KV cache through a
// Pool: Open, Fork, Grow, Release, SaveSeqKV and RestoreSeqKV. A runner
// embeds the one NewBatcher makes when it loads; the runner's Step checks
// runs with Pool and commits their rows with Commit or RowByRow.
type Batcher struct {
	Pool *Pool

	life  *graphio.Lifecycle
	cache func() KV
	kept  []sample.Logits // RowByRow's logits copies
}

// NewBatcher is a Batcher for a runner whose lifecycle is life (its Prefix
// starts errors; after Close the methods fail with its ErrClosed; a Grow
// that moves rows counts in its Stats): a pool of slots for up to
// sequences open at once, over the cache that cache returns once the
// writes into it in flight are done.
func NewBatcher(life *graphio.Lifecycle, slots, sequences int, cache func() KV) Batcher {
	return Batcher{Pool: New(slots, sequences), life: life, cache: cache}
}

func (b *Batcher) check() error {
	if b.life.Closed() {
		return b.life.ErrClosed
	}
	return nil
}

// Open starts a sequence with reserve slots of its own.
func (b *Batcher) Open(reserve int) (inference.SeqID, error) {
	return b.OpenBelow(reserve, b.Pool.Slots())
}

// OpenBelow is Open with the sequence's slots below slot below.
func (b *Batcher) OpenBelow(reserve, below int) (inference.SeqID, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	id, err := b.Pool.NewBelow(reserve, below)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", b.life.Prefix, err)
	}
	return id, nil
}

// Fork shares parent's rows [0, rows) and reserves slots above them.
func (b *Batcher) Fork(parent inference.SeqID, rows, reserve int) (inference.SeqID, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	id, err := b.Pool.Fork(parent, rows, reserve)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", b.life.Prefix, err)
	}
	return id, nil
}

// Grow extends id's own range to hold rows rows: in place when the slots
// after it are free, else by moving its own committed rows to a free range
// (above its shared rows, as any own range). A sequence whose rows a fork
// shares does not move. A shifted sequence grows by GrowRing.
func (b *Batcher) Grow(id inference.SeqID, rows int) error {
	var mv []Move
	var err error
	if s := b.Pool.Seq(id); s != nil && s.Gone > 0 {
		mv, err = b.Pool.GrowRing(id, rows)
	} else {
		var m *Move
		if m, err = b.Pool.Grow(id, rows); m != nil {
			mv = []Move{*m}
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", b.life.Prefix, err)
	}
	b.move(mv)
	return nil
}

// Release frees id's slots: its own range, and its hold on shared ones.
func (b *Batcher) Release(id inference.SeqID) { b.Pool.Release(id) }

// SaveSeqKV gathers rows [from, to) of sequence id (committed ones) into
// dst, in rows of every layer's K then V slot.
func (b *Batcher) SaveSeqKV(id inference.SeqID, from, to int, dst []byte) error {
	s, err := b.snapshotSeq(id, "SaveSeqKV")
	if err != nil {
		return err
	}
	c := b.cache()
	if s == nil || from < 0 || to > s.N || from > to || len(dst) != (to-from)*c.RowBytes() {
		return fmt.Errorf("%s: SaveSeqKV(%d, %d, %d) with %d bytes", b.life.Prefix, id, from, to, len(dst))
	}
	c.Rows(s.Slot, from, to, dst, false)
	return nil
}

// RestoreSeqKV scatters src into rows from… of sequence id (its own rows:
// from ≥ its shared rows, within its slots); they are then committed.
func (b *Batcher) RestoreSeqKV(id inference.SeqID, from int, src []byte) error {
	s, err := b.snapshotSeq(id, "RestoreSeqKV")
	if err != nil {
		return err
	}
	c := b.cache()
	rb := c.RowBytes()
	n := len(src) / rb
	if s == nil || from < s.Shared || from > s.N || len(src)%rb != 0 || from+n > s.Cap() {
		return fmt.Errorf("%s: RestoreSeqKV(%d, %d) of %d bytes (rows of %d bytes)", b.life.Prefix, id, from, len(src), rb)
	}
	c.Rows(s.Slot, from, from+n, src, true)
	s.N = from + n
	return nil
}

// snapshotSeq returns sequence id (nil if unknown) for op, a snapshot of its
// rows; it refuses a closed Batcher and a shifted sequence, whose rows are
// not the prefix of its tokens any more.
func (b *Batcher) snapshotSeq(id inference.SeqID, op string) (*Seq, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	s := b.Pool.Seq(id)
	if s != nil && s.Gone > 0 {
		return nil, fmt.Errorf("%s: %s of a sequence shifted past its window: its rows are not a prefix of its tokens", b.life.Prefix, op)
	}
	return s, nil
}
