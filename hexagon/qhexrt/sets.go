package qhexrt

import (
	"fmt"
	"time"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/hexagon/slotpool"
	"github.com/hexserve/hexserve/inference"
)

// maxSetSequences bounds engine.max_sequences auto on a QHexRT-contract
// bundle: a Step runs each sequence's calls in turn, so sequences side by
// side share the NPU's time rather than its calls.
const maxSetSequences = 8

// defaultSeqKVBytes is the KV-set budget when Config.SeqKVBytes is 0. Sets
// are allocated when sequences open, so the budget costs nothing until
// engine.max_sequences sequences run at once.
const defaultSeqKVBytes = 512 << 20

// kvSets are a QHexRT-contract bundle's sequences (its prefill graph starts
// at position 0 and has no past inputs): each open sequence has its own KV
// set, per-layer K and V caches registered with the backend and a decode
// call bound to them, so switching sequences is choosing a call (no copy).
// A Step runs its runs in turn. A run that ends within the first window and
// starts at 0 or carries several tokens is one prefill call from 0 over the
// sequence's tokens (rows before Start are recomputed, to the same bits);
// other rows are decode calls. Fork copies the parent's rows into the new
// set. Set 0 is the resident cache.
type kvSets struct {
	r    *Runner
	sets []*kvSet // allocated on demand
	last inference.SeqID
}

// kvSet is one sequence's KV buffers, its CTX slots indexed as a
// slotpool.Seq of them all: row p in slot p, or after a Shift a ring at the
// original positions (the sink [0, Keep) stays, rows [Keep, Keep+Gone) are
// evicted, the rows after them wrap over slots [Keep, CTX)), as the slot
// pool's shifted sequences are.
type kvSet struct {
	kv       slotpool.KV       // k, v as the cache of CTX rows
	k, v     []*graphio.Tensor // per layer [CTX, kv_dim]
	call     *qnn.Call         // the decode graph bound to k, v
	id       inference.SeqID   // its sequence; 0: free
	seq      slotpool.Seq      // its rows' slots; seq.N: committed rows (positions)
	toks     []int32           // tokens of rows [0, len(toks)) (fewer after a restore)
	resident bool              // set 0: the resident cache, freed by Close
	restored bool              // rows came from the KV store: the next run finishes a prompt
}

func newKVSets(r *Runner) *kvSets {
	// The QHexRT prefill mask never changes: causal over the window.
	pre := r.graphs[rolePrefill]
	pre.masks.Causal(pre.mask.B, r.window, 0, 0)
	r.hid = make([]byte, 0, r.window*pre.y.Elem.Size()*r.spec.hidden)
	resident := &kvSet{k: r.kvK, v: r.kvV, kv: r.kvOf(r.kvK, r.kvV, r.spec.ctx), call: r.graphs[roleDecode].call, resident: true}
	return &kvSets{r: r, sets: []*kvSet{resident}}
}

// reset empties the set for sequence id (0: free).
func (s *kvSet) reset(id inference.SeqID) {
	s.id, s.seq, s.toks, s.restored = id, slotpool.Seq{Hi: s.kv.Stride}, s.toks[:0], false
}

// held reports whether rows [from, to) are all committed and not evicted.
func (s *kvSet) held(from, to int) bool {
	q := &s.seq
	return from >= 0 && to <= q.N && (q.Gone == 0 || to <= q.Keep || from >= q.Keep+q.Gone)
}

// kvSetBytes is one set's size.
func (ks *kvSets) kvSetBytes() int64 {
	return int64(ks.r.kvSlots.Bytes(2 * ks.r.spec.ctx * len(ks.r.kvK)))
}

// maxSets is how many KV sets fit the configured (or default) budget; set
// 0 is the resident cache, so at least one.
func (ks *kvSets) maxSets() int {
	budget := ks.r.cfg.SeqKVBytes
	if budget <= 0 {
		budget = defaultSeqKVBytes
	}
	return int(min(max(budget/ks.kvSetBytes(), 1), slotpool.MaxSequences))
}

func (ks *kvSets) limits() inference.BatchLimits {
	n := ks.maxSets()
	return inference.BatchLimits{Sequences: n, Rows: ks.r.window, Slots: n * ks.r.spec.ctx, Auto: min(n, maxSetSequences)}
}

func (ks *kvSets) cost(rows int) time.Duration {
	return ks.r.cost(plan.Option{Graphs: []string{ks.r.spec.key(roleDecode)}, Calls: rows})
}

// check validates runs: a sequence's own buffers hold the whole context
// (past it, after Shift, as a ring).
func (ks *kvSets) check(runs []inference.Run) error {
	return slotpool.CheckRuns(runs, ks.r.window, ks.r.spec.vocab, func(id inference.SeqID) (shared, n, capacity int, ok bool) {
		if s := ks.set(id); s != nil {
			return s.seq.Keep + s.seq.Gone, s.seq.N, s.seq.Cap(), true
		}
		return 0, 0, 0, false
	})
}

