package inferencetest

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hexserve/hexserve/inference"

	"github.com/hexserve/hexserve/inference/sample"
)

// Pool is a fake inference.Batcher. Each row's logits depend only on its
// own sequence's tokens up to and including the row (a hash picks the
// peaked id, never an EOS), so a row that attended another sequence's
// tokens would show in its output. With BatchLimits.Align > 1 the hash
// also takes, for every row up to the row, where the run that wrote it
// started, as a row's bits on a 16-bit cache depend on which of its
// sequence's rows the same call evaluated (the rows a restore brings back
// keep theirs). A Step costs Latency however many rows it carries, as a
// static-shape graph call does.
type Pool struct {
	info  inference.ModelInfo
	lim   inference.BatchLimits
	vocab int

	mu       sync.Mutex
	latency  time.Duration
	seqs     map[inference.SeqID]*poolSeq
	last     inference.SeqID
	used     int // reserved slots
	steps    []int
	forks    []Fork
	maxOpen  int
	restored int
	// Peak, when set, picks the peaked id from a row's tokens instead of
	// the hash.
	Peak func(toks []int32) int32
}

type poolSeq struct {
	toks    []int32 // the rows held (a Ring's evicted ones left out)
	from    []int32 // the start of the run that wrote each row held
	evicted int     // positions before len(toks)+evicted that a Ring's Shift freed
	keep    int     // the sink of the last Shift: a run may not start inside it
	reserve int
	owner   inference.SeqID // the sequence whose rows a fork shares (0: none)
	shared  int             // and how many
}

// Fork records a Fork call.
type Fork struct {
	Parent inference.SeqID
	Rows   int
}

var (
	_ inference.Model            = (*Pool)(nil)
	_ inference.SeqKVSnapshotter = (*Pool)(nil)
)

// NewPool returns a fake pool model over info (ContextLen and VocabSize
// must be set) with lim's limits.
func NewPool(info inference.ModelInfo, lim inference.BatchLimits) *Pool {
	return &Pool{info: info, lim: lim, vocab: info.VocabSize, seqs: map[inference.SeqID]*poolSeq{}}
}

// SetLatency sets each Step's duration.
func (p *Pool) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
}

// Steps are the rows of each Step so far.
func (p *Pool) Steps() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.steps)
}

// Forks are the Fork calls so far.
func (p *Pool) Forks() []Fork {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.forks)
}

// Sequences are the sequences open now and the most open at once.
func (p *Pool) Sequences() (open, most int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.seqs), p.maxOpen
}

func (p *Pool) Info() inference.ModelInfo { return p.info }
func (p *Pool) Close() error              { return nil }

func (p *Pool) BatchLimits() inference.BatchLimits { return p.lim }

func (p *Pool) StepCost(int) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(p.latency, time.Millisecond)
}

func (p *Pool) open(s *poolSeq) (inference.SeqID, error) {
	if len(p.seqs) >= p.lim.Sequences || p.used+s.reserve > p.lim.Slots {
		return 0, inference.ErrNoSlots
	}
	p.used += s.reserve
	p.last++
	p.seqs[p.last] = s
	p.maxOpen = max(p.maxOpen, len(p.seqs))
	return p.last, nil
}

func (p *Pool) Open(reserve int) (inference.SeqID, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open(&poolSeq{reserve: reserve})
}

func (p *Pool) Fork(parent inference.SeqID, rows, reserve int) (inference.SeqID, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.seqs[parent]
	if ps == nil || rows > len(ps.toks) {
		return 0, fmt.Errorf("inferencetest: fork of %d rows of sequence %d", rows, parent)
	}
	p.forks = append(p.forks, Fork{parent, rows})
	return p.open(&poolSeq{toks: slices.Clone(ps.toks[:rows]), from: slices.Clone(ps.from[:rows]), reserve: reserve, owner: parent, shared: rows})
}

func (p *Pool) Release(id inference.SeqID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.seqs[id]; s != nil {
		p.used -= s.reserve
		delete(p.seqs, id)
	}
}

