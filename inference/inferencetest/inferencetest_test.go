package inferencetest

import (
	"context"
	"errors"
	"testing"

	"github.com/hexserve/hexserve/inference"
)

func TestScripted(t *testing.T) {
	m := NewScripted(inference.ModelInfo{VocabSize: 10, EOS: []int32{9}}, []int32{3, 4})
	argmax := func(l inference.Logits) int32 {
		best := 0
		for i, v := range l.F32 {
			if v > l.F32[best] {
				best = i
			}
		}
		return int32(best)
	}
	seq := []int32{1, 2}
	for _, want := range []int32{3, 4, 9, 9} {
		l, reused, err := m.Eval(context.Background(), seq, len(seq)-1)
		if err != nil || reused != len(seq)-1 || argmax(l) != want {
			t.Fatalf("seq %v: %d %v, want %d", seq, argmax(l), err, want)
		}
		seq = append(seq, want)
	}
	boom := errors.New("boom")
	m.Fail(boom)
	if _, _, err := m.Eval(context.Background(), []int32{1}, 0); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if l, _, _ := m.Eval(context.Background(), []int32{1}, 0); argmax(l) != 3 {
		t.Fatal("a new prompt restarts the script")
	}
	if len(m.Calls()) != 6 {
		t.Fatalf("%d calls", len(m.Calls()))
	}
	v := NewVocab(map[int32]string{1: "hi", 2: "<|eot_id|>"})
	if string(v.Piece(1)) != "hi" || v.IsSpecial(1) || !v.IsSpecial(2) || len(v.Piece(5)) != 0 {
		t.Fatal("vocab")
	}
}
