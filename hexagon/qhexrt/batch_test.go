package qhexrt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/inferencetest"
	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// batchVariants are the float32 tiny bundles of both contracts with a
// 16-row window, so that prompts cross windows.
var batchVariants = []variant{f32(simfile.Chunked, 16, simfile.MaskAdditive), f32(simfile.QHexRT, 16, simfile.MaskAdditive)}

// bseq is one sequence of a batch test: its prompt, the step it arrives at
// and the logits of each row the engine would sample.
type bseq struct {
	prompt []int32
	arrive int
	id     inference.SeqID
	toks   []int32 // prompt and sampled tokens
	done   int     // rows committed
	logits [][]float32
}

// eachVariant runs f on the tiny model of every batch variant (a numeric
// test: see skipNumeric).
func eachVariant(t *testing.T, f func(t *testing.T, r *Runner)) {
	skipNumeric(t)
	for _, v := range batchVariants {
		t.Run(v.String(), func(t *testing.T) { f(t, openTiny(t, v)) })
	}
}

// skipNumeric skips a numeric model run under -short: the full (non-race)
// pass runs it.
func skipNumeric(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("numeric model runs: the full (non-race) pass runs it")
	}
}

// chunked reports whether r's bundle follows the chunked contract.
func chunked(r *Runner) bool { return r.Contract() == ContractChunked }

// mustStep runs one step, failing the test on an error.
func mustStep(t *testing.T, r *Runner, runs []inference.Run) []inference.Rows {
	t.Helper()
	out, err := r.Step(context.Background(), runs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// drive runs seqs side by side as the engine would, greedily, for steps
// decode steps each: every step carries a decode row of each sequence past
// its prompt and the prompts of the sequences arriving (whole, or the rows
// that still fit the window).
func drive(t *testing.T, r *Runner, steps int, seqs ...*bseq) {
	t.Helper()
	ctx := context.Background()
	for _, s := range seqs {
		s.toks, s.done, s.logits, s.id = slices.Clone(s.prompt), 0, nil, 0
	}
	for step := 0; ; step++ {
		var runs []inference.Run
		var who []*bseq
		rows := 0
		for _, s := range seqs {
			if s.arrive > step || len(s.logits) > steps {
				continue
			}
			if s.id == 0 {
				id, err := r.Open(len(s.prompt) + steps + 1)
				if err != nil {
					t.Fatal(err)
				}
				s.id = id
			}
			n := min(len(s.toks)-s.done, r.window-rows)
			if n <= 0 {
				continue
			}
			runs = append(runs, inference.Run{Seq: s.id, Start: s.done, Tokens: s.toks[s.done : s.done+n]})
			who = append(who, s)
			rows += n
		}
		if len(runs) == 0 {
			break
		}
		out, err := r.Step(ctx, runs)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		for i, s := range who {
			s.done += len(runs[i].Tokens)
			if s.done < len(s.toks) {
				continue
			}
			l, err := out[i].Logits(ctx, len(runs[i].Tokens)-1)
			if err != nil {
				t.Fatal(err)
			}
			f := copyLogits(l)
			s.logits = append(s.logits, f)
			s.toks = append(s.toks, int32(tinyllama.Argmax(f)))
		}
	}
	for _, s := range seqs {
		r.Release(s.id)
	}
}

func testPrompt(seed uint64, n int) []int32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(rng.IntN(1000) + 10)
	}
	return p
}

