package executorch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/inferencetest"
	"github.com/hexserve/hexserve/inference/kvstore"
	"github.com/hexserve/hexserve/inference/sample"
)

// bseq is a test sequence driven through the Batcher greedily.
type bseq struct {
	id     inference.SeqID
	toks   []int32 // prompt, then generated
	prompt int
	done   int               // committed rows
	logits map[int][]float32 // the logits after row i
	gen    int               // tokens to generate
}

func snapshot(l sample.Logits) []float32 {
	out := make([]float32, l.Len())
	for i := range out {
		out[i] = l.At(i)
	}
	return out
}

// drive runs seqs to completion with at most rows rows per step, prompts
// chunked into what is left after the decode rows.
func drive(t *testing.T, r *Runner, seqs []*bseq, rows int) {
	t.Helper()
	for {
		var runs []inference.Run
		var who []*bseq
		budget := rows
		for _, s := range seqs {
			if s.done >= s.prompt && len(s.toks) < s.prompt+s.gen && budget > 0 {
				runs = append(runs, inference.Run{Seq: s.id, Start: s.done, Tokens: s.toks[s.done : s.done+1]})
				who = append(who, s)
				budget--
			}
		}
		for _, s := range seqs {
			if s.done < s.prompt && budget > 0 {
				n := min(budget, s.prompt-s.done)
				runs = append(runs, inference.Run{Seq: s.id, Start: s.done, Tokens: s.toks[s.done : s.done+n]})
				who = append(who, s)
				budget -= n
			}
		}
		if len(runs) == 0 {
			return
		}
		out, err := r.Step(context.Background(), runs)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range who {
			s.done = runs[i].Start + len(runs[i].Tokens)
			if s.done < s.prompt {
				continue
			}
			l, err := out[i].Logits(context.Background(), len(runs[i].Tokens)-1)
			if err != nil {
				t.Fatal(err)
			}
			s.logits[s.done-1] = snapshot(l)
			if len(s.toks) < s.prompt+s.gen {
				s.toks = append(s.toks, argmax(l))
			}
		}
	}
}

func newBseqs(t *testing.T, r *Runner, prompts [][]int32, gen int) []*bseq {
	t.Helper()
	var out []*bseq
	for _, p := range prompts {
		id, err := r.Open(len(p) + gen)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &bseq{id: id, toks: slices.Clone(p), prompt: len(p), gen: gen, logits: map[int][]float32{}})
	}
	return out
}

// sameAsAlone fails t unless each sequence of got has the tokens and the
// logits bits of the same sequence of alone.
func sameAsAlone(t *testing.T, got, alone []*bseq) {
	t.Helper()
	for i, s := range got {
		if !slices.Equal(s.toks, alone[i].toks) {
			t.Fatalf("sequence %d: %v, alone %v", i, s.toks, alone[i].toks)
		}
		for pos, l := range alone[i].logits {
			if !equalBits(s.logits[pos], l) {
				t.Fatalf("sequence %d: logits after row %d differ from alone", i, pos)
			}
		}
	}
}

func equalBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

var batchPrompts = [][]int32{
	{128000, 791, 6460, 374, 6437, 1606, 279},
	{128000, 40, 1093},
	{128000, 9906, 11, 1268, 527, 499, 3432, 30, 358, 1097, 2133},
}

// TestBatchBitIdentical: on a float32 .pte, a sequence's logits are the
// same bits alone and next to others (prompt chunks beside decode rows,
// several sequences' rows in one call), and its greedy tokens are Eval's.
func TestBatchBitIdentical(t *testing.T) {
	rt, path := numericPTE(t, 64, 2)
	const gen = 6
	alone := make([]*bseq, len(batchPrompts))
	ra := openRunner(t, rt, path)
	for i, p := range batchPrompts {
		ss := newBseqs(t, ra, [][]int32{p}, gen)
		drive(t, ra, ss, 8)
		ra.Release(ss[0].id)
		alone[i] = ss[0]
	}
	rb := openRunner(t, rt, path)
	together := newBseqs(t, rb, batchPrompts, gen)
	drive(t, rb, together, 8)
	sameAsAlone(t, together, alone)
	// And the tokens are those of today's one-sequence path.
	re := openRunner(t, rt, path)
	for i, p := range batchPrompts {
		toks, _ := greedy(t, re, p, 0, gen)
		if want := together[i].toks[len(p):]; !slices.Equal(toks, want) {
			t.Errorf("sequence %d: Eval %v, Step %v", i, toks, want)
		}
	}
	if g := rb.Stats().Graphs[rb.pre.method]; g.Calls == 0 {
		t.Fatal("no prefill_forward call carried rows")
	}
}

