package slotpool

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/inference"
)

// slots is the slots of s's rows [from, to).
func slots(s *Seq, from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, s.Slot(i))
	}
	return out
}

// held is the slots of the rows s holds of [0, n), as Held gives them.
func held(s *Seq, n int) []int {
	var out []int
	s.Held(n, func(slot, row, k int) {
		for j := range k {
			if s.Slot(row+j) != slot+j {
				panic("Held's span is not consecutive slots")
			}
			out = append(out, slot+j)
		}
	})
	return out
}

// TestRingWraps: a sequence of 8 slots with a sink of 2 shifts by 2 rows
// three times; its next rows take the freed slots in turn and wrap round
// the ring, positions keep counting, and the run checks, the mask's slots
// and Beyond follow the ring.
func TestRingWraps(t *testing.T) {
	p := New(12, 2)
	other, _ := p.New(2) // [0, 2): the ring is not at slot 0
	a, err := p.New(8)   // [2, 10)
	if err != nil {
		t.Fatal(err)
	}
	s := p.Seq(a)
	s.N = 8
	for _, st := range []struct {
		name        string
		n           int   // rows committed before the shift
		rows        []int // slots of the rows the ring takes next: positions n…n+1
		held        []int // slots held after committing them, in position order
		checkBefore int   // the first row a run may start at after the shift
	}{
		{"first", 8, []int{4, 5}, []int{2, 3, 6, 7, 8, 9, 4, 5}, 4},
		{"second", 10, []int{6, 7}, []int{2, 3, 8, 9, 4, 5, 6, 7}, 6},
		{"third wraps", 12, []int{8, 9}, []int{2, 3, 4, 5, 6, 7, 8, 9}, 8},
		{"fourth", 14, []int{4, 5}, []int{2, 3, 6, 7, 8, 9, 4, 5}, 10},
	} {
		t.Run(st.name, func(t *testing.T) {
			if s.N != st.n {
				t.Fatalf("N %d, want %d", s.N, st.n)
			}
			if mv, err := p.Shift(a, 2, 2); err != nil || mv != nil {
				t.Fatalf("Shift: %v %v", mv, err)
			}
			if got := slots(s, st.n, st.n+2); !slices.Equal(got, st.rows) {
				t.Errorf("next rows' slots %v, want %v", got, st.rows)
			}
			if s.Cap() != st.n+2 {
				t.Errorf("Cap %d, want %d", s.Cap(), st.n+2)
			}
			for _, c := range []struct {
				start, n int
				ok       bool
			}{
				{st.n, 2, true},
				{st.n - 1, 3, true},            // again from a held row
				{st.n, 3, false},               // past the ring
				{st.checkBefore - 1, 1, false}, // an evicted row
				{st.n + 1, 1, false},           // past the committed rows
			} {
				err := p.Check([]inference.Run{{Seq: a, Start: c.start, Tokens: make([]int32, c.n)}}, 8, 10)
				if (err == nil) != c.ok {
					t.Errorf("run of %d at %d: %v, want ok %v", c.n, c.start, err, c.ok)
				}
			}
			s.N += 2
			if got := held(s, s.N); !slices.Equal(got, st.held) {
				t.Errorf("held slots %v, want %v", got, st.held)
			}
			if top := s.Top(s.N); top != 9 || !p.Beyond(9) || p.Beyond(10) {
				t.Errorf("Top %d, Beyond(9) %v, Beyond(10) %v", top, p.Beyond(9), p.Beyond(10))
			}
		})
	}
	p.Seq(other).N = 2
	if _, err := p.Fork(a, 3, 1); err == nil {
		t.Error("a fork of rows past the sink of a shifted sequence")
	}
	if _, err := p.Fork(a, 2, 1); !errors.Is(err, inference.ErrNoSlots) { // the sink may be shared: 2 open already
		t.Errorf("a fork of the sink: %v", err)
	}
}