// TestBatchBitIdentical: each sequence's logits side by side (arriving at
// different steps, prompts split over steps and crossing windows) are
// bit-identical to the same sequence alone.
func TestBatchBitIdentical(t *testing.T) {
	eachVariant(t, func(t *testing.T, r *Runner) {
		const steps = 6
		prompts := [][]int32{testPrompt(1, 5), testPrompt(2, 13), testPrompt(3, 3), testPrompt(4, 21)}
		alone := make([][][]float32, len(prompts))
		for i, p := range prompts {
			s := &bseq{prompt: p}
			drive(t, r, steps, s)
			alone[i] = s.logits
		}
		var ss []*bseq
		for i, p := range prompts {
			ss = append(ss, &bseq{prompt: p, arrive: []int{0, 0, 2, 3}[i]})
		}
		drive(t, r, steps, ss...)
		for i, s := range ss {
			for j := range alone[i] {
				if !slices.Equal(s.logits[j], alone[i][j]) {
					t.Fatalf("sequence %d row %d: side by side differs from alone (max %g)", i, j, maxDiff(s.logits[j], alone[i][j]))
				}
			}
		}
	})
}

// TestBatchIsolation: a row never reads another sequence's rows. Garbage
// written over one sequence's cache rows leaves the others' logits
// unchanged; on a chunked bundle every mask row opens exactly its own
// sequence's slots and its run's earlier rows.
func TestBatchIsolation(t *testing.T) {
	ctx := context.Background()
	for _, v := range batchVariants {
		t.Run(v.String(), func(t *testing.T) {
			r := openTiny(t, v)
			a := &bseq{prompt: testPrompt(5, 7)}
			drive(t, r, 3, a)
			want := a.logits
			ida, _ := r.Open(16)
			idb, _ := r.Open(16)
			pb := testPrompt(6, 6)
			mustStep(t, r, []inference.Run{{Seq: ida, Tokens: a.prompt[:4]}, {Seq: idb, Tokens: pb}})
			if chunked(r) {
				checkPoolMask(t, r, []inference.SeqID{ida, idb}, []int{0, 0}, []int{4, 6})
			}
			// Garbage over every row b holds.
			kv, slot, n, ok := r.seqs.rows(idb)
			if !ok {
				t.Fatal("no rows for b")
			}
			rng := rand.New(rand.NewPCG(7, 7))
			rb := r.kvSlots.Bytes(1)
			for i := range kv.K {
				for p := range n {
					q := slot(p) * rb
					for _, c := range [][]byte{kv.K[i][q : q+rb], kv.V[i][q : q+rb]} {
						for j := range c {
							c[j] = byte(rng.Uint32())
						}
					}
				}
			}
			toks := slices.Clone(a.prompt)
			start := 4
			for j := range want {
				out := mustStep(t, r, []inference.Run{{Seq: ida, Start: start, Tokens: toks[start:]}, {Seq: idb, Start: 6 + j, Tokens: []int32{int32(j + 20)}}})
				l, err := out[0].Logits(ctx, out[0].Len()-1)
				if err != nil {
					t.Fatal(err)
				}
				if got := copyLogits(l); !slices.Equal(got, want[j]) {
					t.Fatalf("row %d of a changed with b's rows garbled (max %g)", j, maxDiff(got, want[j]))
				}
				start = len(toks)
				toks = append(toks, int32(tinyllama.Argmax(want[j])))
			}
		})
	}
}

// checkPoolMask checks the prefill mask of a chunked Step of runs (ids,
// starts, lengths, in order): row i of a run opens its sequence's slots of
// rows [0, start) and window columns of its run up to itself; a padding
// row opens nothing.
func checkPoolMask(t *testing.T, r *Runner, ids []inference.SeqID, starts, lens []int) {
	t.Helper()
	g := r.graphs[rolePrefill]
	es := g.mask.Elem.Size()
	code := make([]byte, es)
	g.masks.Fill(code, 0, 1, true)
	w := r.spec.ctx + g.rows
	o := 0
	for k, id := range ids {
		s := r.seqs.(*poolSeqs).Pool.Seq(id)
		for i := range lens[k] {
			for col := range w {
				want := false
				for p := range starts[k] {
					want = want || col == s.Slot(p)
				}
				want = want || col >= r.spec.ctx && col-r.spec.ctx >= o && col-r.spec.ctx <= o+i
				e := ((o+i)*w + col) * es
				if got := string(g.mask.B[e:e+es]) == string(code); got != want {
					t.Fatalf("sequence %d row %d column %d: open %v, want %v", id, i, col, got, want)
				}
			}
		}
		o += lens[k]
	}
	for i := o; i < g.rows; i++ { // padding rows open nothing
		for col := range w {
			if e := (i*w + col) * es; string(g.mask.B[e:e+es]) == string(code) {
				t.Fatalf("padding row %d opens column %d", i, col)
			}
		}
	}
}