// TestBatchIsolation: no row's mask opens a slot of another sequence, a
// fork reads its parent's prompt slots, and releasing frees the slots.
func TestBatchIsolation(t *testing.T) {
	rt := openRuntime(t)
	r := openRunner(t, rt, writePTE(t, pteOpts{ctx: 64, ar: 8, shards: 1, kv: simfile.F32, logits: simfile.F32}))
	a, err := r.Open(10)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Open(10)
	if err != nil {
		t.Fatal(err)
	}
	step := func(runs ...inference.Run) {
		t.Helper()
		if _, err := r.Step(context.Background(), runs); err != nil {
			t.Fatal(err)
		}
	}
	step(inference.Run{Seq: a, Start: 0, Tokens: []int32{128000, 1, 2}}, inference.Run{Seq: b, Start: 0, Tokens: []int32{128000, 3, 4, 5}})
	f, err := r.Fork(a, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	step(inference.Run{Seq: a, Start: 3, Tokens: []int32{6}}, inference.Run{Seq: b, Start: 4, Tokens: []int32{7, 8}}, inference.Run{Seq: f, Start: 3, Tokens: []int32{9}})
	m := r.pre
	mask := m.vals[m.mask].Bytes()
	es := len(mask) / (m.ar * m.cl)
	code := make([]byte, es)
	m.masks.Fill(code, 0, 1, true)
	open := func(row, col int) bool {
		return bytes.Equal(mask[(row*m.cl+col)*es:(row*m.cl+col+1)*es], code)
	}
	S := m.cl - m.ar
	sa, sb, sf := r.Pool.Seq(a), r.Pool.Seq(b), r.Pool.Seq(f)
	own := map[int][]int{ // row → the slots it may read
		0: {sa.Slot(0), sa.Slot(1), sa.Slot(2)},
		1: {sb.Slot(0), sb.Slot(1), sb.Slot(2), sb.Slot(3)},
		2: {sb.Slot(0), sb.Slot(1), sb.Slot(2), sb.Slot(3)},
		3: {sa.Slot(0), sa.Slot(1), sa.Slot(2)}, // the fork: its parent's prompt
	}
	block := map[int][]int{0: {0}, 1: {1}, 2: {1, 2}, 3: {3}}
	for row, slots := range own {
		for col := range m.cl {
			want := col < S && slices.Contains(slots, col) || col >= S && slices.Contains(block[row], col-S)
			if open(row, col) != want {
				t.Fatalf("row %d column %d: open %v, want %v", row, col, open(row, col), want)
			}
		}
	}
	if sf.Lo <= sa.Slot(2) {
		t.Fatalf("fork slots %d… below its parent's prompt slot %d", sf.Lo, sa.Slot(2))
	}
	// A run may not rewrite shared rows or pass its reserve; a released
	// sequence is gone and its slots are free again.
	if _, err := r.Step(context.Background(), []inference.Run{{Seq: f, Start: 2, Tokens: []int32{1}}}); err == nil {
		t.Fatal("a fork rewrote a shared row")
	}
	if _, err := r.Step(context.Background(), []inference.Run{{Seq: a, Start: 4, Tokens: make([]int32, 7)}}); err == nil {
		t.Fatal("a run passed its reserve")
	}
	r.Release(a)
	r.Release(b)
	r.Release(f)
	if _, err := r.Step(context.Background(), []inference.Run{{Seq: a, Start: 0, Tokens: []int32{1}}}); err == nil {
		t.Fatal("a released sequence ran")
	}
	if _, err := r.Open(r.cl - 1); err != nil {
		t.Fatalf("the whole pool after releases: %v", err)
	}
	if _, err := r.Open(1); !errors.Is(err, inference.ErrNoSlots) {
		t.Fatalf("open on a full pool: %v", err)
	}
}

// byteVocab is a vocabulary for engine tests: every id is its own piece.
type byteVocab struct{}

func (byteVocab) Piece(id int32) []byte   { return []byte(fmt.Sprintf("<%d>", id)) }
func (byteVocab) IsSpecial(id int32) bool { return id >= 128000 }

// TestEngineSideBySide: through the engine, greedy and seeded requests
// (with n = 2, and a prediction) give the same tokens run alone on a
// one-at-a-time engine and 4 at once on a side-by-side one.
func TestEngineSideBySide(t *testing.T) {
	rt := openRuntime(t)
	path := writePTE(t, pteOpts{ctx: 128, ar: 8, shards: 1, kv: simfile.F32, logits: simfile.F32})
	seed := int64(3)
	reqs := []inference.Request{
		{Prompt: batchPrompts[0], MaxTokens: 8, IgnoreEOS: true},
		{Prompt: batchPrompts[1], MaxTokens: 6, IgnoreEOS: true, N: 2, Sampling: sample.Params{Temperature: 1, Seed: &seed}},
		{Prompt: batchPrompts[2], MaxTokens: 7, IgnoreEOS: true, Sampling: sample.Params{Temperature: 0.8, TopP: 0.9, Seed: &seed}},
		{Prompt: batchPrompts[0], MaxTokens: 8, IgnoreEOS: true, Prediction: "<1><2><3>"},
	}
	ra := openRunner(t, rt, path)
	ea := inference.New(ra, byteVocab{}, inference.Config{MaxSequences: 1, Speculative: inference.DefaultSpeculative})
	var alone [][][]int32
	for _, req := range reqs { // one after the other
		alone = append(alone, inferencetest.Tokens(inferencetest.Run(t, ea, req)))
	}
	ea.Close()
	rb := openRunner(t, rt, path)
	eb := inference.New(rb, byteVocab{}, inference.Config{MaxSequences: 8, Speculative: inference.DefaultSpeculative})
	defer eb.Close()
	for i, res := range inferencetest.RunAll(t, eb, reqs) {
		if together := inferencetest.Tokens(res); !slices.EqualFunc(alone[i], together, slices.Equal) {
			t.Errorf("request %d: alone %v, side by side %v", i, alone[i], together)
		}
	}
	if n := len(alone[1]); n != 2 || slices.Equal(alone[1][0], alone[1][1]) {
		t.Errorf("n = 2 seeded: %v", alone[1])
	}
	if g := rb.Stats().Graphs[rb.pre.method]; g.Calls == 0 {
		t.Fatal("the side-by-side engine made no prefill_forward call")
	}
}

// TestBatchDecodeRows: when measured costs make one prefill_forward call
// dearer than a kv_forward call per row, a step runs its rows (prompt
// chunks included) through kv_forward, with the same bits.
func TestBatchDecodeRows(t *testing.T) {
	rt, path := numericPTE(t, 64, 1)
	ra := openRunner(t, rt, path)
	var alone []*bseq
	for _, p := range batchPrompts[:2] {
		ss := newBseqs(t, ra, [][]int32{p}, 5)
		drive(t, ra, ss, 8)
		alone = append(alone, ss[0])
	}
	t.Setenv("HOSTSIM_LATENCY_US_PREFILL", "600000") // prefill_forward: 600 ms a call (far above kv_forward even on a loaded machine)
	rb := openRunner(t, rt, path)
	warm := newBseqs(t, rb, [][]int32{{128000, 5}}, 3) // both graphs measured
	drive(t, rb, warm, 8)
	rb.Release(warm[0].id)
	for range plan.WarmExecutes - 1 { // as if re-measured while warming: its estimate is settled
		rb.stats.Observe(rb.pre.method, 600*time.Millisecond, 0, false)
	}
	rb.publish()
	ss := newBseqs(t, rb, batchPrompts[:2], 5)
	pre, dec := rb.Stats().Graphs[rb.pre.method].Calls, rb.Stats().Graphs[rb.dec.method].Calls
	drive(t, rb, ss, 8)
	rows := len(batchPrompts[0]) + len(batchPrompts[1]) + 2*4
	if p, d := rb.Stats().Graphs[rb.pre.method].Calls-pre, rb.Stats().Graphs[rb.dec.method].Calls-dec; p != 0 || d != int64(rows) {
		t.Fatalf("%d prefill_forward and %d kv_forward calls, want 0 and %d", p, d, rows)
	}
	sameAsAlone(t, ss, alone)
}

// TestBatchGrow: a sequence grows in place when the slots after it are
// free, moves (with its rows, bit for bit) when they are not, and refuses
// to move while a fork shares its rows.
func TestBatchGrow(t *testing.T) {
	rt, path := numericPTE(t, 64, 1)
	ra := openRunner(t, rt, path)
	alone := newBseqs(t, ra, batchPrompts[:1], 12)
	drive(t, ra, alone, 8)

	r := openRunner(t, rt, path)
	ss := newBseqs(t, r, batchPrompts[:1], 2) // room for 9 rows
	drive(t, r, ss, 8)
	s := r.Pool.Seq(ss[0].id)
	if err := r.Grow(ss[0].id, 12); err != nil || s.Lo != 0 || s.Hi != 12 {
		t.Fatalf("grow in place: %v, slots [%d, %d)", err, s.Lo, s.Hi)
	}
	blocker, err := r.Open(4) // slots [12, 16)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Grow(ss[0].id, 20); err != nil || s.Lo != 16 || r.stats.KVMoves != 1 {
		t.Fatalf("grow by moving: %v, slots [%d, %d), %d moves", err, s.Lo, s.Hi, r.stats.KVMoves)
	}
	ss[0].gen = 12
	drive(t, r, ss, 8)
	sameAsAlone(t, ss[:1], alone) // after the move
	if _, err := r.Fork(ss[0].id, 3, 2); err != nil {
		t.Fatal(err)
	}
	r.Release(blocker)
	if _, err := r.Open(r.cl - 1 - 40); err != nil { // fill the pool's tail
		t.Fatal(err)
	}
	if err := r.Grow(ss[0].id, 30); !errors.Is(err, inference.ErrNoSlots) {
		t.Fatalf("grow of a shared sequence that must move: %v", err)
	}
}

