package inference

import (
	"fmt"
	"slices"
)

// Context shift (Request.ContextShift): a decoding sequence whose next row
// would pass the window frees a quarter of it, keeping its sink (the
// prompt's first Request.Keep tokens) and its newest rows. A ContextShifter
// model evicts the oldest rows after the sink in place (a ring buffer at the
// original positions: nothing is read again); any other model, and a
// ContextShifter whose positions would pass MaxPositions, reads the sink's
// and the newest rows' tokens again at new positions (renumbering), as
// prompt chunks that share steps with the other sequences' decode rows.

// shiftKinds label hexserve_context_shifts_total.
const (
	shiftRing   = "ring"
	shiftReread = "reread"
)

// full reports whether decoding s's next row would pass the window, and s
// may go on past it.
func (e *Engine) full(s *seq) bool {
	return s.g.req.ContextShift && s.held()+1 > e.info.ContextLen
}

// shiftRows is how many rows a shift frees: a quarter of the window, so
// masks and bookkeeping change rarely.
func (e *Engine) shiftRows() int { return max(1, e.info.ContextLen/4) }

// sink is how many of s's first tokens every shift keeps: the request's
// Keep (at least the first token), at most half the window.
func (e *Engine) sink(s *seq) int {
	return min(max(s.g.req.Keep, 1), e.info.ContextLen/2)
}

// shift frees a quarter of the window for decoding sequence s: a Shift of
// its oldest rows after the sink when the model is a ContextShifter and
// the rows until the next shift stay below its MaxPositions, else a
// re-read. Before its first shift, the first choice's rows go to the KV
// store (later, they are not the rows of a prefix of its tokens).
func (e *Engine) shift(s *seq) {
	keep, n, pos := e.sink(s), e.shiftRows(), s.committed
	if !s.shifted && s.c == 0 {
		// Its rows are still a prefix of its tokens: saved for the next
		// turn (the sink's rows above all), as a finished sequence's are.
		e.kv.save(e, s, s.g.req.CacheKey)
	}
	cs, ok := e.model.(ContextShifter)
	if ok && (cs.MaxPositions() == 0 || pos+n <= cs.MaxPositions()) {
		if err := cs.Shift(s.id, keep, n); err != nil {
			e.endSeq(s, FinishError, fmt.Errorf("inference: model: context shift: %w", err))
			return
		}
		s.evicted += n
		s.shifted = true
		e.shifted(s, shiftRing, s.held(), n, pos)
		return
	}
	e.reread(s, keep, n)
}

// reread makes s hold its sink and its newest rows (the window less n), at
// positions 0, 1, …: its tokens become those, and the rows after the sink
// are evaluated again (the sink's rows stay), or, when s's rows from the
// sink on are shared with a Fork or it holds a ring's evicted positions,
// all of them in a new sequence (s is released and reopened as a preempted
// one is).
func (e *Engine) reread(s *seq, keep, n int) {
	pos, held := s.committed, s.held()
	tail := e.info.ContextLen - n - keep // rows kept after the sink
	s.toks = append(slices.Clone(s.toks[:keep]), s.toks[pos-tail:]...)
	s.shifted = true
	kept := keep + tail
	e.shifted(s, shiftReread, kept, held-kept, pos)
	if s.evicted > 0 || s.shared > keep || s.lent > keep {
		e.model.Release(s.id)
		s.id, s.status, s.committed, s.evicted, s.shared, s.lent = noSeq, preempted, 0, 0, 0, 0
	} else {
		s.committed = keep
		if r, ok := e.model.(SeqTokenRecorder); ok {
			r.RestoredTokens(s.id, s.toks[:keep])
		}
	}
}

// unshift makes a ring-shifted sequence's tokens those its rows hold (the
// sink and the rows after its evicted ones), at positions 0, 1, …, for
// evaluating them again in a new sequence.
func (e *Engine) unshift(s *seq) {
	if s.evicted == 0 {
		return
	}
	keep := e.sink(s)
	s.toks = append(slices.Clone(s.toks[:keep]), s.toks[keep+s.evicted:]...)
	s.evicted = 0
}

// shifted records a shift in /metrics and the log (whose Config.Logger
// names the model: the server's does).
func (e *Engine) shifted(s *seq, kind string, kept, evicted, pos int) {
	e.met.shifts.WithLabelValues(kind).Inc()
	e.log.Info().Uint32("seq", uint32(s.id)).Int("choice", s.c).
		Str("kind", kind).Int("kept", kept).Int("evicted", evicted).Int("position", pos).
		Msg("context shift: the sequence goes on past the window")
}
