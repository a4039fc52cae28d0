package inferencetest

import (
	"context"
	"errors"
	"testing"

	"github.com/hexserve/hexserve/inference"

	"github.com/hexserve/hexserve/inference/sample"
)

func TestScripted(t *testing.T) {
	m := NewScripted(inference.ModelInfo{VocabSize: 10, EOS: []int32{9}}, []int32{3, 4})
	argmax := func(l sample.Logits) int32 { return int32(Argmax(l)) }
	ctx := context.Background()
	id, err := m.Open(8)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Open(8); !errors.Is(err, inference.ErrNoSlots) {
		t.Fatalf("a second sequence: %v, want ErrNoSlots", err)
	}
	seq := []int32{1, 2}
	start := 0
	for _, want := range []int32{3, 4, 9, 9} {
		rows, err := m.Step(ctx, []inference.Run{{Seq: id, Start: start, Tokens: seq[start:]}})
		if err != nil {
			t.Fatal(err)
		}
		l, err := rows[0].Logits(ctx, rows[0].Len()-1)
		if err != nil || argmax(l) != want {
			t.Fatalf("seq %v: %d %v, want %d", seq, argmax(l), err, want)
		}
		start = len(seq)
		seq = append(seq, want)
	}
	boom := errors.New("boom")
	m.Fail(boom)
	if _, err := m.Step(ctx, []inference.Run{{Seq: id, Start: start, Tokens: seq[start:]}}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	m.Release(id)
	id, _ = m.Open(8)
	if rows, err := m.Step(ctx, []inference.Run{{Seq: id, Tokens: []int32{1}}}); err != nil {
		t.Fatal(err)
	} else if l, _ := rows[0].Logits(ctx, 0); argmax(l) != 3 {
		t.Fatal("a new prompt restarts the script")
	}
	if c := m.Calls(); len(c) != 6 || c[1].Valid != 2 || len(c[1].Seq) != 3 {
		t.Fatalf("calls %+v", c)
	}
	v := NewVocab(map[int32]string{1: "hi", 2: "<|eot_id|>"})
	if string(v.Piece(1)) != "hi" || v.IsSpecial(1) || !v.IsSpecial(2) || len(v.Piece(5)) != 0 {
		t.Fatal("vocab")
	}
}
