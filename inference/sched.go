package inference

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// worker runs steps until Close, and then until the active requests have
// ended (their contexts end with ErrClosed).
func (e *Engine) worker() {
	defer close(e.exited)
	defer e.sampling.stop()
	for {
		closed := e.admit()
		if len(e.active) > 0 {
			if !e.step() {
				// Nothing could run (sequences waiting for room that a
				// release or an arrival brings): do not spin.
				e.idle()
			}
			continue
		}
		if closed {
			return
		}
		select {
		case <-e.wake:
		case <-e.ctx.Done():
		}
	}
}

// openSeqs counts the sequences open in the model.
func (e *Engine) openSeqs() int {
	n := 0
	for _, g := range e.active {
		for _, s := range g.seqs {
			if s.status == running {
				n++
			}
		}
	}
	return n
}

// admit starts the preempted sequences and waiting choices of active
// requests, then queued requests in arrival order, while sequences are
// free and the pool holds them. It reports whether the engine is closed.
func (e *Engine) admit() bool {
	defer e.releaseLinger()
	open := e.openSeqs()
	waiting := e.reopen(&open)
	for _, g := range e.active {
		// Choices the first one's Fork could not start open sequences of
		// their own once its prompt is evaluated.
		for open < e.maxSeq && g.next < g.choices && g.abort == "" && g.firstStep > 0 {
			if !e.openChoice(g, open) {
				break
			}
			open++
		}
	}
	for {
		e.mu.Lock()
		if e.closed || open >= e.maxSeq || len(e.queue) == 0 || waiting {
			closed := e.closed
			e.mu.Unlock()
			e.setActive(open)
			return closed
		}
		if !e.admitHead(open) {
			e.setActive(open)
			return false
		}
		open++
	}
}

// admitHead opens a sequence for the request at the head of the queue and
// makes it active; e.mu is held on entry and released on return. It
// reports false when the head (and so everything behind it) waits: for a
// prefix of its owner's to fork, or for slots that a release brings.
func (e *Engine) admitHead(open int) bool {
	g := e.queue[0]
	if g.shareWaits < shareWaitSteps && e.pendingShare(&g.req, shareWaitSteps-g.shareWaits) {
		// Its prefix is a few steps away in a sequence of its owner.
		g.shareWaits++
		e.mu.Unlock()
		return false
	}
	id, shared, err := e.openShared(&g.req)
	if errors.Is(err, ErrNoSlots) && open > 0 {
		e.mu.Unlock()
		return false
	}
	e.queue = slices.Delete(e.queue, 0, 1)
	g.status = running
	e.met.queueDepth.Set(float64(len(e.queue)))
	e.mu.Unlock()
	g.stop()
	if err != nil {
		e.finishEarly(g, FinishError, fmt.Errorf("inference: model: %w", err))
		return true // it did not take the sequence: the next may
	}
	e.admitted(g)
	s := e.newSeq(g)
	s.id, s.cap = id, e.reserve(len(g.req.Prompt), s.limit())
	s.committed, s.shared = shared, shared
	if shared == 0 {
		p := g.req.Prompt
		s.committed = e.kv.restore(e, s, p[:len(p)-1])
	}
	g.usage.CachedTokens = s.committed
	g.seqs = append(g.seqs, s)
	e.active = append(e.active, g)
	return true
}

// minShareRows is the shortest prompt prefix a new request forks from a
// live sequence of its owner rather than evaluating again.
const minShareRows = 16

// openShared opens a sequence for a queued request: a Fork of the live
// (or just finished, see lingers) sequence of the same owner whose
// committed rows share the longest prefix with the prompt (at least
// minShareRows; never another owner's), or else a sequence of its own.
// It returns the rows shared.
func (e *Engine) openShared(req *Request) (SeqID, int, error) {
	reserve := e.reserve(len(req.Prompt), len(req.Prompt)+e.maxNew(req))
	if parent, rows := e.sharedPrefix(req); parent != nil {
		id, err := e.model.Fork(parent.id, rows, reserve-rows)
		if err == nil {
			e.met.sharedRows.Add(float64(rows))
			return id, rows, nil
		}
	}
	e.releaseLinger() // their slots may be what Open needs
	id, err := e.model.Open(reserve)
	return id, 0, err
}