// TestShiftRefused: the sink stays, rows not committed are not evicted, a
// sequence that never shifted does not grow as a ring, and Grow does not
// grow a ring.
func TestShiftRefused(t *testing.T) {
	p := New(16, 2)
	a, _ := p.New(8)
	p.Seq(a).N = 6
	for _, c := range []struct {
		name    string
		keep, n int
	}{
		{"nothing", 2, 0},
		{"negative sink", -1, 2},
		{"past the committed rows", 2, 5},
		{"unknown", 0, 0},
	} {
		id := a
		if c.name == "unknown" {
			id, c.n = 99, 1
		}
		if _, err := p.Shift(id, c.keep, c.n); err == nil {
			t.Errorf("%s: Shift(%d, %d, %d) succeeded", c.name, id, c.keep, c.n)
		}
	}
	if _, err := p.GrowRing(a, 10); err == nil {
		t.Error("GrowRing of a sequence that has not shifted")
	}
	if _, err := p.Shift(a, 2, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Shift(a, 3, 1); err == nil || !strings.Contains(err.Error(), "sink") {
		t.Errorf("a second shift with another sink: %v", err)
	}
	if _, err := p.Grow(a, 11); err == nil {
		t.Error("Grow of a shifted sequence past its slots")
	}
	if mv, err := p.Grow(a, 10); err != nil || mv != nil { // 8 held + 2 evicted: fits
		t.Errorf("Grow within a shifted sequence's slots: %v %v", mv, err)
	}
}

// TestRingGrows: a shifted sequence that needs more slots than its ring
// moves to a range of the new size, its held rows in position order, and
// goes on from there.
func TestRingGrows(t *testing.T) {
	p := New(24, 2)
	a, _ := p.New(6) // [0, 6)
	s := p.Seq(a)
	s.N = 6
	p.Shift(a, 1, 2) // rows 6, 7 in slots 1, 2
	s.N = 8
	p.Shift(a, 1, 1) // row 8 in slot 3: the ring holds 0 | 4 5 1 2 3 (rows 0 | 4 5 6 7 8)
	s.N = 9
	mv, err := p.GrowRing(a, 14) // 14 − 3 evicted = 11 slots
	if err != nil {
		t.Fatal(err)
	}
	want := []Move{{From: 0, To: 6, N: 1}, {From: 4, To: 7, N: 2}, {From: 1, To: 9, N: 3}}
	if !slices.Equal(mv, want) {
		t.Errorf("moves %v, want %v", mv, want)
	}
	if got := held(s, 14); !slices.Equal(got, []int{6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}) {
		t.Errorf("held slots after the move %v", got)
	}
	if s.Cap() != 14 || p.free(0, 6) != true || p.High() != 17 {
		t.Errorf("Cap %d, old range free %v, High %d", s.Cap(), p.free(0, 6), p.High())
	}
	if mv, err := p.GrowRing(a, 14); err != nil || mv != nil {
		t.Errorf("GrowRing within its slots: %v %v", mv, err)
	}
}

// TestShiftCopiesShared: a sequence holding rows another sequence also
// holds (a fork's shared rows; a parent's rows a fork shares) copies its
// rows into a range of its own before it evicts any: the cache's rows move
// with it, and the other sequence's rows stay untouched.
func TestShiftCopiesShared(t *testing.T) {
	for _, tt := range []struct {
		name  string
		shift string // "fork" or "parent"
		moves []Move
	}{
		// parent a [0, 8) with 8 rows; fork f shares rows 0–3, own [8, 12) with rows 4–6
		{"fork", "fork", []Move{{From: 0, To: 12, N: 4}, {From: 8, To: 16, N: 3}}},
		{"parent", "parent", []Move{{From: 0, To: 12, N: 8}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, kv := testBatcher(t, 24)
			a, _ := b.Open(8)
			b.Pool.Seq(a).N = 8
			f, err := b.Fork(a, 4, 4)
			if err != nil {
				t.Fatal(err)
			}
			b.Pool.Seq(f).N = 7
			id, other := f, a
			if tt.shift == "parent" {
				id, other = a, f
			}
			s, o := b.Pool.Seq(id), b.Pool.Seq(other)
			before, otherBefore := rowsOf(kv, s, s.N), rowsOf(kv, o, o.N)
			otherSlots := slots(o, 0, o.N)
			if err := b.Shift(id, 1, 2); err != nil {
				t.Fatal(err)
			}
			if s.Shared != 0 || s.Lo != 12 {
				t.Errorf("after the shift: shared %d, own slots from %d", s.Shared, s.Lo)
			}
			if b.life.Stats.KVMoves != 1 {
				t.Errorf("%d KV moves, want 1", b.life.Stats.KVMoves)
			}
			for i := range s.N {
				if i >= 1 && i < 3 {
					continue // evicted
				}
				if !bytes.Equal(rowsOf(kv, s, i+1)[i], before[i]) {
					t.Errorf("row %d's KV did not move with it", i)
				}
			}
			if !slices.Equal(slots(o, 0, o.N), otherSlots) || !slices.EqualFunc(rowsOf(kv, o, o.N), otherBefore, bytes.Equal) {
				t.Error("the other sequence's rows moved")
			}
			for _, i := range slots(o, 0, o.N) {
				if b.Pool.ref[i] != 1 {
					t.Errorf("slot %d of the other sequence held %d times, want 1", i, b.Pool.ref[i])
				}
			}
		})
	}
}

// TestSnapshotOfShiftedRefused: a shifted sequence's rows are not a prefix
// of its tokens: SaveSeqKV and RestoreSeqKV refuse it.
func TestSnapshotOfShiftedRefused(t *testing.T) {
	b, kv := testBatcher(t, 8)
	id, _ := b.Open(8)
	b.Pool.Seq(id).N = 8
	buf := make([]byte, kv.RowBytes())
	if err := b.SaveSeqKV(id, 0, 1, buf); err != nil {
		t.Fatalf("before the shift: %v", err)
	}
	if err := b.Shift(id, 1, 2); err != nil {
		t.Fatal(err)
	}
	if err := b.SaveSeqKV(id, 0, 1, buf); err == nil || !strings.Contains(err.Error(), "shifted") {
		t.Errorf("SaveSeqKV of a shifted sequence: %v", err)
	}
	if err := b.RestoreSeqKV(id, 8, buf); err == nil || !strings.Contains(err.Error(), "shifted") {
		t.Errorf("RestoreSeqKV into a shifted sequence: %v", err)
	}
}

// testBatcher is a Batcher over a cache of slots slots, 2 layers, every
// byte of it distinct by slot and layer.
func testBatcher(t *testing.T, n int) (*Batcher, KV) {
	t.Helper()
	const layers, nkv, hd, es = 2, 2, 4, 1
	var k, v [][]byte
	for l := range layers {
		kb, vb := make([]byte, nkv*hd*n*es), make([]byte, nkv*hd*n*es)
		for i := range kb {
			kb[i], vb[i] = byte(i*7+l), byte(i*11+l+3)
		}
		k, v = append(k, kb), append(v, vb)
	}
	c := NewCache(k, v, nkv, hd, es, n, 0)
	t.Cleanup(func() { c.Close() })
	life := &graphio.Lifecycle{Prefix: "test", ErrClosed: errors.New("closed"), Stats: &plan.Stats{}}
	b := NewBatcher(life, n, 4, func() KV { c.Sync(); return c.KV })
	return &b, c.KV
}

// rowsOf is s's rows [0, n), each its bytes over every layer (evicted
// rows: nil).
func rowsOf(kv KV, s *Seq, n int) [][]byte {
	out := make([][]byte, n)
	s.Held(n, func(_, row, k int) {
		for i := row; i < row+k; i++ {
			out[i] = make([]byte, kv.RowBytes())
			kv.Rows(s.Slot, i, i+1, out[i], false)
		}
	})
	return out
}
