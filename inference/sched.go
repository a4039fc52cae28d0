package inference

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hexserve/hexserve/inference/sample"
)

// worker runs steps until Close, and then until the active requests have
// ended (their contexts end with ErrClosed).
func (e *Engine) worker() {
	defer close(e.exited)
	defer e.sampling.Stop()
	defer e.releaseRetained() // the model outlives the engine
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
	open := e.openSeqs()
	waiting := e.reopen(&open)
	for _, g := range e.active {
		// Choices the first one's Fork could not start open sequences of
		// their own once its prompt is evaluated.
		for open < e.maxSeq && g.next < g.choices && g.status != aborting && g.firstStep > 0 {
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
	h, err := e.openShared(&g.req)
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
	s.id, s.cap, s.committed, s.shared = h.id, h.cap, h.rows, h.shared
	if p := g.req.Prompt; s.committed < len(p)-1 && s.shared == 0 {
		s.committed = e.kv.restore(e, s, p[:len(p)-1], s.committed)
	}
	g.usage.CachedTokens = s.committed
	g.seqs = append(g.seqs, s)
	e.active = append(e.active, g)
	return true
}

// minShareRows is the shortest prompt prefix a new request forks from a
// live sequence of its owner rather than evaluating again.
const minShareRows = 16

// held is a sequence opened for a request: its id, the rows it already
// holds (a taken-over or forked prefix), how many a Fork shares, and its
// slots.
type held struct {
	id                SeqID
	rows, shared, cap int
}

// openShared opens a sequence for a queued request, reusing rows where its
// owner's sequences hold a prefix of the prompt (never another owner's):
// it takes over a retained sequence (its rows from the prefix on are
// replaced: no copy), else forks the live or retained sequence whose rows
// share the longest prefix (at least minShareRows), else opens a sequence
// of its own.
func (e *Engine) openShared(req *Request) (held, error) {
	p := len(req.Prompt)
	reserve := e.reserve(p, e.rowLimit(req))
	if h, ok := e.takeOver(req, reserve); ok {
		return h, nil
	}
	if parent, rows := e.sharedPrefix(req); parent != nil {
		id, err := e.model.Fork(parent.id, rows, reserve-rows)
		if err == nil {
			parent.lent = max(parent.lent, rows)
			e.met.sharedRows.Add(float64(rows))
			return held{id: id, rows: rows, shared: rows, cap: reserve}, nil
		}
	}
	id, err := e.open(reserve)
	return held{id: id, cap: reserve}, err
}

// takeOver gives req the retained sequence of its owner whose committed
// rows share the longest prefix (at least one row) with its prompt (all
// but its last token), grown to reserve slots.
func (e *Engine) takeOver(req *Request, reserve int) (held, bool) {
	p := req.Prompt[:len(req.Prompt)-1]
	best, n := -1, 0
	for i, s := range e.retained {
		rows := e.reusable(s, CommonPrefix(p, s.toks[:s.committed]))
		if s.g.req.Owner != req.Owner || rows <= n || rows < max(s.shared, s.lent) || req.N > 1 && s.shared > 0 {
			continue // a run may not rewrite rows a Fork shares (its parent's, or its own lent to forks)
		}
		best, n = i, rows
	}
	if best < 0 {
		return held{}, false
	}
	s := e.retained[best]
	e.retained = slices.Delete(e.retained, best, best+1)
	h := held{id: s.id, rows: n, shared: s.shared, cap: max(s.cap, reserve)}
	if h.cap > s.cap {
		if err := e.model.Grow(s.id, h.cap); err != nil {
			e.model.Release(s.id)
			return held{}, false
		}
	}
	if r, ok := e.model.(SeqTokenRecorder); ok {
		r.RestoredTokens(s.id, p[:n]) // the rest of the prompt as without the kept rows
	}
	e.met.sharedRows.Add(float64(n))
	return h, true
}

// open opens a sequence of reserve slots, releasing the retained
// sequences when the pool has no room for it, and on a CheapOpener, oldest
// first, while they keep it out of the cheap slots.
func (e *Engine) open(reserve int) (SeqID, error) {
	if c, ok := e.model.(CheapOpener); ok {
		for len(e.retained) > 0 {
			if id, err := c.OpenCheap(reserve); !errors.Is(err, ErrNoSlots) {
				return id, err
			}
			e.model.Release(e.retained[0].id)
			e.retained = slices.Delete(e.retained, 0, 1)
		}
	}
	id, err := e.model.Open(reserve)
	if errors.Is(err, ErrNoSlots) && len(e.retained) > 0 {
		e.releaseRetained()
		id, err = e.model.Open(reserve)
	}
	return id, err
}

// sharedPrefix finds the live or retained sequence of req's owner whose
// committed rows share the longest prefix with req's prompt (all but its
// last token), and how many rows; nil when none shares minShareRows.
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
		if s.g.req.Owner != req.Owner || s.shifted {
			return // rows are never shared across owners, nor a shifted sequence's
		}
		if rows := e.reusable(s, s.shareable(p)); rows > n {
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
	for _, s := range e.retained {
		try(s)
	}
	return best, n
}

// shareable is how many of s's committed rows a Fork for prompt prefix p
// may share.
func (s *seq) shareable(p []int32) int {
	rows := CommonPrefix(p, s.toks[:s.committed])
	if s.shared > 0 {
		rows = min(rows, s.shared) // a fork shares on only its parent's rows
	}
	return rows
}

// reusable is how many of s's first rows (rows of them) a new sequence may
// reuse: all, or on a model that states an alignment (BatchLimits.Align),
// its prompt rows (evaluated in aligned runs, as a cold evaluation of the
// same tokens would) cut to a multiple of the alignment.
func (e *Engine) reusable(s *seq, rows int) int {
	if e.lim.Align <= 1 {
		return rows
	}
	return e.lim.alignDown(min(rows, len(s.g.req.Prompt)))
}

// retain keeps finished sequence s in the pool with its rows, for a later
// request of its owner to take over or fork (at most MaxSequences are
// kept: the oldest goes); reports false when s is not worth keeping (it
// ended abnormally or holds nothing).
func (e *Engine) retain(s *seq) bool {
	if abnormal(s.fin) || s.committed == 0 || s.id == noSeq || s.shifted {
		return false
	}
	e.retained = append(e.retained, s)
	if len(e.retained) > e.maxSeq {
		e.model.Release(e.retained[0].id)
		e.retained = slices.Delete(e.retained, 0, 1)
	}
	return true
}

// releaseRetained releases the retained sequences: their slots are needed.
func (e *Engine) releaseRetained() {
	for _, s := range e.retained {
		e.model.Release(s.id)
	}
	clear(e.retained)
	e.retained = e.retained[:0]
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
		if g.req.Owner != req.Owner || g.status == aborting {
			continue
		}
		for _, s := range g.seqs {
			if s.status != running || s.shared > 0 || s.shifted || !s.prefilling() {
				continue
			}
			n := e.reusable(s, CommonPrefix(p, s.toks[:s.target()]))
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
			id, err := e.open(rows)
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
			s.committed = e.kv.restore(e, s, s.toks[:len(s.toks)-1], 0)
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
	rows := e.reserve(p, g.rows)
	id, err := e.open(rows)
	if err != nil {
		if !errors.Is(err, ErrNoSlots) || open == 0 {
			g.abort(FinishError, fmt.Errorf("inference: model: %w", err))
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
func (e *Engine) forkChoices(g *record, parent *seq, l sample.Logits) {
	open := e.openSeqs()
	p := len(g.req.Prompt)
	rows := e.reserve(p, g.rows)
	for ; open < e.maxSeq && g.next < g.choices && g.status != aborting; open++ {
		id, err := e.model.Fork(parent.id, p, rows-p)
		if err != nil {
			return // the choice opens a sequence of its own later
		}
		parent.lent = max(parent.lent, p)
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
			if !e.retain(s) {
				e.model.Release(s.id)
			}
			s.smp = nil
		}
		clear(g.seqs[len(live):])
		g.seqs = live
		if len(g.seqs) == 0 && (g.next == g.choices || g.status == aborting) {
			e.finishRecord(g)
			continue
		}
		kept = append(kept, g)
	}
	clear(e.active[len(kept):])
	e.active = kept
	e.setActive(e.openSeqs())
}

// fits reports whether running sequence s has a slot for its next row,
// growing it when not (by e.grow rows, up to what the request may use).
func (e *Engine) fits(s *seq) bool {
	if s.held()+1 <= s.cap {
		return true
	}
	rows := e.reserve(s.cap, s.limit())
	err := e.model.Grow(s.id, rows)
	if errors.Is(err, ErrNoSlots) && len(e.retained) > 0 {
		e.releaseRetained()
		err = e.model.Grow(s.id, rows)
	}
	if err != nil {
		return false
	}
	s.cap = rows
	return true
}

// noSeq is the id of a preempted sequence: it holds nothing in the pool
// (Release of an unknown id is a no-op).
const noSeq = ^SeqID(0)

// preempt makes room when every open sequence waits for slots: the
// retained sequences are released, else the youngest open one is, to evaluate its rows again once there is room
// (the same rows: on float32 caches the same bits); with a KV store its
// committed rows are saved first and restored instead. It reports whether
// there was one.
func (e *Engine) preempt() bool {
	if len(e.retained) > 0 {
		e.releaseRetained()
		return true
	}
	for i := len(e.active) - 1; i >= 0; i-- {
		g := e.active[i]
		for j := len(g.seqs) - 1; j >= 0; j-- {
			if s := g.seqs[j]; s.status == running {
				e.kv.save(e, s, "") // restored when it opens again
				e.model.Release(s.id)
				e.unshift(s)
				s.id, s.status, s.committed = noSeq, preempted, 0
				e.met.preemptions.Inc()
				return true
			}
		}
	}
	return false
}