// set returns the KV set of sequence id.
func (ks *kvSets) set(id inference.SeqID) *kvSet {
	if id == 0 {
		return nil
	}
	for _, s := range ks.sets {
		if s.id == id {
			return s
		}
	}
	return nil
}

func (ks *kvSets) rows(id inference.SeqID) (slotpool.KV, func(int) int, int, bool) {
	s := ks.set(id)
	if s == nil {
		return slotpool.KV{}, nil, 0, false
	}
	return s.kv, s.seq.Slot, s.seq.N, true
}

// Open starts a sequence with reserve rows in a KV set of its own.
func (ks *kvSets) Open(reserve int) (inference.SeqID, error) {
	r := ks.r
	if r.life.Closed() {
		return 0, ErrClosed
	}
	if reserve < 1 || reserve > r.spec.ctx {
		return 0, fmt.Errorf("qhexrt: a sequence of %d rows in a context of %d: %w", reserve, r.spec.ctx, inference.ErrNoSlots)
	}
	s, err := ks.freeSet()
	if err != nil {
		return 0, err
	}
	ks.last++
	s.reset(ks.last)
	return s.id, nil
}

// freeSet returns an unused KV set, allocating one while the budget allows.
func (ks *kvSets) freeSet() (*kvSet, error) {
	for _, s := range ks.sets {
		if s.id == 0 {
			return s, nil
		}
	}
	if len(ks.sets) >= ks.maxSets() {
		return nil, fmt.Errorf("qhexrt: all %d KV sets in use: %w", len(ks.sets), inference.ErrNoSlots)
	}
	s, err := ks.newSet()
	if err != nil {
		return nil, err
	}
	ks.sets = append(ks.sets, s)
	return s, nil
}

// newSet allocates a KV set and binds the decode graph to it.
func (ks *kvSets) newSet() (_ *kvSet, err error) {
	r := ks.r
	s := &kvSet{}
	defer func() {
		if err != nil {
			s.free()
		}
	}()
	size := r.kvSlots.Bytes(r.spec.ctx)
	for range r.spec.layers {
		k, v := &graphio.Tensor{Elem: r.kvET}, &graphio.Tensor{Elem: r.kvET}
		s.k, s.v = append(s.k, k), append(s.v, v)
		if err := k.Alloc(r.rt, size); err != nil {
			return nil, fmt.Errorf("qhexrt: KV set: %w", err)
		}
		if err := v.Alloc(r.rt, size); err != nil {
			return nil, fmt.Errorf("qhexrt: KV set: %w", err)
		}
	}
	s.kv = r.kvOf(s.k, s.v, r.spec.ctx)
	if err := ks.bind(s); err != nil {
		return nil, err
	}
	return s, nil
}

// bind binds a call of the decode graph to s's caches and the decode
// graph's other buffers.
func (ks *kvSets) bind(s *kvSet) error {
	r := ks.r
	g := r.graphs[roleDecode]
	for _, c := range r.contexts {
		if c.Path() != g.ref.file {
			continue
		}
		gr, err := c.Graph(g.ref.name)
		if err != nil {
			return fmt.Errorf("qhexrt: %s graph %q: %w", c.Path(), g.ref.name, err)
		}
		in, out := r.ioBindings(g, s.k, s.v)
		if s.call, err = gr.Bind(in, out); err != nil {
			return fmt.Errorf("qhexrt: binding a KV set to graph %q: %w", g.ref.name, err)
		}
		return nil
	}
	return fmt.Errorf("qhexrt: no context holds graph %q", g.ref.name)
}

// free releases a set's call and (unless it is the resident cache) buffers.
func (s *kvSet) free() {
	if s.resident {
		return
	}
	if s.call != nil {
		s.call.Close()
		s.call = nil
	}
	for i := len(s.k) - 1; i >= 0; i-- {
		s.v[i].Free()
		s.k[i].Free()
	}
}

// unbind releases the calls of the extra KV sets (before their contexts
// close).
func (ks *kvSets) unbind() {
	for _, s := range ks.sets {
		if !s.resident && s.call != nil {
			s.call.Close()
			s.call = nil
		}
	}
}

// close frees every set's call and buffers.
func (ks *kvSets) close() {
	for i := len(ks.sets) - 1; i >= 0; i-- {
		ks.sets[i].free()
	}
	ks.sets = nil
}

// reset binds the extra sets again after a reload; every sequence's rows
// are lost with the device.
func (ks *kvSets) reset() error {
	for _, s := range ks.sets {
		s.reset(s.id)
		if s.resident {
			s.call = ks.r.graphs[roleDecode].call
			continue
		}
		if err := ks.bind(s); err != nil {
			return err
		}
	}
	return nil
}
