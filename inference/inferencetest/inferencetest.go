// Package inferencetest provides fakes of the engine's dependencies for
// tests in other packages: a scripted Model and a map-backed Vocab.
package inferencetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hexserve/hexserve/inference"

	"github.com/hexserve/hexserve/inference/sample"
)

// Model is a scripted inference.Model: a pool of one sequence at a time
// (BatchLimits: 1 sequence, a Step of up to ContextLen rows). Its logits are
// F32 and vocabulary sized: 0 everywhere except 100 at the script's token
// (an EOS after the script ends), so any sampling settings pick the script.
// A Run that does not continue its sequence by one token is a prompt (a new
// sequence's, or one that replaces rows of a sequence the engine took
// over): the row after its last token peaks at script[0], the next row at
// script[1], and so on, so every prompt starts the script again. A Fork of
// a sequence's whole prompt continues where the parent's prompt ended.
// StepCost grows with the rows, so drafts never pay: no verify runs.
type Model struct {
	info   inference.ModelInfo
	script []int32
	logits []float32

	mu      sync.Mutex
	seqs    map[inference.SeqID]*scriptSeq
	last    inference.SeqID
	hot     int32   // the id whose logit is set
	bg      float32 // its background value
	peak    float32 // the scripted token's logit
	latency time.Duration
	gate    chan struct{}
	fails   []error
	calls   []Call
	noCalls bool
	closed  bool
	evals   int64
	evalDur time.Duration
}

type scriptSeq struct {
	toks    []int32
	reserve int
	prompt  int // the end of its first run (0: none yet)
}

// Call records one sequence's Run of a Step: the sequence's tokens after
// it, and Valid, the rows it held before (the Run's Start).
type Call struct {
	Seq   []int32
	Valid int
}

var _ inference.Model = (*Model)(nil)

// NewScripted returns a model that generates script after any prompt. A
// zero VocabSize or ContextLen in info defaults to 128,256 and 512.
func NewScripted(info inference.ModelInfo, script []int32) *Model {
	if info.VocabSize == 0 {
		info.VocabSize = 128256
	}
	if info.ContextLen == 0 {
		info.ContextLen = 512
	}
	if info.PrefillWindow == 0 {
		info.PrefillWindow = 128
	}
	if len(info.EOS) == 0 {
		info.EOS = []int32{int32(info.VocabSize - 1)}
	}
	return &Model{info: info, script: slices.Clone(script), logits: make([]float32, info.VocabSize), peak: 100,
		seqs: map[inference.SeqID]*scriptSeq{}}
}

// SetBackground makes the logits bg (vocabulary sized) everywhere but at
// the scripted token, which gets max(bg)+margin: realistic logits for
// benchmarks, with a margin large enough that sampling still follows the script.
func (m *Model) SetBackground(bg []float32, margin float32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	copy(m.logits, bg)
	m.peak = slices.Max(bg) + margin
	m.bg = m.logits[m.hot]
}

// Info implements inference.Model.
func (m *Model) Info() inference.ModelInfo { return m.info }

// SetLatency makes every Step take d (on the clock of time.NewTimer, so a
// synctest bubble runs it instantly), ending early when ctx ends.
func (m *Model) SetLatency(d time.Duration) {
	m.mu.Lock()
	m.latency = d
	m.mu.Unlock()
}

// Gate makes every Step wait for a value on the returned channel (or its
// ctx); nil lifts the gate.
func (m *Model) Gate(on bool) chan<- struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !on {
		m.gate = nil
		return nil
	}
	m.gate = make(chan struct{})
	return m.gate
}

// Fail makes the next len(errs) Steps return errs in order (a nil entry lets
// that call succeed).
func (m *Model) Fail(errs ...error) {
	m.mu.Lock()
	m.fails = append(m.fails, errs...)
	m.mu.Unlock()
}

// Record turns the recording of Runs for Calls on (the default) or off
// (benchmarks: each record copies the sequence).
func (m *Model) Record(on bool) {
	m.mu.Lock()
	m.noCalls = !on
	m.mu.Unlock()
}

// Calls returns the Runs made so far.
func (m *Model) Calls() []Call {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.calls)
}

// Closed reports whether Close was called.
func (m *Model) Closed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// BatchLimits: one sequence at a time, a whole context per Step.
func (m *Model) BatchLimits() inference.BatchLimits {
	n := m.info.ContextLen
	return inference.BatchLimits{Sequences: 1, Rows: n, Slots: n}
}

// StepCost is the latency set (at least a millisecond) per row.
func (m *Model) StepCost(rows int) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return time.Duration(rows) * max(m.latency, time.Millisecond)
}

func (m *Model) open(s *scriptSeq) (inference.SeqID, error) {
	if len(m.seqs) >= 1 || s.reserve > m.info.ContextLen {
		return 0, inference.ErrNoSlots
	}
	m.last++
	m.seqs[m.last] = s
	return m.last, nil
}

// Open implements inference.Batcher.
func (m *Model) Open(reserve int) (inference.SeqID, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.open(&scriptSeq{reserve: reserve})
}

