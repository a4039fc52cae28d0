package inference

import (
	"context"
	"fmt"
	"time"
)

// single drives a Model without Batcher as a pool of one sequence: a Step
// is an Eval (or a Verify for a run of 1+k tokens after the first), with
// the resident-prefix reuse, owner rule and KV store of a one-sequence
// engine. Fork always fails, so a request's choices run one after another
// and reuse the prompt rows through the prefix cache.
type single struct {
	e        *Engine
	model    Model
	verifier Verifier // nil: no speculative decoding

	cached []int32 // tokens whose KV rows the model holds
	owner  string  // the Request.Owner those rows were computed for
	seq    []int32 // the open sequence's tokens
	open   bool
	first  bool // the open sequence has not run yet
	id     SeqID
	reused int // rows the open sequence's first Step reused
}

var _ Batcher = (*single)(nil)

func newSingle(e *Engine, m Model) *single {
	s := &single{e: e, model: m}
	if v, ok := m.(Verifier); ok && e.cfg.Speculative.Enabled {
		s.verifier = v
	}
	return s
}

func (s *single) BatchLimits() BatchLimits {
	n := s.e.info.ContextLen
	return BatchLimits{Sequences: 1, Rows: n, Slots: n}
}

// setOwner is called before Open: rows computed for another owner are never
// reused, since their reuse (cached_tokens, or the time saved) would tell
// this owner how far its prompt matches the other's.
func (s *single) setOwner(owner string) {
	if owner != s.owner {
		s.cached, s.owner = s.cached[:0], owner
	}
}

func (s *single) Open(int) (SeqID, error) {
	if s.open {
		return 0, ErrNoSlots
	}
	s.open, s.first, s.reused = true, true, 0
	s.seq = s.seq[:0]
	s.id++
	return s.id, nil
}

func (s *single) Fork(SeqID, int, int) (SeqID, error) { return 0, ErrNoSlots }

func (s *single) Release(id SeqID) {
	if s.open && id == s.id {
		s.open = false
	}
}

func (s *single) StepCost(rows int) time.Duration {
	if s.verifier == nil {
		return time.Duration(rows) * time.Millisecond
	}
	v, d := s.verifier.Costs(rows)
	if rows <= 1 {
		return d
	}
	return v
}

// maxVerify is how many tokens one verify run may carry now.
func (s *single) maxVerify() int {
	if s.verifier == nil || s.first {
		return 0
	}
	return s.verifier.MaxVerify(len(s.seq))
}

func (s *single) Step(ctx context.Context, runs []Run) ([]Rows, error) {
	if len(runs) != 1 || !s.open || runs[0].Seq != s.id {
		return nil, fmt.Errorf("inference: a one-sequence model got %d runs", len(runs))
	}
	r := runs[0]
	first := s.first
	s.seq = append(s.seq[:min(r.Start, len(s.seq))], r.Tokens...)
	if !first {
		s.truncate(r.Start)
	}
	valid := commonPrefix(s.cached, s.seq)
	s.first = false
	if first {
		valid = s.e.kv.restore(s, s.seq, valid)
	}
	valid = min(valid, len(s.seq)-1)
	if !first && len(r.Tokens) > 1 && s.verifier != nil && valid == r.Start {
		rows, err := s.e.verify(ctx, s.verifier, s.seq, valid)
		if err != nil {
			s.cached = s.cached[:0]
			return nil, err
		}
		s.cached = append(s.cached[:0], s.seq...)
		return []Rows{rows}, nil
	}
	l, reused, err := s.e.eval(ctx, s.seq, valid)
	if err != nil {
		s.cached = s.cached[:0]
		return nil, err
	}
	if first {
		s.reused = reused
	}
	s.cached = append(s.cached[:0], s.seq...)
	return []Rows{lastRow{n: len(r.Tokens), l: l}}, nil
}

// truncate forgets resident rows from n on (rejected draft rows).
func (s *single) truncate(n int) { s.cached = s.cached[:min(len(s.cached), n)] }

// save stores the resident rows of a finished request in the KV store.
func (s *single) save(req *Request) {
	if len(s.cached) > 0 {
		s.e.kv.save(s.e, req, s.cached)
	}
}

// lastRow is an Eval's result as Rows: only the last row has logits.
type lastRow struct {
	n int
	l Logits
}

func (r lastRow) Len() int { return r.n }

func (r lastRow) Logits(_ context.Context, i int) (Logits, error) {
	if i != r.n-1 {
		return Logits{}, fmt.Errorf("inference: row %d of an Eval of %d tokens has no logits", i, r.n)
	}
	return r.l, nil
}

// Grow: the one sequence may always hold the whole context.
func (s *single) Grow(id SeqID, rows int) error {
	if !s.open || id != s.id || rows > s.e.info.ContextLen {
		return ErrNoSlots
	}
	return nil
}