func (p *Pool) Step(ctx context.Context, runs []inference.Run) ([]inference.Rows, error) {
	p.mu.Lock()
	latency := p.latency
	rows := 0
	for _, r := range runs {
		s := p.seqs[r.Seq]
		switch {
		case s == nil:
			p.mu.Unlock()
			return nil, fmt.Errorf("inferencetest: step on unknown sequence %d", r.Seq)
		case r.Start-s.evicted > len(s.toks) || r.Start-s.evicted < max(s.shared, 0) || s.evicted > 0 && r.Start-s.evicted < s.keep:
			p.mu.Unlock()
			return nil, fmt.Errorf("inferencetest: run at %d of a sequence of %d rows (%d shared, %d evicted)", r.Start, len(s.toks), s.shared, s.evicted)
		case r.Start-s.evicted+len(r.Tokens) > s.shared+s.reserve:
			p.mu.Unlock()
			return nil, fmt.Errorf("inferencetest: run to %d of a sequence of %d slots", r.Start-s.evicted+len(r.Tokens), s.shared+s.reserve)
		}
		rows += len(r.Tokens)
	}
	if rows > p.lim.Rows {
		p.mu.Unlock()
		return nil, fmt.Errorf("inferencetest: %d rows in a step of at most %d", rows, p.lim.Rows)
	}
	p.steps = append(p.steps, rows)
	p.mu.Unlock()
	if latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]inference.Rows, len(runs))
	for i, r := range runs {
		s := p.seqs[r.Seq]
		s.toks = append(s.toks[:r.Start-s.evicted], r.Tokens...)
		s.from = s.from[:r.Start-s.evicted]
		for range r.Tokens {
			s.from = append(s.from, int32(r.Start))
		}
		pr := poolRows{p: p, toks: slices.Clone(s.toks), from: slices.Clone(s.from), start: r.Start - s.evicted, n: len(r.Tokens)}
		out[i] = pr
	}
	return out, nil
}

// Next is the token the fake's logits peak at after toks.
func (p *Pool) Next(toks []int32) int32 { return p.next(toks, nil) }

// next is Next with the rows' run starts (from) when the pool is aligned.
func (p *Pool) next(toks, from []int32) int32 {
	if p.Peak != nil {
		return p.Peak(toks)
	}
	h := uint32(2166136261)
	for i, t := range toks {
		h = (h ^ uint32(t)) * 16777619
		if p.lim.Align > 1 && from != nil {
			h = (h ^ uint32(from[i])) * 16777619
		}
	}
	return 10 + int32(h%uint32(min(p.vocab-20, 400)))
}

type poolRows struct {
	p          *Pool
	toks, from []int32
	start, n   int
}

func (r poolRows) Len() int { return r.n }

// Held: every Logits call returns a fresh buffer.
func (r poolRows) Held() bool { return true }

func (r poolRows) Logits(_ context.Context, i int) (sample.Logits, error) {
	if i < 0 || i >= r.n {
		return sample.Logits{}, fmt.Errorf("inferencetest: row %d of %d", i, r.n)
	}
	l := make([]float32, r.p.vocab)
	l[r.p.next(r.toks[:r.start+i+1], r.from[:r.start+i+1])] = 100
	return sample.Logits{Type: sample.F32, F32: l}, nil
}

func (p *Pool) Grow(id inference.SeqID, rows int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.seqs[id]
	if s == nil {
		return fmt.Errorf("inferencetest: grow of unknown sequence %d", id)
	}
	have := s.reserve + s.shared
	if rows <= have {
		return nil
	}
	if p.used+rows-have > p.lim.Slots {
		return inference.ErrNoSlots
	}
	p.used += rows - have
	s.reserve += rows - have
	return nil
}

// KVLayout: a saved row is its token and its run's start (8 bytes), on
// which alone the fake's logits depend.
func (p *Pool) KVLayout() inference.KVLayout {
	return inference.KVLayout{Identity: "inferencetest.Pool", RowBytes: 8}
}

// SaveSeqKV writes rows [from, to) of id's tokens into dst.
func (p *Pool) SaveSeqKV(id inference.SeqID, from, to int, dst []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.seqs[id]
	if s == nil || from < 0 || to > len(s.toks) || from > to || len(dst) != 8*(to-from) {
		return fmt.Errorf("inferencetest: save of rows [%d, %d) of sequence %d", from, to, id)
	}
	for i := from; i < to; i++ {
		binary.LittleEndian.PutUint32(dst[8*(i-from):], uint32(s.toks[i]))
		binary.LittleEndian.PutUint32(dst[8*(i-from)+4:], uint32(s.from[i]))
	}
	return nil
}

// RestoreSeqKV makes src's tokens id's rows from from on; RestoredRows
// counts them.
func (p *Pool) RestoreSeqKV(id inference.SeqID, from int, src []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.seqs[id]
	n := len(src) / 8
	if s == nil || from > len(s.toks) || from < s.shared || len(src)%8 != 0 || from+n > s.shared+s.reserve {
		return fmt.Errorf("inferencetest: restore of %d rows at %d into sequence %d", n, from, id)
	}
	s.toks, s.from = s.toks[:from], s.from[:from]
	for i := range n {
		s.toks = append(s.toks, int32(binary.LittleEndian.Uint32(src[8*i:])))
		s.from = append(s.from, int32(binary.LittleEndian.Uint32(src[8*i+4:])))
	}
	p.restored += n
	return nil
}

// RestoredRows are the rows RestoreSeqKV wrote so far.
func (p *Pool) RestoredRows() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restored
}

// Rows is the sum of all Steps' rows so far.
func (p *Pool) Rows() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.steps {
		n += r
	}
	return n
}