// TestBatchForkRelease: a fork continues from its parent's rows as that
// prefix would alone; released sequences free their slots (or KV sets) at
// once, and a full pool says ErrNoSlots.
func TestBatchForkRelease(t *testing.T) {
	ctx := context.Background()
	eachVariant(t, func(t *testing.T, r *Runner) {
		p := testPrompt(8, 9)
		alone := &bseq{prompt: append(slices.Clone(p), 77)}
		drive(t, r, 0, alone)
		pa, _ := r.Open(12)
		mustStep(t, r, []inference.Run{{Seq: pa, Tokens: p}})
		f, err := r.Fork(pa, len(p), 3)
		if err != nil {
			t.Fatal(err)
		}
		out := mustStep(t, r, []inference.Run{{Seq: pa, Start: len(p), Tokens: []int32{5}}, {Seq: f, Start: len(p), Tokens: []int32{77}}})
		l, err := out[1].Logits(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := copyLogits(l); !slices.Equal(got, alone.logits[0]) {
			t.Fatalf("fork's row differs from the prefix alone (max %g)", maxDiff(got, alone.logits[0]))
		}
		if _, err := r.Step(ctx, []inference.Run{{Seq: f, Start: len(p) - 1, Tokens: []int32{1}}}); err == nil && chunked(r) {
			t.Fatal("a run rewriting a fork's shared row was accepted")
		}
		r.Release(pa)
		r.Release(f)
		r.Release(f) // unknown: a no-op
		lim := r.BatchLimits()
		var ids []inference.SeqID
		for range lim.Sequences {
			id, err := r.Open(lim.Slots / lim.Sequences)
			if err != nil {
				t.Fatalf("open %d of %d after releases: %v", len(ids)+1, lim.Sequences, err)
			}
			ids = append(ids, id)
		}
		if _, err := r.Open(1); !errors.Is(err, inference.ErrNoSlots) {
			t.Fatalf("open on a full pool: %v, want ErrNoSlots", err)
		}
		r.Release(ids[0])
		if _, err := r.Open(lim.Slots / lim.Sequences); err != nil {
			t.Fatalf("open after a release: %v", err)
		}
	})
}

// TestSeqKVRoundTrip: a sequence's rows saved and restored into another
// sequence continue to the same bits; bad ranges are refused.
func TestSeqKVRoundTrip(t *testing.T) {
	ctx := context.Background()
	eachVariant(t, func(t *testing.T, r *Runner) {
		p := testPrompt(9, 18)
		alone := &bseq{prompt: append(slices.Clone(p), 3)}
		drive(t, r, 0, alone)
		a, _ := r.Open(20)
		mustStep(t, r, []inference.Run{{Seq: a, Tokens: p[:16]}})
		mustStep(t, r, []inference.Run{{Seq: a, Start: 16, Tokens: p[16:]}})
		rb := r.KVLayout().RowBytes
		buf := make([]byte, len(p)*rb)
		if err := r.SaveSeqKV(a, 0, len(p), buf); err != nil {
			t.Fatal(err)
		}
		if err := r.SaveSeqKV(a, 0, len(p)+1, make([]byte, (len(p)+1)*rb)); err == nil {
			t.Fatal("saving an uncommitted row was accepted")
		}
		r.Release(a)
		b, _ := r.Open(20)
		if err := r.RestoreSeqKV(b, 1, buf); err == nil {
			t.Fatal("restoring past the committed rows was accepted")
		}
		if err := r.RestoreSeqKV(b, 0, buf); err != nil {
			t.Fatal(err)
		}
		out := mustStep(t, r, []inference.Run{{Seq: b, Start: len(p), Tokens: []int32{3}}})
		l, err := out[0].Logits(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := copyLogits(l); !slices.Equal(got, alone.logits[0]) {
			t.Fatalf("restored rows continue differently (max %g)", maxDiff(got, alone.logits[0]))
		}
	})
}

// TestBatchNoLeak: open/step/release cycles allocate KV sets once and keep
// hostsim's registrations and rpcmem steady; every set is registered under
// hostsim's rules (no client-buffer fallback); Close frees everything.
func TestBatchNoLeak(t *testing.T) {
	for _, v := range batchVariants {
		t.Run(v.String(), func(t *testing.T) {
			cfg := hostsimConfig(t)
			ctl := openHostsimCtl(t, cfg)
			var logs bytes.Buffer
			qlog := zerolog.New(&logs)
			cfg.Logger = &qlog
			rpc0, mem0 := ctl.rpcLive(), ctl.Stats().LiveMems
			r, err := Open(Config{Bundle: tinyBundle(t, v), QNN: cfg, Logger: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			opened := ctl.Stats().LiveMems
			n := r.BatchLimits().Sequences
			var rpc, mem int64
			for cycle := range 3 {
				var ss []*bseq
				for i := range min(n, 4) {
					ss = append(ss, &bseq{prompt: testPrompt(uint64(10+i), 4)})
				}
				drive(t, r, 2, ss...)
				if cycle == 0 {
					rpc, mem = ctl.rpcLive(), ctl.Stats().LiveMems
				} else if ctl.rpcLive() != rpc || ctl.Stats().LiveMems != mem {
					t.Fatalf("cycle %d: %d rpcmem buffers and %d registrations live, want %d and %d", cycle, ctl.rpcLive(), ctl.Stats().LiveMems, rpc, mem)
				}
			}
			if extra := 2 * int64(r.spec.layers) * int64(min(n, 4)-1); !chunked(r) && mem != opened+extra {
				t.Errorf("%d registrations with %d KV sets, want %d (each set's K and V per layer)", mem, min(n, 4), opened+extra)
			}
			if strings.Contains(logs.String(), "registration failed") {
				t.Errorf("a registration fell back under hostsim's rules:\n%s", logs.String())
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if ctl.rpcLive() != rpc0 || ctl.Stats().LiveMems != mem0 {
				t.Fatalf("after Close: %d rpcmem buffers and %d registrations live, want %d and %d", ctl.rpcLive(), ctl.Stats().LiveMems, rpc0, mem0)
			}
		})
	}
}

// idVocab is a vocabulary for engine tests: token i is "<i>".
type idVocab struct{}

func (idVocab) Piece(id int32) []byte   { return []byte(fmt.Sprintf("<%d>", id)) }
func (idVocab) IsSpecial(id int32) bool { return id >= 128000 }

// TestEngineSideBySide: through the engine, greedy and seeded requests
// (with n = 2, and a prediction) give the same tokens alone on a
// one-at-a-time engine (Eval) and 4 at once on a side-by-side one (Step),
// in both contracts.
func TestEngineSideBySide(t *testing.T) {
	seed := int64(3)
	reqs := []inference.Request{
		{Prompt: testPrompt(20, 6), MaxTokens: 8, IgnoreEOS: true},
		{Prompt: testPrompt(21, 19), MaxTokens: 6, IgnoreEOS: true, N: 2, Sampling: sample.Params{Temperature: 1, Seed: &seed}},
		{Prompt: testPrompt(22, 3), MaxTokens: 7, IgnoreEOS: true, Sampling: sample.Params{Temperature: 0.8, TopP: 0.9, Seed: &seed}},
		{Prompt: testPrompt(20, 6), MaxTokens: 8, IgnoreEOS: true, Prediction: "<1><2><3>"},
	}
	collect := func(t *testing.T, e *inference.Engine, together bool) [][][]int32 {
		var res []inference.Result
		if together {
			res = inferencetest.RunAll(t, e, reqs)
		} else {
			for _, req := range reqs {
				res = append(res, inferencetest.Run(t, e, req))
			}
		}
		out := make([][][]int32, len(res))
		for i, r := range res {
			out[i] = inferencetest.Tokens(r)
		}
		return out
	}
	for _, v := range batchVariants {
		t.Run(v.String(), func(t *testing.T) {
			r := openTiny(t, v)
			ea := inference.New(r, idVocab{}, inference.Config{MaxSequences: 1, Speculative: inference.DefaultSpeculative})
			alone := collect(t, ea, false)
			ea.Close()
			eb := inference.New(r, idVocab{}, inference.Config{MaxSequences: 4, Speculative: inference.DefaultSpeculative})
			together := collect(t, eb, true)
			eb.Close()
			if r.steps == 0 {
				t.Fatal("the side-by-side engine made no Step")
			}
			for i := range reqs {
				if !slices.EqualFunc(alone[i], together[i], slices.Equal) {
					t.Errorf("request %d: alone %v, side by side %v", i, alone[i], together[i])
				}
			}
			if n := len(alone[1]); n != 2 || slices.Equal(alone[1][0], alone[1][1]) {
				t.Errorf("n = 2 seeded: %v", alone[1])
			}
		})
	}
}

// TestBatchGrow: a sequence grows in place or, when a neighbour holds the
// slots after it, moves its rows, and continues to the same bits as alone.
func TestBatchGrow(t *testing.T) {
	ctx := context.Background()
	eachVariant(t, func(t *testing.T, r *Runner) {
		p := testPrompt(30, 5)
		alone := &bseq{prompt: p}
		drive(t, r, 3, alone)
		a, _ := r.Open(5)
		b, _ := r.Open(5) // right after a's slots
		mustStep(t, r, []inference.Run{{Seq: a, Tokens: p}, {Seq: b, Tokens: testPrompt(31, 5)}})
		var before int
		if chunked(r) {
			before = r.seqs.(*poolSeqs).Pool.Seq(a).Lo
		}
		if err := r.Grow(a, 9); err != nil {
			t.Fatal(err)
		}
		if chunked(r) && r.seqs.(*poolSeqs).Pool.Seq(a).Lo == before {
			t.Fatal("a grew in place over b's slots")
		}
		toks := append(slices.Clone(p), alone.toks[len(p):]...)
		for j := range 3 {
			pos := len(p) + j
			out := mustStep(t, r, []inference.Run{{Seq: a, Start: pos, Tokens: toks[pos : pos+1]}})
			l, err := out[0].Logits(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := copyLogits(l); !slices.Equal(got, alone.logits[j+1]) {
				t.Fatalf("row %d after growing differs from alone (max %g)", pos, maxDiff(got, alone.logits[j+1]))
			}
		}
		if err := r.Grow(a, r.spec.ctx+1); !errors.Is(err, inference.ErrNoSlots) {
			t.Fatalf("growing past the context: %v, want ErrNoSlots", err)
		}
	})
}

// TestEngineSideBySideKVStore: side by side, a finished request's rows go
// to the KV store and a later prompt of the same owner that starts with
// them restores them (cached_tokens), with the same tokens as without the
// store; another owner restores nothing. Both contracts.
func TestEngineSideBySideKVStore(t *testing.T) {
	eachVariant(t, func(t *testing.T, r *Runner) {
		inferencetest.KVStoreTurns(t, r, r, idVocab{}, testPrompt(40, 9), 16<<20)
	})
}
