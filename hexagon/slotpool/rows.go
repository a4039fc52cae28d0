package slotpool

import (
	"context"
	"fmt"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/sample"
)

// Commit marks every run's rows committed after one call evaluated them
// all, and returns each run's logits rows: in logits (the call's output,
// vocab entries per row), run i's follow the runs before it.
func (b *Batcher) Commit(runs []inference.Run, logits sample.Logits, vocab int) []inference.Rows {
	out := make([]inference.Rows, len(runs))
	o := 0
	for i, run := range runs {
		out[i] = callRows{prefix: b.life.Prefix, logits: logits, vocab: vocab, off: o, n: len(run.Tokens)}
		o += len(run.Tokens)
		b.Pool.Seq(run.Seq).N = run.Start + len(run.Tokens)
	}
	return out
}

// RowByRow evaluates runs one row per call: call evaluates a run of one
// row, whose logits it leaves in logits (vocab entries per row). Each row is
// committed after its call, and a copy of its logits kept until the next
// RowByRow (the next call overwrites the output).
func (b *Batcher) RowByRow(ctx context.Context, runs []inference.Run, logits sample.Logits, vocab int, call func(one inference.Run) error) ([]inference.Rows, error) {
	out := make([]inference.Rows, len(runs))
	k := 0
	for i, run := range runs {
		cr := keptRows{prefix: b.life.Prefix}
		for j := range run.Tokens {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			one := inference.Run{Seq: run.Seq, Start: run.Start + j, Tokens: run.Tokens[j : j+1]}
			if err := call(one); err != nil {
				return nil, err
			}
			b.Pool.Seq(run.Seq).N = one.Start + 1
			cr.rows = append(cr.rows, b.keep(k, graphio.Row(logits, 0, vocab)))
			k++
		}
		out[i] = cr
	}
	return out, nil
}

// keep copies l into the k-th kept-logits buffer.
func (b *Batcher) keep(k int, l sample.Logits) sample.Logits {
	for len(b.kept) <= k {
		b.kept = append(b.kept, sample.Logits{})
	}
	c := b.kept[k]
	c.Type, c.Scale, c.Offset = l.Type, l.Scale, l.Offset
	if l.Type == sample.F32 {
		c.F32, c.Raw16 = append(c.F32[:0], l.F32...), nil
	} else {
		c.Raw16, c.F32 = append(c.Raw16[:0], l.Raw16...), nil
	}
	b.kept[k] = c
	return c
}

// callRows are one run's logits rows of a call's output.
type callRows struct {
	prefix        string
	logits        sample.Logits
	vocab, off, n int
}

func (w callRows) Len() int { return w.n }

// Held: every row is in the call's output buffer until the next call.
func (w callRows) Held() bool { return true }

func (w callRows) Logits(_ context.Context, i int) (sample.Logits, error) {
	if i < 0 || i >= w.n {
		return sample.Logits{}, fmt.Errorf("%s: row %d of %d", w.prefix, i, w.n)
	}
	return graphio.Row(w.logits, w.off+i, w.vocab), nil
}

// keptRows are one run's logits rows kept from one-row calls.
type keptRows struct {
	prefix string
	rows   []sample.Logits
}

func (w keptRows) Len() int { return len(w.rows) }

// Held: the kept copies stay until the next RowByRow.
func (w keptRows) Held() bool { return true }

func (w keptRows) Logits(_ context.Context, i int) (sample.Logits, error) {
	if i < 0 || i >= len(w.rows) {
		return sample.Logits{}, fmt.Errorf("%s: row %d of %d", w.prefix, i, len(w.rows))
	}
	return w.rows[i], nil
}
