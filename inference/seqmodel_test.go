package inference_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/inference"

	"github.com/hexserve/hexserve/inference/inferencetest"
	"github.com/hexserve/hexserve/inference/kvstore"
	"github.com/hexserve/hexserve/inference/sample"
)

// seqModel is a one-sequence test Model (and SeqKVSnapshotter) whose
// logits after a prefix are fill(prefix, prompt), prompt being where the
// sequence's first Run ended. Its cache rows hold hashes of the prefixes
// they were computed for (prefixHashes): a Step whose reused rows do not
// hold the hashes of the tokens they stand for (a stale, foreign or
// half-restored cache) fails, and saved rows carry the hashes.
type seqModel struct {
	info   inference.ModelInfo
	fill   func(prefix []int32, prompt int) sample.Logits
	cost   func(rows int) time.Duration        // nil: a millisecond a row
	before func(toks []int32, start int) error // as each Step starts: the sequence's tokens after it

	mu       sync.Mutex
	id       inference.SeqID
	open     bool
	reserve  int
	first    int      // where the sequence's first run ended (the prompt, for verifies)
	prompt   int      // where the latest prompt run ended (for fill)
	toks     []int32  // tokens of the held rows (-1: restored, not yet named)
	rows     []uint64 // their hashes
	steps    int      // Steps
	verifies int      // Steps of several rows after the prompt
	asked    int      // rows whose logits were asked for
	calls    []inferencetest.Call
}

var (
	_ inference.Model            = (*seqModel)(nil)
	_ inference.SeqKVSnapshotter = (*seqModel)(nil)
	_ inference.SeqTokenRecorder = (*seqModel)(nil)
)

func prefixHashes(seq []int32) []uint64 {
	h := make([]uint64, len(seq))
	var x uint64 = 1469598103934665603
	for i, t := range seq {
		x = (x ^ uint64(uint32(t))) * 1099511628211
		h[i] = x
	}
	return h
}

func (m *seqModel) Info() inference.ModelInfo { return m.info }
func (m *seqModel) Close() error              { return nil }

func (m *seqModel) BatchLimits() inference.BatchLimits {
	n := m.info.ContextLen
	return inference.BatchLimits{Sequences: 1, Rows: n, Slots: n}
}

func (m *seqModel) StepCost(rows int) time.Duration {
	if m.cost != nil {
		return m.cost(rows)
	}
	return time.Duration(rows) * time.Millisecond
}

func (m *seqModel) Open(reserve int) (inference.SeqID, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.open || reserve > m.info.ContextLen {
		return 0, inference.ErrNoSlots
	}
	m.id++
	m.open, m.reserve, m.prompt, m.first = true, reserve, 0, 0
	m.toks, m.rows = m.toks[:0], m.rows[:0]
	return m.id, nil
}

func (m *seqModel) Fork(inference.SeqID, int, int) (inference.SeqID, error) {
	return 0, inference.ErrNoSlots
}

func (m *seqModel) Grow(id inference.SeqID, rows int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.open || id != m.id || rows > m.info.ContextLen {
		return inference.ErrNoSlots
	}
	m.reserve = max(m.reserve, rows)
	return nil
}

func (m *seqModel) Release(id inference.SeqID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id == m.id {
		m.open = false
	}
}

// check reports whether rows [0, n) hold the hashes of their tokens.
func (m *seqModel) check(n int) error {
	if n > len(m.toks) {
		return fmt.Errorf("a run at row %d of a sequence of %d rows", n, len(m.toks))
	}
	if !slices.Equal(m.rows[:n], prefixHashes(m.toks[:n])) {
		return errors.New("reused rows do not hold the sequence's prefix")
	}
	return nil
}