// TestEngineSideBySideKVStore: side by side, a finished request's rows go
// to the KV store and a later prompt that starts with them restores them
// (cached_tokens), with the same tokens as without the store.
func TestEngineSideBySideKVStore(t *testing.T) {
	rt, path := numericPTE(t, 128, 1)
	inferencetest.KVStoreTurns(t, openRunner(t, rt, path), openRunner(t, rt, path), byteVocab{}, batchPrompts[2], 64<<20)
}

// TestBatchWholeWindow: the pool spans the whole window (CL − 1 slots);
// rows in slots prefill_forward cannot see (CL − AR on) go through
// kv_forward, for their own sequence and their neighbours, with the same
// bits as alone, and a long sequence gets Eval's tokens.
func TestBatchWholeWindow(t *testing.T) {
	rt, path := numericPTE(t, 64, 1)
	long := []int32{128000}
	for i := range 49 {
		long = append(long, int32(100+(37*i)%5000))
	}
	prompts := [][]int32{long, {128000, 9906, 11}}
	gens := []int{9, 1} // reserves 59 and 4: the second lands in slots 59…62, past CL − AR = 56
	ra := openRunner(t, rt, path)
	var alone []*bseq
	for i, p := range prompts {
		ss := newBseqs(t, ra, [][]int32{p}, gens[i])
		drive(t, ra, ss, 8)
		ra.Release(ss[0].id)
		alone = append(alone, ss[0])
	}
	rb := openRunner(t, rt, path)
	var together []*bseq
	for i, p := range prompts {
		together = append(together, newBseqs(t, rb, [][]int32{p}, gens[i])...)
	}
	if s := rb.Pool.Seq(together[1].id); s.Lo < rb.cl-rb.pre.ar {
		t.Fatalf("the second sequence is in slots %d…, not past %d", s.Lo, rb.cl-rb.pre.ar)
	}
	drive(t, rb, together, 8)
	sameAsAlone(t, together, alone)
	re := openRunner(t, rt, path)
	if toks, _ := greedy(t, re, long, 0, gens[0]); !slices.Equal(toks, together[0].toks[len(long):]) {
		t.Fatalf("Eval %v, Step %v", toks, together[0].toks[len(long):])
	}
}