// sharedPrefix finds the live sequence of req's owner whose committed rows
// share the longest prefix with req's prompt (all but its last token), and
// how many rows; nil when none shares minShareRows.
func (e *Engine) sharedPrefix(req *Request) (*seq, int) {
	if req.N > 1 {
		// n > 1: the choices fork the first one's whole prompt, which a
		// fork of a fork may not share (Batcher.Fork of a fork's rows
		// past its shared ones fails on the .pte pool).
		return nil, 0
	}
	p := req.Prompt[:len(req.Prompt)-1]
	var best *seq
	n := minShareRows - 1
	try := func(s *seq) {
		if s.g.req.Owner != req.Owner {
			return // rows are never shared across owners
		}
		if rows := s.shareable(p); rows > n {
			best, n = s, rows
		}
	}
	for _, g := range e.active {
		for _, s := range g.seqs {
			if s.status == running {
				try(s)
			}
		}
	}
	for _, s := range e.linger {
		try(s)
	}
	return best, n
}

// shareable is how many of s's committed rows a Fork for prompt prefix p
// may share.
func (s *seq) shareable(p []int32) int {
	rows := commonPrefix(p, s.toks[:s.committed])
	if s.shared > 0 {
		rows = min(rows, s.shared) // a fork shares on only its parent's rows
	}
	return rows
}

