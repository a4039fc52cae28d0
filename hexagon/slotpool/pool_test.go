package slotpool

import (
	"errors"
	"testing"

	"github.com/hexserve/hexserve/inference"
)

// TestPool: first-fit ranges, forks above their parent's shared rows,
// growth in place and by a move, release, and the run checks.
func TestPool(t *testing.T) {
	p := New(16, 3)
	a, err := p.New(4) // [0, 4)
	if err != nil {
		t.Fatal(err)
	}
	p.Seq(a).N = 3
	f, err := p.Fork(a, 2, 3) // shares slots 0, 1; own [4, 7)
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Seq(f); s.Slot(1) != 1 || s.Slot(2) != 4 || s.Cap() != 5 {
		t.Fatalf("fork slots %d %d, cap %d", s.Slot(1), s.Slot(2), s.Cap())
	}
	if mv, err := p.Grow(f, 7); err != nil || mv != nil || p.Seq(f).Hi != 9 {
		t.Fatalf("grow in place: %v %v, hi %d", mv, err, p.Seq(f).Hi)
	}
	if _, err := p.Grow(a, 6); !errors.Is(err, inference.ErrNoSlots) {
		t.Fatalf("a move of rows a fork shares: %v", err)
	}
	b, _ := p.New(2) // [9, 11)
	p.Seq(b).N = 2
	if mv, err := p.Grow(b, 4); err != nil || mv != nil {
		t.Fatalf("grow in place at the end: %v %v", mv, err)
	}
	p.Release(f)
	if _, err := p.New(1); err != nil { // slot 4 (first fit), 3 open
		t.Fatal(err)
	}
	if _, err := p.New(1); !errors.Is(err, inference.ErrNoSlots) {
		t.Fatalf("a fourth sequence: %v", err)
	}
	p.Release(a)
	mv, err := p.Grow(b, 6) // [9, 13) is followed by free slots: in place
	if err != nil || mv != nil {
		t.Fatalf("grow: %v %v", mv, err)
	}
	if !p.Beyond(10) || p.Beyond(11) {
		t.Fatal("Beyond disagrees with b's committed rows [9, 11)")
	}
	for _, c := range []struct {
		runs []inference.Run
		ok   bool
	}{
		{[]inference.Run{{Seq: b, Start: 2, Tokens: []int32{1}}}, true},
		{[]inference.Run{{Seq: b, Start: 3, Tokens: []int32{1}}}, false},           // past the committed rows
		{[]inference.Run{{Seq: b, Start: 2, Tokens: make([]int32, 5)}}, false},     // past the reserve
		{[]inference.Run{{Seq: b, Start: 0, Tokens: []int32{1}}, {Seq: b}}, false}, // twice
		{[]inference.Run{{Seq: 99, Tokens: []int32{1}}}, false},
		{[]inference.Run{{Seq: b, Start: 2, Tokens: []int32{10}}}, false}, // vocabulary
	} {
		if err := p.Check(c.runs, 8, 10); (err == nil) != c.ok {
			t.Errorf("Check(%v) = %v, want ok %v", c.runs, err, c.ok)
		}
	}
}

// TestLimits: engine.max_sequences auto is min(64, the call's rows, slots ÷
// 256 rounded), at least 1.
func TestLimits(t *testing.T) {
	for _, tt := range []struct{ rows, slots, auto int }{
		{128, 4095, 16}, // a 4096-token Genie bundle
		{128, 511, 2},   // a 512-slot bundle
		{32, 2047, 8},   // a 2048-token .pte, AR 32
		{16, 255, 1},    // the tiny QHexRT bundle
		{128, 65535, 64},
		{4, 4095, 4}, // rows bound it
	} {
		if l := Limits(tt.rows, tt.slots); l.Auto != tt.auto || l.Sequences != MaxSequences || l.Rows != tt.rows || l.Slots != tt.slots {
			t.Errorf("Limits(%d, %d) = %+v, want Auto %d", tt.rows, tt.slots, l, tt.auto)
		}
	}
}

// TestNewBelow: NewBelow places a sequence first fit below its bound, or
// fails with ErrNoSlots when the slots there are taken.
func TestNewBelow(t *testing.T) {
	p := New(16, 4)
	a, _ := p.New(6) // [0, 6)
	if _, err := p.NewBelow(6, 10); !errors.Is(err, inference.ErrNoSlots) {
		t.Fatalf("6 slots below 10 beside [0, 6): %v", err)
	}
	b, err := p.NewBelow(4, 10)
	if err != nil || p.Seq(b).Lo != 6 || p.Seq(b).Hi != 10 {
		t.Fatalf("4 slots below 10: %v, seq %+v", err, p.Seq(b))
	}
	p.Release(a)
	c, err := p.NewBelow(6, 10)
	if err != nil || p.Seq(c).Lo != 0 {
		t.Fatalf("6 slots below 10 after a release: %v, seq %+v", err, p.Seq(c))
	}
}
