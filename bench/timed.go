package bench

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hexserve/hexserve/inference"

	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/internal/threadcpu"
)

// Counters are a model's cumulative time counters: time inside graph
// execution and the host-side work around it (plan.Stats of hexagon/plan).
type Counters struct {
	Graph    time.Duration // inside graph execute calls
	GraphCPU time.Duration // the calling thread's CPU time inside them (zero: unknown)
	Calls    int64         // graph execute calls
	Embed    time.Duration // embedding rows → x
	Rope     time.Duration // cos/sin rows
	Mask     time.Duration // mask updates
	KVCopy   time.Duration // new K/V rows → cache
	Convert  time.Duration // y → lm-head input
}

// IO is the host-side model I/O time: embedding, RoPE, mask, KV copy and conversion.
func (c Counters) IO() time.Duration { return c.Embed + c.Rope + c.Mask + c.KVCopy + c.Convert }

func (c Counters) sub(o Counters) Counters {
	return Counters{c.Graph - o.Graph, c.GraphCPU - o.GraphCPU, c.Calls - o.Calls, c.Embed - o.Embed, c.Rope - o.Rope, c.Mask - o.Mask, c.KVCopy - o.KVCopy, c.Convert - o.Convert}
}

func (c Counters) add(o Counters) Counters {
	return Counters{c.Graph + o.Graph, c.GraphCPU + o.GraphCPU, c.Calls + o.Calls, c.Embed + o.Embed, c.Rope + o.Rope, c.Mask + o.Mask, c.KVCopy + o.KVCopy, c.Convert + o.Convert}
}

// backgroundCopier is a model that copies K/V entries on other threads,
// off the critical path (executorch.Runner): its workers' cumulative time.
type backgroundCopier interface{ BackgroundKVCopy() time.Duration }

// evalRec is one timed model call (a Step).
type evalRec struct {
	start, end time.Time
	rows       int      // tokens its runs carried
	d          Counters // counter deltas over the call
	c0, c1     Counters // the counters at start and end: from one Step's c1 to the next one's c0, the model calls that Rows.Logits made lazily (qhexrt's lm-head)
	// read is the wall time of the engine's Rows.Logits calls on this
	// Step's rows, and readCPU their thread CPU time (with thread): model
	// work when a model runs its lm-head there.
	read, readCPU time.Duration
	reads         int           // how many
	bg            time.Duration // the model's cumulative background KV copy time at start (backgroundCopier)
	vocab         time.Duration // the vocabulary's cumulative time at start
	// use is the calling thread's accounting at start, when the recorder
	// locks it (useOK); cpu is its CPU time after reading it, so that the
	// CPU time from one Step's cpu to the next one's use.CPU leaves the
	// recorder's own reading out.
	use    threadcpu.Usage
	cpu    time.Duration
	endUse threadcpu.Usage // its accounting at end
	endCPU time.Duration   // and its CPU time after reading that (the next interval's start)
	useOK  bool
	clock  time.Duration // what one thread-clock reading costs that thread (recorder.clock)
	logits sample.Logits // a copy of the last row read, with recorder.keep
}

// recorder wraps a model and records every Step.
type recorder struct {
	inference.Model
	// counters reads the model's cumulative counters; nil: it has none (its
	// graph time counts as host time).
	counters func() Counters
	v        *timedVocab // may be nil
	// thread locks the calling goroutine (the engine's worker) to its OS
	// thread at its first Step, for good (the worker ends with its engine;
	// its thread then ends too), and reads the thread's accounting at each
	// Step's start: between two starts that thread does all of the engine's
	// work for a token.
	thread bool
	// keep copies every Step's logits into its record (evalRec.logits);
	// the copies cost time and memory, so runs that are measured do not keep.
	keep bool

	mu     sync.Mutex
	recs   []evalRec
	locked bool // the current engine's worker is locked; take resets it
	// clock is the locked thread's CPU time per thread-clock reading,
	// measured when it is locked (clockCost).
	clock time.Duration
}

func (r *recorder) Close() error { return nil } // the caller closes the model

func (r *recorder) readCounters() Counters {
	if r.counters == nil {
		return Counters{}
	}
	return r.counters()
}