func (m *seqModel) Step(ctx context.Context, runs []inference.Run) ([]inference.Rows, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(runs) != 1 || !m.open || runs[0].Seq != m.id {
		return nil, fmt.Errorf("a one-sequence model got %d runs", len(runs))
	}
	r := runs[0]
	if r.Start+len(r.Tokens) > m.reserve {
		return nil, fmt.Errorf("a run to row %d of a sequence of %d slots", r.Start+len(r.Tokens), m.reserve)
	}
	if err := m.check(r.Start); err != nil {
		return nil, err
	}
	if m.first == 0 {
		m.first = r.Start + len(r.Tokens)
	}
	if m.prompt == 0 || len(r.Tokens) > 1 || r.Start != len(m.toks) {
		m.prompt = r.Start + len(r.Tokens) // a prompt (scriptFill's models draft nothing)
	}
	m.toks = append(m.toks[:r.Start], r.Tokens...)
	m.rows = prefixHashes(m.toks)
	m.steps++
	m.calls = append(m.calls, inferencetest.Call{Seq: slices.Clone(m.toks), Valid: r.Start})
	if r.Start >= m.first && len(r.Tokens) > 1 {
		m.verifies++
	}
	if m.before != nil {
		if err := m.before(slices.Clone(m.toks), r.Start); err != nil {
			return nil, err
		}
	}
	return []inference.Rows{&seqRows{m: m, toks: slices.Clone(m.toks), start: r.Start, prompt: m.prompt}}, nil
}

// seqRows are a Run's rows, computed when asked for, in order.
type seqRows struct {
	m             *seqModel
	toks          []int32
	start, prompt int
	next          int
}

func (r *seqRows) Len() int { return len(r.toks) - r.start }

func (r *seqRows) Logits(_ context.Context, i int) (sample.Logits, error) {
	if i < r.next || i >= r.Len() {
		return sample.Logits{}, fmt.Errorf("row %d asked for out of order or out of %d", i, r.Len())
	}
	r.next = i + 1
	r.m.mu.Lock()
	r.m.asked++
	r.m.mu.Unlock()
	return r.m.fill(r.toks[:r.start+i+1], r.prompt), nil
}

func (m *seqModel) KVLayout() inference.KVLayout {
	return inference.KVLayout{Identity: "rows", RowBytes: 8}
}

func (m *seqModel) SaveSeqKV(id inference.SeqID, from, to int, dst []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id != m.id || to > len(m.rows) || from > to {
		return fmt.Errorf("save of rows [%d, %d) of %d", from, to, len(m.rows))
	}
	for p := from; p < to; p++ {
		binary.LittleEndian.PutUint64(dst[(p-from)*8:], m.rows[p])
	}
	return nil
}

func (m *seqModel) RestoreSeqKV(id inference.SeqID, from int, src []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id != m.id || from > len(m.rows) {
		return fmt.Errorf("a restore at row %d leaves a gap after %d rows", from, len(m.rows))
	}
	m.toks, m.rows = m.toks[:from], m.rows[:from]
	for i := 0; i*8 < len(src); i++ {
		m.rows = append(m.rows, binary.LittleEndian.Uint64(src[i*8:]))
		m.toks = append(m.toks, -1)
	}
	return nil
}

// RestoredTokens names the restored rows' tokens; the next Step checks
// that the rows hold them.
func (m *seqModel) RestoredTokens(id inference.SeqID, toks []int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id == m.id {
		copy(m.toks, toks)
	}
}

// setupStore starts an engine on a seqModel that plays script after any
// prompt, with a KV store: the one path's reuse of earlier requests' rows.
func setupStore(t *testing.T, script []int32) (*inference.Engine, *seqModel) {
	t.Helper()
	m := &seqModel{info: inference.ModelInfo{VocabSize: vocab, ContextLen: 64, EOS: []int32{eot}},
		fill: scriptFill(vocab, eot, script)}
	st, err := kvstore.Open(kvstore.Config{Layout: m.KVLayout(), Memory: 1 << 20, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	e := inference.New(m, inferencetest.NewVocab(words), inference.Config{KVStore: st})
	t.Cleanup(func() { e.Close() })
	return e, m
}

// scriptFill returns logits peaked (100) at script[k] for the k-th row
// after the prompt (EOS after the script), F32 and vocab sized.
func scriptFill(vocab int, eos int32, script []int32) func([]int32, int) sample.Logits {
	l := make([]float32, vocab)
	return func(prefix []int32, prompt int) sample.Logits {
		clear(l)
		next := eos
		if k := len(prefix) - prompt; k >= 0 && k < len(script) {
			next = script[k]
		}
		l[next] = 100
		return sample.Logits{Type: sample.F32, F32: l}
	}
}