// TestEngineSharedPrefix: requests of one owner with the same system
// prompt, sent at once, fork its rows (cached_tokens) and give the tokens
// a one-at-a-time engine gives; another owner's request shares nothing.
func TestEngineSharedPrefix(t *testing.T) {
	rt, path := numericPTE(t, 128, 1)
	system := slices.Concat(batchPrompts[2], batchPrompts[0][1:], batchPrompts[1][1:]) // 19 tokens
	seed := int64(5)
	var reqs []inference.Request
	for i, owner := range []string{"alice", "alice", "alice", "mallory"} {
		reqs = append(reqs, inference.Request{Prompt: append(slices.Clone(system), int32(400+i), 13), MaxTokens: 6, IgnoreEOS: true,
			Owner: owner, Sampling: sample.Params{Temperature: 0.7, Seed: &seed}})
	}
	ea := inference.New(openRunner(t, rt, path), byteVocab{}, inference.Config{MaxSequences: 1})
	alone := inferencetest.RunAll(t, ea, reqs)
	ea.Close()
	eb := inference.New(openRunner(t, rt, path), byteVocab{}, inference.Config{MaxSequences: 8})
	defer eb.Close()
	together := inferencetest.RunAll(t, eb, reqs)
	for i := range reqs {
		if !slices.Equal(alone[i].Choices[0].Tokens, together[i].Choices[0].Tokens) {
			t.Errorf("request %d: alone %v, side by side %v", i, alone[i].Choices[0].Tokens, together[i].Choices[0].Tokens)
		}
	}
	for i, want := range []int{0, len(system), len(system), 0} {
		if c := together[i].Usage.CachedTokens; c != want {
			t.Errorf("request %d (%s): cached_tokens %d, want %d", i, reqs[i].Owner, c, want)
		}
	}
}