func (r *recorder) Step(ctx context.Context, runs []inference.Run) ([]inference.Rows, error) {
	var vt time.Duration
	if r.v != nil {
		vt = r.v.total()
	}
	var u threadcpu.Usage
	var cpu, clock time.Duration
	var uOK bool
	if r.thread {
		r.mu.Lock()
		if !r.locked {
			runtime.LockOSThread()
			r.locked = true
			r.clock = clockCost()
		}
		clock = r.clock
		r.mu.Unlock()
		u, uOK = threadcpu.Read()
	}
	// The recorder's own work runs between the clock readings at Step's
	// start (after use, before cpu) and at its end (after endUse, before
	// endCPU), so that neither measured interval holds it.
	c0 := r.readCounters()
	var bg time.Duration
	if b, ok := r.Model.(backgroundCopier); ok {
		bg = b.BackgroundKVCopy()
	}
	if r.thread {
		cpu, _ = threadcpu.Time()
	}
	t0 := time.Now()
	rows, err := r.Model.Step(ctx, runs)
	t1 := time.Now()
	var endUse threadcpu.Usage
	if uOK {
		endUse, _ = threadcpu.Read()
	}
	c1 := r.readCounters()
	n := 0
	for _, run := range runs {
		n += len(run.Tokens)
	}
	r.mu.Lock()
	r.recs = append(r.recs, evalRec{start: t0, end: t1, rows: n, d: c1.sub(c0), c0: c0, c1: c1, bg: bg, vocab: vt,
		use: u, cpu: cpu, endUse: endUse, useOK: uOK, clock: clock})
	i := len(r.recs) - 1
	r.mu.Unlock()
	if err == nil {
		for k := range rows {
			rows[k] = readRows{Rows: rows[k], r: r, i: i}
		}
	}
	if uOK {
		endCPU, _ := threadcpu.Time()
		r.mu.Lock()
		r.recs[i].endCPU = endCPU
		r.mu.Unlock()
	}
	return rows, err
}

// readRows times each row the engine reads into record i and, with keep,
// copies it there (the last one read stays: the engine reads one row per
// one-sequence Step).
type readRows struct {
	inference.Rows
	r *recorder
	i int
}

func (k readRows) Logits(ctx context.Context, row int) (sample.Logits, error) {
	var cpu0, cpu1 time.Duration
	if k.r.thread {
		cpu0, _ = threadcpu.Time()
	}
	t0 := time.Now()
	l, err := k.Rows.Logits(ctx, row)
	t1 := time.Now()
	if k.r.thread {
		cpu1, _ = threadcpu.Time()
	}
	k.r.mu.Lock()
	defer k.r.mu.Unlock()
	rec := &k.r.recs[k.i]
	rec.read += t1.Sub(t0)
	rec.readCPU += cpu1 - cpu0
	rec.reads++
	if k.r.keep && err == nil {
		kept := l
		kept.F32, kept.Raw16 = slices.Clone(l.F32), slices.Clone(l.Raw16)
		rec.logits = kept
	}
	return l, err
}

// clockCost is the calling thread's CPU time per thread-clock reading: the
// median of back-to-back readings' differences. A reading is a system call
// (no vDSO), and the clock sees the part of it after its own sample and the
// part of the next reading before that one's: so an interval between two
// readings holds one reading's cost that is the measurement's, not the
// measured work's (decodeSteps takes it out).
func clockCost() time.Duration {
	var d [63]time.Duration
	for i := range d {
		c0, _ := threadcpu.Time()
		c1, _ := threadcpu.Time()
		d[i] = c1 - c0
	}
	slices.Sort(d[:])
	return d[len(d)/2]
}

// take returns the records so far and starts a new list. With thread, the
// caller has closed the engine whose worker made them.
func (r *recorder) take() []evalRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	recs := r.recs
	r.recs, r.locked = nil, false
	return recs
}

// timedVocab times the engine's vocabulary lookups (detokenisation).
type timedVocab struct {
	v  inference.Vocab
	ns atomic.Int64
}

func (t *timedVocab) Piece(id int32) []byte {
	t0 := time.Now()
	p := t.v.Piece(id)
	t.ns.Add(int64(time.Since(t0)))
	return p
}

func (t *timedVocab) IsSpecial(id int32) bool {
	t0 := time.Now()
	s := t.v.IsSpecial(id)
	t.ns.Add(int64(time.Since(t0)))
	return s
}

func (t *timedVocab) total() time.Duration { return time.Duration(t.ns.Load()) }

// onePool is the pool of a one-sequence fake model (replay, recorded):
// a sequence may hold the whole context; a Step runs its one run.
type onePool struct{ ctx int }

