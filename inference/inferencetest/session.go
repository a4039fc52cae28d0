package inferencetest

import (
	"context"
	"fmt"

	"github.com/hexserve/hexserve/inference"

	"github.com/hexserve/hexserve/inference/sample"
)

// Session drives one sequence of a model's pool for runner tests: Eval
// makes the sequence hold seq and returns the logits after its last token,
// as the engine's Steps would (runs of at most BatchLimits().Rows tokens).
// A failed Step releases the sequence; the next Eval opens another.
type Session struct {
	M    inference.Model
	id   inference.SeqID
	open bool
	cap  int
	toks []int32 // the tokens of the sequence's committed rows
}

// NewSession returns a session on m; it opens its sequence on first use.
func NewSession(m inference.Model) *Session { return &Session{M: m} }

// ID is the session's sequence (0 before the first Eval).
func (s *Session) ID() inference.SeqID { return s.id }

// Eval evaluates seq[start:] where start is the longest prefix of seq the
// sequence holds, at most valid and len(seq)-1, and returns the last row's
// logits (valid until the next call on the model) and start.
func (s *Session) Eval(ctx context.Context, seq []int32, valid int) (sample.Logits, int, error) {
	if len(seq) == 0 {
		return sample.Logits{}, 0, fmt.Errorf("inferencetest: empty sequence")
	}
	if err := s.reserve(len(seq)); err != nil {
		return sample.Logits{}, 0, err
	}
	start, most := 0, min(max(valid, 0), len(seq)-1, len(s.toks))
	for start < most && s.toks[start] == seq[start] {
		start++
	}
	s.toks = s.toks[:start]
	rowsPer := s.M.BatchLimits().Rows
	var l sample.Logits
	for at := start; at < len(seq); {
		n := min(rowsPer, len(seq)-at)
		rows, err := s.M.Step(ctx, []inference.Run{{Seq: s.id, Start: at, Tokens: seq[at : at+n]}})
		if err == nil && at+n == len(seq) {
			l, err = rows[0].Logits(ctx, n-1)
		}
		if err != nil {
			s.Close()
			return sample.Logits{}, 0, err
		}
		at += n
		s.toks = append(s.toks, seq[at-n:at]...)
	}
	return l, start, nil
}

// reserve opens the sequence, or grows it, to hold rows rows.
func (s *Session) reserve(rows int) error {
	if !s.open {
		// At least a prefill window's worth, as the engine reserves.
		ctx := min(s.M.Info().ContextLen, s.M.BatchLimits().Slots)
		want := max(min(rows, ctx), min(ctx, 128))
		id, err := s.M.Open(want)
		if err != nil {
			return err
		}
		s.id, s.open, s.cap, s.toks = id, true, want, s.toks[:0]
	}
	if rows > s.cap {
		if err := s.M.Grow(s.id, rows); err != nil {
			return err
		}
		s.cap = rows
	}
	return nil
}

// Close releases the sequence.
func (s *Session) Close() {
	if s.open {
		s.M.Release(s.id)
		s.open, s.toks = false, s.toks[:0]
	}
}

// Save copies the sequence's committed rows [from, to) into dst (the model
// must be an inference.SeqKVSnapshotter).
func (s *Session) Save(from, to int, dst []byte) error {
	snap, ok := s.M.(inference.SeqKVSnapshotter)
	if !ok || !s.open {
		return fmt.Errorf("inferencetest: no sequence to save")
	}
	return snap.SaveSeqKV(s.id, from, to, dst)
}

// Restore copies src into the sequence's rows from from on and tells the
// model (an inference.SeqTokenRecorder) which tokens of toks they hold, as
// the engine does; the sequence opens first when it is not open.
func (s *Session) Restore(from int, src []byte, toks []int32) error {
	snap, ok := s.M.(inference.SeqKVSnapshotter)
	if !ok {
		return fmt.Errorf("inferencetest: the model saves no rows")
	}
	rows := len(src) / max(snap.KVLayout().RowBytes, 1)
	if err := s.reserve(from + rows); err != nil {
		return err
	}
	if err := snap.RestoreSeqKV(s.id, from, src); err != nil {
		return err
	}
	s.toks = append(s.toks[:min(from, len(s.toks))], toks[from:from+rows]...)
	if r, ok := s.M.(inference.SeqTokenRecorder); ok && from+rows <= len(toks) {
		r.RestoredTokens(s.id, toks[:from+rows])
	}
	return nil
}

// Step runs seq[start:] in one Step (a verify's rows, for instance: start
// at most the rows the sequence holds) and returns its Rows.
func (s *Session) Step(ctx context.Context, seq []int32, start int) (inference.Rows, error) {
	if err := s.reserve(len(seq)); err != nil {
		return nil, err
	}
	rows, err := s.M.Step(ctx, []inference.Run{{Seq: s.id, Start: start, Tokens: seq[start:]}})
	if err != nil {
		return nil, err
	}
	s.toks = append(s.toks[:min(start, len(s.toks))], seq[start:]...)
	return rows[0], nil
}