// lingers reports whether finished sequence s should stay in the pool
// until the next admission, because a queued request of its owner may fork
// its rows (see sharedPrefix); releaseLinger then releases it.
func (e *Engine) lingers(s *seq) bool {
	if abnormal(s.fin) {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, g := range e.queue {
		if g.req.Owner == s.g.req.Owner && g.req.N <= 1 && s.shareable(g.req.Prompt[:len(g.req.Prompt)-1]) >= minShareRows {
			return true
		}
	}
	return false
}

// releaseLinger releases the finished sequences kept for a fork.
func (e *Engine) releaseLinger() {
	for _, s := range e.linger {
		e.model.Release(s.id)
	}
	clear(e.linger)
	e.linger = e.linger[:0]
}

// shareWaitSteps bounds the steps a request waits at the head of the
// queue for a prefix of its owner's to fork (see pendingShare).
const shareWaitSteps = 4

// pendingShare reports whether a live sequence of req's owner will, within
// steps steps, hold a prefix of req's prompt (all but its last token) that
// is at least minShareRows long and longer than any held now: a prompt
// being evaluated whose rows left fit in those steps. Waiting for it costs
// the request no more than evaluating the same rows itself.
func (e *Engine) pendingShare(req *Request, steps int) bool {
	if req.N > 1 {
		return false
	}
	_, held := e.sharedPrefix(req)
	p := req.Prompt[:len(req.Prompt)-1]
	rows := steps * e.model.BatchLimits().Rows
	for _, g := range e.active {
		if g.req.Owner != req.Owner || g.abort != "" {
			continue
		}
		for _, s := range g.seqs {
			if s.status != running || s.shared > 0 || !s.prefilling() {
				continue
			}
			n := commonPrefix(p, s.toks[:s.target()])
			if n >= minShareRows && n > held && n > s.committed && n-s.committed <= rows {
				return true
			}
		}
	}
	return false
}

// reopen opens again the preempted sequences, oldest first, once no
// sequence waits for slots. It reports whether one still waits (then no
// new request starts: the room goes to it first).
func (e *Engine) reopen(open *int) bool {
	waiting := false
	for _, g := range e.active {
		for _, s := range g.seqs {
			if s.status != preempted {
				continue
			}
			if e.stalled > 0 || *open >= e.maxSeq {
				waiting = true
				continue
			}
			rows := e.reserve(len(s.toks), s.limit())
			id, err := e.model.Open(rows)
			if err != nil {
				if !errors.Is(err, ErrNoSlots) || *open == 0 {
					e.endSeq(s, FinishError, fmt.Errorf("inference: model: %w", err))
					continue
				}
				waiting = true
				continue
			}
			s.id, s.status, s.cap, s.shared = id, running, rows, 0
			// Its rows saved at preemption come back from the store; the
			// rest are evaluated again.
			s.committed = e.kv.restore(e, s, s.toks[:len(s.toks)-1])
			*open++
		}
	}
	return waiting
}

func (e *Engine) setActive(n int) {
	e.activeN.Store(int64(n))
	e.met.activeSeqs.Set(float64(n))
}

// openChoice starts g's next choice as a sequence of its own that
// evaluates the prompt again (its rows could not be forked). A pool that
// cannot hold it even with nothing else open fails the request.
func (e *Engine) openChoice(g *record, open int) bool {
	p := len(g.req.Prompt)
	rows := e.reserve(p, p+g.maxNew)
	id, err := e.model.Open(rows)
	if err != nil {
		if !errors.Is(err, ErrNoSlots) || open == 0 {
			g.abort, g.runErr = FinishError, fmt.Errorf("inference: model: %w", err)
		}
		return false
	}
	s := e.newSeq(g)
	s.id, s.cap = id, rows
	g.seqs = append(g.seqs, s)
	return true
}

// forkChoices starts g's waiting choices on the rows of parent's prompt
// and samples their first token from l, its last row's logits.
func (e *Engine) forkChoices(g *record, parent *seq, l Logits) {
	open := e.openSeqs()
	p := len(g.req.Prompt)
	rows := e.reserve(p, p+g.maxNew)
	for ; open < e.maxSeq && g.next < g.choices && g.abort == ""; open++ {
		id, err := e.model.Fork(parent.id, p, rows-p)
		if err != nil {
			return // the choice opens a sequence of its own later
		}
		s := e.newSeq(g)
		s.id, s.committed, s.shared, s.cap = id, p, p, rows
		g.seqs = append(g.seqs, s)
		if tok, lp, ok := e.sampleRow(s, l); ok {
			e.take(s, tok, lp)
		}
	}
}

// idle waits briefly for an arrival or Close.
func (e *Engine) idle() {
	t := time.NewTimer(time.Millisecond)
	defer t.Stop()
	select {
	case <-e.wake:
	case <-e.ctx.Done():
	case <-t.C:
	}
}

// reap releases finished sequences' slots (saving a first choice's rows
// to the KV store) and ends requests whose choices have all finished.
func (e *Engine) reap() {
	kept := e.active[:0]
	for _, g := range e.active {
		live := g.seqs[:0]
		for _, s := range g.seqs {
			if s.status != finished {
				live = append(live, s)
				continue
			}
			if s.c == 0 && s.fin != FinishError {
				e.kv.save(e, s, g.req.CacheKey)
			}
			if e.lingers(s) {
				e.linger = append(e.linger, s)
			} else {
				e.model.Release(s.id)
			}
			e.putSampler(s.smp)
			s.smp = nil
		}
		clear(g.seqs[len(live):])
		g.seqs = live
		if len(g.seqs) == 0 && (g.next == g.choices || g.abort != "") {
			e.finishRecord(g)
			continue
		}
		kept = append(kept, g)
	}
	clear(e.active[len(kept):])
	e.active = kept
	e.setActive(e.openSeqs())
}

func (e *Engine) getSampler() *sampler {
	if n := len(e.samplers); n > 0 {
		s := e.samplers[n-1]
		e.samplers = e.samplers[:n-1]
		return s
	}
	return newSampler(e.info.VocabSize)
}

// putSampler keeps one idle sampler for the next sequence; the others
// (≈ 9.5 MiB each at V = 128,256) go back to the garbage collector, so an
// idle engine holds what one sequence needs.
func (e *Engine) putSampler(s *sampler) {
	if len(e.samplers) > 0 {
		return
	}
	s.clear()
	e.samplers = append(e.samplers, s)
}

// fits reports whether running sequence s has a slot for its next row,
// growing it when not (by e.grow rows, up to what the request may use).
func (e *Engine) fits(s *seq) bool {
	if s.committed+1 <= s.cap {
		return true
	}
	rows := e.reserve(s.cap, s.limit())
	if err := e.model.Grow(s.id, rows); err != nil {
		return false
	}
	s.cap = rows
	return true
}

// noSeq is the id of a preempted sequence: it holds nothing in the pool
// (Release of an unknown id is a no-op).
const noSeq = ^SeqID(0)

// preempt makes room when every open sequence waits for slots: the
// youngest is released, to evaluate its rows again once there is room
// (the same rows: on float32 caches the same bits); with a KV store its
// committed rows are saved first and restored instead. It reports whether
// there was one.
func (e *Engine) preempt() bool {
	for i := len(e.active) - 1; i >= 0; i-- {
		g := e.active[i]
		for j := len(g.seqs) - 1; j >= 0; j-- {
			if s := g.seqs[j]; s.status == running {
				e.kv.save(e, s, "") // restored when it opens again
				e.model.Release(s.id)
				s.id, s.status, s.committed = noSeq, preempted, 0
				e.met.preemptions.Inc()
				return true
			}
		}
	}
	return false
}