func (p onePool) BatchLimits() inference.BatchLimits {
	return inference.BatchLimits{Sequences: 1, Rows: p.ctx, Slots: p.ctx}
}
func (p onePool) Open(int) (inference.SeqID, error) { return 1, nil }
func (p onePool) Fork(inference.SeqID, int, int) (inference.SeqID, error) {
	return 0, inference.ErrNoSlots
}
func (p onePool) Grow(inference.SeqID, int) error { return nil }
func (p onePool) Release(inference.SeqID)         {}
func (p onePool) StepCost(int) time.Duration      { return time.Millisecond }

// replay is a near-free model that generates a fixed token script over a
// small vocabulary (one-hot logits), for the baseline that separates the
// sampler's cost from the rest of the engine's host work.
type replay struct {
	onePool
	info   inference.ModelInfo
	script []int32
	prompt int
	logits []float32
	last   int32
}

func newReplay(script []int32, vocab, ctxLen, prompt int) *replay {
	r := &replay{onePool: onePool{ctxLen}, info: inference.ModelInfo{Name: "replay", VocabSize: vocab, ContextLen: ctxLen, PrefillWindow: 128},
		script: script, prompt: prompt, logits: make([]float32, vocab)}
	for i := range r.logits {
		r.logits[i] = -1000
	}
	return r
}

func (r *replay) Info() inference.ModelInfo { return r.info }
func (r *replay) Close() error              { return nil }

func (r *replay) Step(_ context.Context, runs []inference.Run) ([]inference.Rows, error) {
	out := make([]inference.Rows, len(runs))
	for i, run := range runs {
		out[i] = replayRows{r: r, start: run.Start, n: len(run.Tokens)}
	}
	return out, nil
}

// replayRows: the row after position p holds script[p+1−prompt].
type replayRows struct {
	r        *replay
	start, n int
}

func (w replayRows) Len() int { return w.n }

func (w replayRows) Logits(_ context.Context, i int) (sample.Logits, error) {
	r := w.r
	pos := max(w.start+i+1-r.prompt, 0)
	r.logits[r.last] = -1000
	r.last = r.script[pos%len(r.script)]
	r.logits[r.last] = 0
	return sample.Logits{Type: sample.F32, F32: r.logits}, nil
}

// recorded is a model that returns recorded logits, one per Step in
// order (every row of a Step reads them): the engine runs on the same
// logits as the recorded run. With evict, each Step first writes a line in
// every 64 bytes of it (larger than the caches), as a phone's NPU leaves
// the CPU caches with nothing of the host's; without, nothing runs between
// the engine's steps.
type recorded struct {
	onePool
	info   inference.ModelInfo
	logits []sample.Logits
	n      int
	evict  []byte
}

func newRecorded(info inference.ModelInfo, recs []evalRec) *recorded {
	m := &recorded{onePool: onePool{info.ContextLen}, info: info}
	for _, r := range recs {
		m.logits = append(m.logits, r.logits)
	}
	return m
}

func (m *recorded) Info() inference.ModelInfo { return m.info }
func (m *recorded) Close() error              { return nil }

func (m *recorded) Step(_ context.Context, runs []inference.Run) ([]inference.Rows, error) {
	if m.n >= len(m.logits) {
		return nil, errors.New("bench: more Steps than recorded")
	}
	m.n++
	for i := 0; i < len(m.evict); i += 64 { // the logits too: they come from memory, as the NPU's output does
		m.evict[i]++
	}
	out := make([]inference.Rows, len(runs))
	for i, run := range runs {
		out[i] = sameRows{l: m.logits[m.n-1], n: len(run.Tokens)}
	}
	return out, nil
}

// sameRows are rows that all read the same logits.
type sameRows struct {
	l sample.Logits
	n int
}

func (w sameRows) Len() int                                           { return w.n }
func (w sameRows) Logits(context.Context, int) (sample.Logits, error) { return w.l, nil }

// mappedVocab gives small ids the pieces of real tokens.
type mappedVocab struct {
	v   inference.Vocab
	ids []int32 // small id → real id
}

func (m mappedVocab) Piece(id int32) []byte   { return m.v.Piece(m.ids[id]) }
func (m mappedVocab) IsSpecial(id int32) bool { return m.v.IsSpecial(m.ids[id]) }

// remap maps a token sequence onto a dense small vocabulary.
func remap(tokens []int32) (script, ids []int32) {
	idx := map[int32]int32{}
	for _, t := range tokens {
		s, ok := idx[t]
		if !ok {
			s = int32(len(ids))
			idx[t] = s
			ids = append(ids, t)
		}
		script = append(script, s)
	}
	return script, ids
}
