package qhexrt

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// plainGreedy decodes n tokens after prompt one decode run at a time and returns
// the tokens and a copy of the logits that chose each.
func plainGreedy(t *testing.T, r *Runner, prompt []int32, n int) ([]int32, [][]float32) {
	t.Helper()
	seq := slices.Clone(prompt)
	var logits [][]float32
	valid := 0
	for range n {
		l, _, err := evalOn(r).Eval(context.Background(), seq, valid)
		if err != nil {
			t.Fatal(err)
		}
		logits = append(logits, slices.Clone(l.F32))
		valid = len(seq)
		seq = append(seq, int32(tinyllama.Argmax(l.F32)))
	}
	return seq[len(prompt):], logits
}

// TestVerifyMatchesDecode: on a chunked f32 bundle, each row of a verify
// run (one Step run over the last accepted token and a draft) has bit for
// bit the logits
// plain decoding computes there, for an accepted prefix of every length; the
// decode step after a partly accepted verify continues exactly.
func TestVerifyMatchesDecode(t *testing.T) {
	r := openTiny(t, f32(simfile.Chunked, 16, simfile.MaskAdditive))
	prompt := []int32{1, 450, 4996, 17354, 1701, 30}
	toks, want := plainGreedy(t, r, prompt, 12)
	ctx := context.Background()
	for accepted := 0; accepted <= 6; accepted++ {
		// The draft: the true continuation for accepted tokens, then wrong ones.
		draft := slices.Clone(toks[1:8])
		for i := accepted; i < len(draft); i++ {
			draft[i] = (draft[i] + 1) % int32(r.Info().VocabSize)
		}
		if _, _, err := evalOn(r).Eval(ctx, prompt, 0); err != nil {
			t.Fatal(err)
		}
		valid := len(prompt)
		seq := append(append(slices.Clone(prompt), toks[0]), draft...)
		rows, err := evalOn(r).Step(ctx, seq, valid)
		if err != nil {
			t.Fatal(err)
		}
		if rows.Len() != len(draft)+1 {
			t.Fatalf("%d rows for %d tokens", rows.Len(), len(draft)+1)
		}
		for i := 0; i <= accepted; i++ {
			l, err := rows.Logits(ctx, i)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(l.F32, want[1+i]) {
				t.Fatalf("accepted %d: verify row %d differs from the decode step's logits", accepted, i)
			}
		}
		// The next decode step, over the committed rows only.
		committed := append(append(slices.Clone(prompt), toks[:accepted+1]...), toks[accepted+1])
		l, _, err := evalOn(r).Eval(ctx, committed, len(committed)-1)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(l.F32, want[accepted+2]) {
			t.Fatalf("accepted %d: the decode step after the verify differs", accepted)
		}
		if _, err := rows.Logits(ctx, accepted+1); err == nil {
			t.Error("rows were readable after a later call")
		}
	}
}

// TestVerifyLimits: a verify run carries at most a window of tokens and
// starts within the committed rows.
func TestVerifyLimits(t *testing.T) {
	ctx := context.Background()
	prompt := []int32{1, 450, 4996}
	for _, v := range []variant{f32(simfile.QHexRT, 16, simfile.MaskAdditive), f32(simfile.Chunked, 16, simfile.MaskAdditive)} {
		t.Run(v.String(), func(t *testing.T) {
			r := openTiny(t, v)
			s := evalOn(r)
			if _, _, err := s.Eval(ctx, prompt, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Step(ctx, append(slices.Clone(prompt), make([]int32, 17)...), len(prompt)); err == nil {
				t.Error("a run of 17 tokens on a 16-token window succeeded")
			}
			if _, err := s.Step(ctx, append(slices.Clone(prompt), 5, 6, 7, 8), len(prompt)+1); err == nil {
				t.Error("a run past the committed rows succeeded")
			}
			rows, err := s.Step(ctx, append(slices.Clone(prompt), 5, 6, 7), len(prompt)-1)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rows.Logits(ctx, 3); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestVerifyNearTies measures how often a verify row's greedy token differs
// from the decode step's on a 16-bit bundle (f16 graph I/O and KV, as on the
// phone), where the multi-token graph's numerics differ from the decode
// graph's: only near-ties may flip, so the rate must stay small. The rate is
// logged (docs/performance.md quotes it).
func TestVerifyNearTies(t *testing.T) {
	r := openTiny(t, variant{contract: simfile.Chunked, window: 16, io: simfile.F16, kv: simfile.F16, mask: simfile.MaskAdditive})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	vocab := int32(r.Info().VocabSize)
	rows, flips := 0, 0
	for range 12 {
		prompt := make([]int32, 4+rng.IntN(40))
		for i := range prompt {
			prompt[i] = rng.Int32N(vocab)
		}
		// Plain greedy decoding.
		seq := slices.Clone(prompt)
		for i := range 15 {
			valid := len(seq) - 1
			if i == 0 {
				valid = 0 // the rows hold the previous prompt
			}
			l, _, err := evalOn(r).Eval(ctx, seq, valid)
			if err != nil {
				t.Fatal(err)
			}
			seq = append(seq, argmax(l))
		}
		// The same tokens verified in one call after the prompt's first token.
		if _, _, err := evalOn(r).Eval(ctx, prompt, 0); err != nil {
			t.Fatal(err)
		}
		vr, err := evalOn(r).Step(ctx, seq[:len(prompt)+15], len(prompt))
		if err != nil {
			t.Fatal(err)
		}
		for i := range vr.Len() - 1 {
			l, err := vr.Logits(ctx, i)
			if err != nil {
				t.Fatal(err)
			}
			rows++
			if argmax(l) != seq[len(prompt)+i+1] {
				flips++
			}
		}
	}
	t.Logf("f16 I/O and KV: %d of %d verify rows chose another greedy token than the decode step", flips, rows)
	if flips*20 > rows {
		t.Errorf("%d of %d rows flipped (more than 5%%)", flips, rows)
	}
}