// Fork implements inference.Batcher (it fails while the parent is open:
// one sequence at a time).
func (m *Model) Fork(parent inference.SeqID, rows, reserve int) (inference.SeqID, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.seqs[parent]
	if ps == nil || rows > len(ps.toks) {
		return 0, fmt.Errorf("inferencetest: fork of %d rows of sequence %d", rows, parent)
	}
	s := &scriptSeq{toks: slices.Clone(ps.toks[:rows]), reserve: rows + reserve}
	if rows == ps.prompt {
		s.prompt = rows
	}
	return m.open(s)
}

// Grow implements inference.Batcher: up to the context.
func (m *Model) Grow(id inference.SeqID, rows int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.seqs[id]
	if s == nil || rows > m.info.ContextLen {
		return inference.ErrNoSlots
	}
	s.reserve = max(s.reserve, rows)
	return nil
}

// Release implements inference.Batcher.
func (m *Model) Release(id inference.SeqID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.seqs, id)
}

// wait applies the gate and the latency.
func (m *Model) wait(ctx context.Context, gate chan struct{}, latency time.Duration) error {
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	return ctx.Err()
}

// Step implements inference.Batcher.
func (m *Model) Step(ctx context.Context, runs []inference.Run) ([]inference.Rows, error) {
	m.mu.Lock()
	for _, r := range runs {
		s := m.seqs[r.Seq]
		if s == nil || r.Start > len(s.toks) || r.Start+len(r.Tokens) > s.reserve {
			m.mu.Unlock()
			return nil, fmt.Errorf("inferencetest: bad run at %d of %d tokens on sequence %d", r.Start, len(r.Tokens), r.Seq)
		}
	}
	if !m.noCalls {
		for _, r := range runs {
			toks := append(slices.Clone(m.seqs[r.Seq].toks[:r.Start]), r.Tokens...)
			m.calls = append(m.calls, Call{Seq: toks, Valid: r.Start})
		}
	}
	latency, gate := m.latency, m.gate
	var fail error
	if len(m.fails) > 0 {
		fail = m.fails[0]
		m.fails = m.fails[1:]
	}
	m.mu.Unlock()
	err := m.wait(ctx, gate, latency)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	m.evals++
	m.evalDur += latency
	out := make([]inference.Rows, len(runs))
	for i, r := range runs {
		s := m.seqs[r.Seq]
		if s.prompt == 0 || len(r.Tokens) > 1 || r.Start != len(s.toks) {
			s.prompt = r.Start + len(r.Tokens) // a new prompt (or the rest of one)
		}
		s.toks = append(s.toks[:r.Start], r.Tokens...)
		out[i] = scriptRows{m: m, start: r.Start, n: len(r.Tokens), prompt: s.prompt}
	}
	if fail != nil {
		return nil, fail
	}
	return out, nil
}

// scriptRows are one Run's rows: row i is the logits after position start+i.
type scriptRows struct {
	m                *Model
	start, n, prompt int
}

func (r scriptRows) Len() int { return r.n }

// Logits peaks at the script's token for the row; the buffer is reused.
func (r scriptRows) Logits(_ context.Context, i int) (sample.Logits, error) {
	if i < 0 || i >= r.n {
		return sample.Logits{}, fmt.Errorf("inferencetest: row %d of %d", i, r.n)
	}
	m := r.m
	m.mu.Lock()
	defer m.mu.Unlock()
	next := m.info.EOS[0]
	if k := r.start + i + 1 - r.prompt; k >= 0 && k < len(m.script) {
		next = m.script[k]
	} else if k < 0 && len(m.script) > 0 {
		next = m.script[0]
	}
	m.logits[m.hot] = m.bg
	m.hot, m.bg = next, m.logits[next]
	m.logits[next] = m.peak
	return sample.Logits{Type: sample.F32, F32: m.logits}, nil
}

// GraphTotals implements inference.GraphTimer: one graph, "fake", with the
// number of Steps that got past their hooks and their injected latency.
func (m *Model) GraphTotals() []inference.GraphTotal {
	m.mu.Lock()
	defer m.mu.Unlock()
	return []inference.GraphTotal{{Graph: "fake", Calls: m.evals, Time: m.evalDur}}
}

// Close implements inference.Model.
func (m *Model) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}

// Vocab is a map-backed inference.Vocab. Pieces of the form <|…|> are special.
type Vocab struct {
	pieces map[int32]string
}

// NewVocab returns a vocabulary with the given pieces; other ids have none.
func NewVocab(pieces map[int32]string) *Vocab { return &Vocab{pieces: pieces} }

// Piece implements inference.Vocab.
func (v *Vocab) Piece(id int32) []byte { return []byte(v.pieces[id]) }

// IsSpecial implements inference.Vocab.
func (v *Vocab) IsSpecial(id int32) bool {
	p := v.pieces[id]
	return strings.HasPrefix(p, "<|") && strings.HasSuffix(p, "|>")
}
