// Package inferencetest provides fakes of the engine's dependencies for
// tests in other packages: a scripted Model and a map-backed Vocab.
package inferencetest

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hexserve/hexserve/inference"
)

// Model is a scripted inference.Model. Its logits are F32 and vocabulary
// sized: 0 everywhere except 100 at the next token of the script (an EOS
// after the script ends), so any sampling settings pick the script. Each
// Eval that extends the previous sequence by one token advances the script;
// any other Eval (a new prompt, the next choice) restarts it.
type Model struct {
	info   inference.ModelInfo
	script []int32
	logits []float32

	mu      sync.Mutex
	step    int
	prev    []int32
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

// Call records one Eval.
type Call struct {
	Seq   []int32
	Valid int
}

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
	return &Model{info: info, script: slices.Clone(script), logits: make([]float32, info.VocabSize), peak: 100}
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

// SetLatency makes every Eval take d (on the clock of time.NewTimer, so a
// synctest bubble runs it instantly), ending early when ctx ends.
func (m *Model) SetLatency(d time.Duration) {
	m.mu.Lock()
	m.latency = d
	m.mu.Unlock()
}

// Gate makes every Eval wait for a value on the returned channel (or its
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

// Fail makes the next len(errs) Evals return errs in order (a nil entry lets
// that call succeed).
func (m *Model) Fail(errs ...error) {
	m.mu.Lock()
	m.fails = append(m.fails, errs...)
	m.mu.Unlock()
}

// Record turns the recording of Evals for Calls on (the default) or off
// (benchmarks: each record copies the sequence).
func (m *Model) Record(on bool) {
	m.mu.Lock()
	m.noCalls = !on
	m.mu.Unlock()
}

// Calls returns the Evals made so far.
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

// Eval implements inference.Model.
func (m *Model) Eval(ctx context.Context, seq []int32, valid int) (inference.Logits, int, error) {
	m.mu.Lock()
	if !m.noCalls {
		m.calls = append(m.calls, Call{Seq: slices.Clone(seq), Valid: valid})
	}
	latency, gate := m.latency, m.gate
	var fail error
	if len(m.fails) > 0 {
		fail = m.fails[0]
		m.fails = m.fails[1:]
	}
	m.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return inference.Logits{}, 0, ctx.Err()
		}
	}
	if latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return inference.Logits{}, 0, ctx.Err()
		}
	}
	if err := ctx.Err(); err != nil {
		return inference.Logits{}, 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.evals++
	m.evalDur += latency
	if fail != nil {
		m.prev = m.prev[:0]
		return inference.Logits{}, 0, fail
	}
	if len(m.prev) > 0 && len(seq) == len(m.prev)+1 && slices.Equal(seq[:len(m.prev)], m.prev) {
		m.step++
	} else {
		m.step = 0
	}
	m.prev = append(m.prev[:0], seq...)
	next := m.info.EOS[0]
	if m.step < len(m.script) {
		next = m.script[m.step]
	}
	m.logits[m.hot] = m.bg
	m.hot, m.bg = next, m.logits[next]
	m.logits[next] = m.peak
	return inference.Logits{Type: inference.F32, F32: m.logits}, valid, nil
}

// GraphTotals implements inference.GraphTimer: one graph, "fake", with the
// number of Evals that got past their hooks and their injected latency.
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