// TestEnginePreemptRestore: when the pool is too small for three growing
// sequences, the one set aside is saved to the KV store and restored from
// it (not evaluated again), with the tokens of a one-at-a-time engine.
func TestEnginePreemptRestore(t *testing.T) {
	rt, path := numericPTE(t, 128, 1)
	var reqs []inference.Request
	for i := range 3 {
		reqs = append(reqs, inference.Request{Prompt: batchPrompts[i], MaxTokens: 80 - i, IgnoreEOS: true})
	}
	// The first choice's tokens of reqs, run side by side on e.
	collect := func(e *inference.Engine) [][]int32 {
		var out [][]int32
		for _, res := range inferencetest.RunAll(t, e, reqs) {
			out = append(out, res.Choices[0].Tokens)
		}
		return out
	}
	ea := inference.New(openRunner(t, rt, path), byteVocab{}, inference.Config{MaxSequences: 1})
	alone := collect(ea)
	ea.Close()
	r := openRunner(t, rt, path)
	store, err := kvstore.Open(kvstore.Config{Layout: r.KVLayout(), Memory: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e := inference.New(r, byteVocab{}, inference.Config{MaxSequences: 4, KVStore: store, Registerer: reg})
	defer e.Close()
	got := collect(e)
	for i := range reqs {
		if !slices.Equal(alone[i], got[i]) {
			t.Errorf("request %d: alone %v, side by side %v", i, alone[i], got[i])
		}
	}
	value := func(name string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}
	if value("hexserve_preemptions_total") == 0 {
		t.Fatal("no preemption: the test does not exercise it")
	}
	// A set-aside sequence holds its prompt and at least 32 generated rows
	// (a growth step); without the save only the shared BOS row of a
	// finished request could come back.
	if n := value("hexserve_kv_store_restored_tokens_total"); n < 32 {
		t.Errorf("%v rows restored: a preempted sequence was not restored from the store", n)
	}
	t.Logf("%v preemptions, %v rows restored", value("hexserve_preemptions_total"), value("hexserve_kv_store_restored_tokens_total"))
}
