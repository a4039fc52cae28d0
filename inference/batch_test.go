package inference_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/inference"

	"github.com/hexserve/hexserve/inference/inferencetest"
	"github.com/hexserve/hexserve/inference/kvstore"
	"github.com/hexserve/hexserve/inference/sample"
)

const stepLatency = 10 * time.Millisecond

func setupPool(t *testing.T, lim inference.BatchLimits, cfg inference.Config) (*inference.Engine, *inferencetest.Pool) {
	t.Helper()
	m := newPool(lim)
	e := inference.New(m, inferencetest.NewVocab(words), cfg)
	t.Cleanup(func() { e.Close() })
	return e, m
}

// newPool returns a scripted pool with limits lim whose steps take stepLatency.
func newPool(lim inference.BatchLimits) *inferencetest.Pool {
	m := inferencetest.NewPool(inference.ModelInfo{VocabSize: vocab, ContextLen: 256, EOS: []int32{eot}}, lim)
	m.SetLatency(stepLatency)
	return m
}

// collectAll collects every stream, failing on an error.
func collectAll(t *testing.T, streams []*inference.Stream) {
	t.Helper()
	for _, s := range streams {
		if _, err := inference.Collect(s); err != nil {
			t.Fatal(err)
		}
	}
}

var poolLimits = inference.BatchLimits{Sequences: 8, Rows: 16, Slots: 1024}

// openAfterClose closes e (its retained sequences are released) and
// returns the sequences still open in m.
func openAfterClose(e *inference.Engine, m *inferencetest.Pool) int {
	e.Close()
	open, _ := m.Sequences()
	return open
}

func mostOpen(m *inferencetest.Pool) int {
	_, most := m.Sequences()
	return most
}

// aloneTokens runs each request by itself on a fresh pool engine with cfg
// and returns each one's choices' tokens.
func aloneTokens(t *testing.T, cfg inference.Config, reqs []inference.Request) [][][]int32 {
	alone := make([][][]int32, len(reqs))
	for i, r := range reqs {
		synctest.Test(t, func(t *testing.T) {
			e, _ := setupPool(t, poolLimits, cfg)
			alone[i] = inferencetest.Tokens(inferencetest.RunAll(t, e, []inference.Request{r})[0])
		})
	}
	return alone
}

// TestPoolSideBySide: four requests advance together (one step per token
// for all of them), and each one's tokens, seeded or greedy, with n = 2 or
// a prediction, equal the same request run alone.
func TestPoolSideBySide(t *testing.T) {
	seed := int64(9)
	reqs := []inference.Request{
		{Prompt: []int32{1, 2, 3}, MaxTokens: 8},
		{Prompt: []int32{4, 5}, MaxTokens: 8, N: 2, Sampling: sample.Params{Temperature: 1, Seed: &seed}},
		{Prompt: slices.Repeat([]int32{7}, 40), MaxTokens: 8}, // a prompt longer than a step's rows
		{Prompt: []int32{1, 2, 3}, MaxTokens: 8, Prediction: "Hello"},
	}
	alone := aloneTokens(t, inference.Config{Speculative: inference.DefaultSpeculative}, reqs)
	synctest.Test(t, func(t *testing.T) {
		e, m := setupPool(t, poolLimits, inference.Config{Speculative: inference.DefaultSpeculative, MaxSequences: 8})
		start := time.Now()
		res := inferencetest.RunAll(t, e, reqs)
		took := time.Since(start)
		for i, r := range res {
			if got := inferencetest.Tokens(r); !slices.EqualFunc(got, alone[i], slices.Equal) {
				t.Errorf("request %d: together %v, alone %v", i, got, alone[i])
			}
			if r.Usage.CompletionTokens != 8*max(reqs[i].N, 1) {
				t.Errorf("request %d: usage %+v", i, r.Usage)
			}
		}
		// 40 prompt rows over 16-row steps, then 8 tokens: about 12 steps,
		// not the 4 × 9 of one request after another.
		if took > 14*stepLatency {
			t.Errorf("4 requests took %v (%d steps: %v)", took, len(m.Steps()), m.Steps())
		}
		if _, most := m.Sequences(); most != 5 {
			t.Errorf("at most %d sequences open, want 5 (n = 2 counts twice)", most)
		}
		if f := m.Forks(); len(f) != 1 || f[0].Rows != 2 {
			t.Errorf("forks %+v, want one of the 2-token prompt", f)
		}
	})
}

// TestPoolNewRequestStartsSoon: a short request that arrives while a long
// one streams gets its first token within two steps.
func TestPoolNewRequestStartsSoon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := setupPool(t, poolLimits, inference.Config{})
		long := inferencetest.Submit(t, e, inference.Request{Prompt: []int32{1}, MaxTokens: 100})
		go inference.Collect(long)
		time.Sleep(5*stepLatency + stepLatency/2)
		t0 := time.Now()
		s := inferencetest.Submit(t, e, inference.Request{Prompt: []int32{2, 3}, MaxTokens: 1})
		r, err := inference.Collect(s)
		if err != nil || len(r.Choices[0].Tokens) != 1 {
			t.Fatalf("%+v %v", r, err)
		}
		if d := time.Since(t0); d > 2*stepLatency {
			t.Fatalf("first token after %v, want within 2 steps (%v)", d, 2*stepLatency)
		}
		synctest.Wait() // the engine releases the short one after its last event is out
		if e.ActiveSequences() != 1 {
			t.Fatalf("%d active sequences, want the long one", e.ActiveSequences())
		}
	})
}

// TestPoolAdmission: beyond MaxSequences requests queue in order (and a
// full queue refuses at once); a request the pool cannot hold waits for a
// release; cancelling a running request frees its slots at once.
func TestPoolAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, m := setupPool(t, inference.BatchLimits{Sequences: 8, Rows: 16, Slots: 30}, inference.Config{MaxSequences: 2, QueueLen: 2})
		ctx, cancel := context.WithCancel(t.Context())
		a, _ := e.Submit(ctx, inference.Request{Prompt: []int32{1}, MaxTokens: 9}) // 10 slots
		b, _ := e.Submit(t.Context(), inference.Request{Prompt: []int32{2}, MaxTokens: 9})
		synctest.Wait()
		c, _ := e.Submit(t.Context(), inference.Request{Prompt: []int32{3}, MaxTokens: 19}) // 20 slots: waits for a
		d, _ := e.Submit(t.Context(), inference.Request{Prompt: []int32{4}, MaxTokens: 2})
		if _, err := e.Submit(t.Context(), inference.Request{Prompt: []int32{5}}); !errors.Is(err, inference.ErrBusy) {
			t.Fatalf("full queue: %v", err)
		}
		time.Sleep(3 * stepLatency)
		if open, _ := m.Sequences(); open != 2 || e.QueueDepth() != 2 {
			t.Fatalf("%d open, %d queued", open, e.QueueDepth())
		}
		cancel()
		synctest.Wait()
		if r, err := inference.Collect(a); !errors.Is(err, context.Canceled) || r.Finish != inference.FinishCancelled {
			t.Fatalf("a: %+v %v", r, err)
		}
		time.Sleep(stepLatency)
		if open, _ := m.Sequences(); open != 2 || e.QueueDepth() != 1 {
			t.Fatalf("after the cancel: %d open (c should have a's slots), %d queued", open, e.QueueDepth())
		}
		for _, s := range []*inference.Stream{b, c, d} {
			if r, err := inference.Collect(s); err != nil || r.Finish != inference.FinishLength {
				t.Fatalf("%+v %v", r, err)
			}
		}
		if open := openAfterClose(e, m); open != 0 {
			t.Fatalf("%d sequences still open", open)
		}
	})
}

// TestPoolOwners: requests of different owners with the same prompt never
// share rows (no fork); the choices of one request do.
func TestPoolOwners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, m := setupPool(t, poolLimits, inference.Config{})
		p := []int32{10, 11, 12}
		inferencetest.RunAll(t, e, []inference.Request{
			{Prompt: p, MaxTokens: 3, Owner: "alice"},
			{Prompt: p, MaxTokens: 3, Owner: "mallory"},
		})
		if f := m.Forks(); len(f) != 0 {
			t.Fatalf("forks across requests: %+v", f)
		}
		r := inferencetest.RunAll(t, e, []inference.Request{{Prompt: p, MaxTokens: 3, N: 3, Owner: "alice"}})[0]
		if f := m.Forks(); len(f) != 2 || len(r.Choices) != 3 {
			t.Fatalf("forks %+v for n = 3", f)
		}
	})
}

// TestPoolTimeout: a timeout ends one request; the others carry on.
func TestPoolTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, m := setupPool(t, poolLimits, inference.Config{})
		res := make([]inference.Result, 2)
		var wg sync.WaitGroup
		for i, req := range []inference.Request{
			{Prompt: []int32{1}, MaxTokens: 20, Timeout: 55 * time.Millisecond},
			{Prompt: []int32{2}, MaxTokens: 10},
		} {
			s := inferencetest.Submit(t, e, req)
			wg.Go(func() { res[i], _ = inference.Collect(s) })
		}
		wg.Wait()
		if res[0].Finish != inference.FinishTimeout || res[0].Usage.CompletionTokens >= 20 {
			t.Fatalf("timed out request: %+v", res[0])
		}
		if res[1].Finish != inference.FinishLength || res[1].Usage.CompletionTokens != 10 {
			t.Fatalf("the other: %+v", res[1])
		}
		if open := openAfterClose(e, m); open != 0 {
			t.Fatalf("%d sequences still open", open)
		}
	})
}

// TestPoolNoStarvation: with fewer rows per step than decoding sequences,
// every sequence still advances and a new prompt still starts.
func TestPoolNoStarvation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := setupPool(t, inference.BatchLimits{Sequences: 8, Rows: 2, Slots: 1024}, inference.Config{MaxSequences: 4})
		var reqs []inference.Request
		for i := range 3 {
			reqs = append(reqs, inference.Request{Prompt: []int32{int32(20 + i)}, MaxTokens: 30})
		}
		var wg sync.WaitGroup
		wg.Go(func() { inferencetest.RunAll(t, e, reqs) })
		time.Sleep(10 * stepLatency)
		t0 := time.Now()
		r := inferencetest.RunAll(t, e, []inference.Request{{Prompt: []int32{1, 2, 3, 4}, MaxTokens: 1}})[0]
		if d := time.Since(t0); r.Usage.CompletionTokens != 1 || d > 8*stepLatency {
			t.Fatalf("a new prompt behind 3 decoding sequences on 2-row steps: %v, %+v", d, r.Usage)
		}
		wg.Wait()
	})
}

// TestPoolGrowAndPreempt: requests that together need more slots than the
// pool has still all finish, each with its tokens alone: sequences reserve
// little and grow; when none can grow, the youngest is released and its
// rows evaluated again later.
func TestPoolGrowAndPreempt(t *testing.T) {
	var reqs []inference.Request
	for i := range 4 {
		reqs = append(reqs, inference.Request{Prompt: []int32{int32(30 + i), 2}, MaxTokens: 40})
	}
	alone := aloneTokens(t, inference.Config{}, reqs)
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		e, m := setupPool(t, inference.BatchLimits{Sequences: 8, Rows: 16, Slots: 64}, inference.Config{MaxSequences: 4, Registerer: reg})
		res := inferencetest.RunAll(t, e, reqs)
		for i, r := range res {
			if got := inferencetest.Tokens(r); !slices.EqualFunc(got, alone[i], slices.Equal) || r.Finish != inference.FinishLength {
				t.Errorf("request %d: %v (%s), alone %v", i, got, r.Finish, alone[i])
			}
		}
		if open, most := openAfterClose(e, m), mostOpen(m); open != 0 || most < 2 {
			t.Errorf("%d open at the end, at most %d at once", open, most)
		}
		if n := metricValue(t, reg, "hexserve_preemptions_total"); n == 0 {
			t.Error("no preemption: the test does not exercise it")
		}
	})
}

// TestPoolParallelSampling: seeded requests sampled by up to four
// goroutines per step give the tokens each gives alone with one; the
// host's share of a step is reported.
func TestPoolParallelSampling(t *testing.T) {
	// Logit bias spreads the fake's peaked logits over a few tokens, so the
	// seeded draws depend on each sequence's own random stream.
	bias := map[int32]float32{3: 99, 4: 99.5, 5: 99, 6: 98.5}
	var reqs []inference.Request
	for i := range 6 {
		seed := int64(100 + i)
		reqs = append(reqs, inference.Request{Prompt: []int32{int32(20 + i), 2}, MaxTokens: 24, N: 1 + i%2,
			Sampling: sample.Params{Temperature: 1, Seed: &seed, LogitBias: bias}})
	}
	restore := inference.SetSampleHelpers(0)
	alone := aloneTokens(t, inference.Config{}, reqs)
	restore()
	defer inference.SetSampleHelpers(3)()
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		e, _ := setupPool(t, poolLimits, inference.Config{MaxSequences: 8, Registerer: reg})
		res := inferencetest.RunAll(t, e, reqs)
		distinct := map[int32]bool{}
		for i, r := range res {
			got := inferencetest.Tokens(r)
			if !slices.EqualFunc(got, alone[i], slices.Equal) {
				t.Errorf("request %d: together %v, alone %v", i, got, alone[i])
			}
			for _, c := range got {
				for _, tok := range c {
					distinct[tok] = true
				}
			}
		}
		if len(distinct) < 3 {
			t.Errorf("tokens %v: the draws are not random, the test says nothing", distinct)
		}
		host, model := e.StepTimes()
		if model <= 0 || host < 0 {
			t.Errorf("step times: host %v, model %v", host, model)
		}
		if n := metricValue(t, reg, "hexserve_step_host_share"); n == 0 {
			t.Error("no host share observed")
		}
	})
}

// TestSeededLogitBiasRepeats: a seeded request with logit_bias gives the
// same tokens every run (the bias map's order does not steer the draw).
func TestSeededLogitBiasRepeats(t *testing.T) {
	seed := int64(103)
	r := inference.Request{Prompt: []int32{23, 2}, MaxTokens: 24, Sampling: sample.Params{Temperature: 1, Seed: &seed,
		LogitBias: map[int32]float32{3: 99, 4: 99.5, 5: 99, 6: 98.5, 7: 99.2, 8: 98}}}
	var first [][]int32
	for i := range 8 {
		synctest.Test(t, func(t *testing.T) {
			e, _ := setupPool(t, poolLimits, inference.Config{})
			got := inferencetest.Tokens(inferencetest.RunAll(t, e, []inference.Request{r})[0])
			if i == 0 {
				first = got
			} else if !slices.EqualFunc(got, first, slices.Equal) {
				t.Fatalf("run %d: %v, run 0: %v", i, got, first)
			}
		})
	}
}

// TestPoolSharedPrefix: a request whose prompt shares a prefix (a system
// prompt) with a live sequence of the same owner forks its rows; another
// owner's request with the same prompt never does. Tokens equal alone.
func TestPoolSharedPrefix(t *testing.T) {
	system := slices.Repeat([]int32{40, 41, 42, 43}, 6) // 24 rows
	long := inference.Request{Prompt: append(slices.Clone(system), 50, 51), MaxTokens: 30, Owner: "alice"}
	later := []inference.Request{
		{Prompt: append(slices.Clone(system), 60, 61, 62), MaxTokens: 6, Owner: "alice"},
		{Prompt: append(slices.Clone(system), 60, 61, 62), MaxTokens: 6, Owner: "mallory"},
	}
	alone := aloneTokens(t, inference.Config{}, later)
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		e, m := setupPool(t, poolLimits, inference.Config{Registerer: reg})
		s := inferencetest.Submit(t, e, long)
		done := make(chan error, 1)
		go func() { _, err := inference.Collect(s); done <- err }()
		time.Sleep(5 * stepLatency) // its prompt is in, it decodes
		res := inferencetest.RunAll(t, e, later)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if got := inferencetest.Tokens(r); !slices.EqualFunc(got, alone[i], slices.Equal) {
				t.Errorf("request %d (%s): %v, alone %v", i, later[i].Owner, got, alone[i])
			}
		}
		if f := m.Forks(); len(f) != 1 || f[0].Rows != len(system) {
			t.Errorf("forks %+v, want one of the %d shared rows (alice's)", f, len(system))
		}
		if c := res[0].Usage.CachedTokens; c != len(system) {
			t.Errorf("alice's cached_tokens %d, want %d", c, len(system))
		}
		if c := res[1].Usage.CachedTokens; c != 0 {
			t.Errorf("mallory's cached_tokens %d: another owner's rows were shared", c)
		}
		if n := metricValue(t, reg, "hexserve_shared_prefix_rows_total"); n != float64(len(system)) {
			t.Errorf("shared rows %v", n)
		}
	})
}

// TestPoolPreemptRestores: with a KV store, a sequence released to make
// room is saved first and restored when it opens again: the same tokens,
// fewer rows evaluated than without the store.
func TestPoolPreemptRestores(t *testing.T) {
	var reqs []inference.Request
	for i := range 4 {
		reqs = append(reqs, inference.Request{Prompt: []int32{int32(30 + i), 2}, MaxTokens: 40})
	}
	lim := inference.BatchLimits{Sequences: 8, Rows: 16, Slots: 64}
	var plainRows int
	var alone [][][]int32
	synctest.Test(t, func(t *testing.T) {
		e, m := setupPool(t, lim, inference.Config{MaxSequences: 4})
		for _, r := range inferencetest.RunAll(t, e, reqs) {
			alone = append(alone, inferencetest.Tokens(r))
		}
		plainRows = m.Rows()
	})
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m := newPool(lim)
		st, err := kvstore.Open(kvstore.Config{Layout: m.KVLayout(), Memory: 1 << 20, Logger: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		e := inference.New(m, inferencetest.NewVocab(words), inference.Config{MaxSequences: 4, KVStore: st, Registerer: reg})
		defer e.Close()
		for i, r := range inferencetest.RunAll(t, e, reqs) {
			if got := inferencetest.Tokens(r); !slices.EqualFunc(got, alone[i], slices.Equal) || r.Finish != inference.FinishLength {
				t.Errorf("request %d: %v (%s), without the store %v", i, got, r.Finish, alone[i])
			}
		}
		if n := metricValue(t, reg, "hexserve_preemptions_total"); n == 0 {
			t.Fatal("no preemption: the test does not exercise it")
		}
		if m.RestoredRows() == 0 || m.Rows() >= plainRows {
			t.Errorf("restored %d rows, evaluated %d (without the store %d)", m.RestoredRows(), m.Rows(), plainRows)
		}
	})
}

// TestPoolSharedPrefixAtOnce: requests of one owner with the same system
// prompt, sent at once, fork the first one's rows a step later instead of
// evaluating them each; another owner's evaluates its own. Tokens equal
// alone.
func TestPoolSharedPrefixAtOnce(t *testing.T) {
	system := slices.Repeat([]int32{40, 41, 42, 43}, 5) // 20 rows
	var reqs []inference.Request
	for i, owner := range []string{"alice", "alice", "alice", "mallory"} {
		reqs = append(reqs, inference.Request{Prompt: append(slices.Clone(system), int32(60+i)), MaxTokens: 8, Owner: owner})
	}
	alone := aloneTokens(t, inference.Config{}, reqs)
	synctest.Test(t, func(t *testing.T) {
		e, m := setupPool(t, poolLimits, inference.Config{})
		res := inferencetest.RunAll(t, e, reqs)
		for i, r := range res {
			if got := inferencetest.Tokens(r); !slices.EqualFunc(got, alone[i], slices.Equal) {
				t.Errorf("request %d (%s): %v, alone %v", i, reqs[i].Owner, got, alone[i])
			}
			if want := map[bool]int{true: len(system), false: 0}[i == 1 || i == 2]; r.Usage.CachedTokens != want {
				t.Errorf("request %d (%s): cached_tokens %d, want %d", i, reqs[i].Owner, r.Usage.CachedTokens, want)
			}
		}
		if f := m.Forks(); len(f) != 2 {
			t.Errorf("forks %+v, want alice's two later requests'", f)
		}
		// 21 + 21 prompt rows (alice's first, mallory's), 2 forked rows, 4 × 7 decode rows.
		if n := m.Rows(); n != 21+21+2+4*7 {
			t.Errorf("%d rows evaluated (%v)", n, m.Steps())
		}
	})
}

// TestPoolSharedPrefixFinished: a request queued behind max_sequences
// takes over the rows of a sequence of its owner that just finished (kept
// in the pool: retained); another owner's queued request with the same
// prompt prefix does not, though a sequence holding it is live.
func TestPoolSharedPrefixFinished(t *testing.T) {
	system := slices.Repeat([]int32{40, 41, 42, 43}, 5) // 20 rows
	reqs := []inference.Request{
		{Prompt: append(slices.Clone(system), 60), MaxTokens: 3, Owner: "alice"},
		{Prompt: []int32{5, 6, 7}, MaxTokens: 12, Owner: "mallory"},
		{Prompt: append(slices.Clone(system), 61), MaxTokens: 4, Owner: "alice"},
		{Prompt: append(slices.Clone(system), 62), MaxTokens: 4, Owner: "mallory"},
	}
	alone := aloneTokens(t, inference.Config{}, reqs)
	synctest.Test(t, func(t *testing.T) {
		e, m := setupPool(t, poolLimits, inference.Config{MaxSequences: 2})
		res := inferencetest.RunAll(t, e, reqs)
		for i, r := range res {
			if got := inferencetest.Tokens(r); !slices.EqualFunc(got, alone[i], slices.Equal) {
				t.Errorf("request %d (%s): %v, alone %v", i, reqs[i].Owner, got, alone[i])
			}
		}
		if c := res[2].Usage.CachedTokens; c != len(system) {
			t.Errorf("alice's queued request: cached_tokens %d, want %d (the finished one's rows)", c, len(system))
		}
		if c := res[3].Usage.CachedTokens; c != 0 {
			t.Errorf("mallory's queued request: cached_tokens %d: alice's rows were shared", c)
		}
		if f := m.Forks(); len(f) != 0 {
			t.Errorf("forks %+v: alice's request should take the finished sequence over", f)
		}
		if open := openAfterClose(e, m); open != 0 {
			t.Errorf("%d sequences left open", open)
		}
	})
}

// TestBurstAdmission: a burst larger than QueueLen is refused only when the
// sequence slots are taken too: with QueueLen 1 and MaxSequences 4, five
// requests at once are all served and a sixth is refused.
func TestBurstAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := setupPool(t, poolLimits, inference.Config{MaxSequences: 4, QueueLen: 1})
		var streams []*inference.Stream
		for i := range 5 {
			s, err := e.Submit(t.Context(), inference.Request{Prompt: []int32{int32(10 + i)}, MaxTokens: 4})
			if err != nil {
				t.Fatalf("request %d of the burst: %v", i, err)
			}
			streams = append(streams, s)
		}
		if _, err := e.Submit(t.Context(), inference.Request{Prompt: []int32{9}, MaxTokens: 4}); !errors.Is(err, inference.ErrBusy) {
			t.Fatalf("a sixth request with four slots and one place in the queue: %v, want ErrBusy", err)
		}
		for i, s := range streams {
			if r, err := inference.Collect(s); err != nil || r.Finish != inference.FinishLength {
				t.Fatalf("request %d: %+v %v", i, r, err)
			}
		}
	})
}

// additivePool is a Pool whose step costs the sum of its rows (as a
// QHexRT-contract bundle's steps, whose sequences take turns).
type additivePool struct{ *inferencetest.Pool }

func (p additivePool) StepCost(rows int) time.Duration { return time.Duration(rows) * stepLatency }

// TestPromptStepOnAdditiveModel: on a model whose rows cost calls of their
// own, a step carries one decode row (round-robin) and a new prompt gets a
// step without any (its first token comes one short step after it is
// admitted), once. On a multi-row model the prompt shares the step with
// every stream's decode row.
func TestPromptStepOnAdditiveModel(t *testing.T) {
	for _, additive := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			pool := newPool(poolLimits)
			var m inference.Model = pool
			if additive {
				m = additivePool{pool}
			}
			e := inference.New(m, inferencetest.NewVocab(words), inference.Config{MaxSequences: 4})
			defer e.Close()
			var streams []*inference.Stream
			for i := range 2 {
				s := inferencetest.Submit(t, e, inference.Request{Prompt: []int32{int32(10 + i)}, MaxTokens: 30})
				streams = append(streams, s)
			}
			// Half a step past a boundary: the step under way is recorded and
			// the next one cannot start at the same instant as the submit.
			time.Sleep(5*stepLatency + stepLatency/2)
			before := len(pool.Steps())
			s := inferencetest.Submit(t, e, inference.Request{Prompt: []int32{20, 21, 22}, MaxTokens: 2})
			streams = append(streams, s)
			collectAll(t, streams)
			steps := pool.Steps()[before:]
			switch {
			case additive && (len(steps) < 2 || steps[0] != 3 || slices.ContainsFunc(steps[1:], func(n int) bool { return n != 1 })):
				t.Errorf("additive: steps %v, want the prompt's 3 rows alone, then one decode row a step", steps)
			case !additive && (len(steps) < 1 || steps[0] != 5):
				t.Errorf("multi-row: steps %v, want the prompt's rows beside the streams'", steps)
			}
		})
	}
}

// geniePool costs one AR-1 call for a row and one AR-128 call (twice that) for any more: two rows
// are as dear as two calls, four rows are not.
type geniePool struct{ *inferencetest.Pool }

func (p geniePool) StepCost(rows int) time.Duration {
	if rows <= 1 {
		return stepLatency
	}
	return 2 * stepLatency
}

// TestDecodeRowsOnGenieCosts: with four streams decoding on a model whose multi-row call costs two
// single-row calls, a step carries all four decode rows (the additive test asks about the step's
// own rows, not about two).
func TestDecodeRowsOnGenieCosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := newPool(poolLimits)
		e := inference.New(geniePool{pool}, inferencetest.NewVocab(words), inference.Config{MaxSequences: 4})
		defer e.Close()
		var streams []*inference.Stream
		for i := range 4 {
			s := inferencetest.Submit(t, e, inference.Request{Prompt: []int32{int32(10 + i)}, MaxTokens: 20})
			streams = append(streams, s)
		}
		collectAll(t, streams)
		if n := len(pool.Steps()); n > 30 {
			t.Errorf("%d steps for four streams of 20 tokens (%v): their decode rows did not share steps", n, pool.Steps())
		}
	})
}

// TestMaxSequencesAuto: MaxSequences 0 (auto) takes the model's
// BatchLimits.Auto (else its Sequences), a set value wins, and neither
// passes the model's Sequences.
func TestMaxSequencesAuto(t *testing.T) {
	for _, tt := range []struct {
		name      string
		lim       inference.BatchLimits
		configure int
		want      int
	}{
		{"auto from the model", inference.BatchLimits{Sequences: 64, Rows: 128, Slots: 4095, Auto: 16}, 0, 16},
		{"set wins", inference.BatchLimits{Sequences: 64, Rows: 128, Slots: 4095, Auto: 16}, 4, 4},
		{"no Auto: the model's Sequences", inference.BatchLimits{Sequences: 3, Rows: 16, Slots: 1024}, 0, 3},
		{"bounded by the model", inference.BatchLimits{Sequences: 2, Rows: 16, Slots: 1024, Auto: 2}, 8, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := setupPool(t, tt.lim, inference.Config{MaxSequences: tt.configure})
			if got := e.MaxSequences(); got != tt.want {
				t.Errorf("MaxSequences() = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestPoolAlignedRepeats: on a pool that states an alignment (its rows'
// bits depend on where the runs that wrote them started, as on a 16-bit
// Genie cache), each request gives the tokens it gives alone on a fresh
// engine: taken over warm, forked from a live sequence of its owner,
// side by side with speculative decoding on, preempted (its rows evaluated
// again, or restored from the KV store). Reused rows are a multiple of the
// alignment.
func TestPoolAlignedRepeats(t *testing.T) {
	lim := inference.BatchLimits{Sequences: 8, Rows: 8, Slots: 1024, Align: 8}
	system := slices.Repeat([]int32{40, 41, 42, 43, 44}, 4) // 20 rows
	req := func(i, n int) inference.Request {
		p := append(slices.Clone(system), int32(50+i), 51, 52)
		return inference.Request{Prompt: p[:len(p)-i%3], MaxTokens: n, Owner: "alice"}
	}
	var reqs []inference.Request
	for i := range 4 {
		reqs = append(reqs, req(i, 24+4*i))
	}
	spec := inference.Config{MaxSequences: 4, Speculative: inference.Speculative{Enabled: true, PromptLookup: true}}
	alone := func(lim inference.BatchLimits) [][][]int32 {
		out := make([][][]int32, len(reqs))
		for i, r := range reqs {
			synctest.Test(t, func(t *testing.T) {
				e, _ := setupPool(t, lim, inference.Config{})
				res := inferencetest.Run(t, e, r)
				if res.Usage.CachedTokens != 0 {
					t.Fatalf("a cold request reused %d rows", res.Usage.CachedTokens)
				}
				out[i] = inferencetest.Tokens(res)
			})
		}
		return out
	}
	want := alone(lim)
	check := func(t *testing.T, what string, want [][][]int32, res []inference.Result, cached bool) {
		t.Helper()
		for i, r := range res {
			if got := inferencetest.Tokens(r); !slices.EqualFunc(got, want[i], slices.Equal) {
				t.Errorf("%s: request %d: %v, alone %v", what, i, got, want[i])
			}
			if c := r.Usage.CachedTokens; c%lim.Align != 0 || cached && c == 0 {
				t.Errorf("%s: request %d reused %d rows", what, i, c)
			}
		}
	}
	t.Run("warm", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e, _ := setupPool(t, lim, inference.Config{})
			for i, r := range reqs {
				inferencetest.Run(t, e, r)
				check(t, "taken over", want[i:i+1], []inference.Result{inferencetest.Run(t, e, r)}, true)
			}
		})
	})
	t.Run("side by side", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e, m := setupPool(t, lim, spec)
			s := inferencetest.Submit(t, e, reqs[0])
			time.Sleep(6 * stepLatency) // its prompt is in, it decodes
			res := inferencetest.RunAll(t, e, reqs[1:])
			r0, err := inference.Collect(s)
			if err != nil {
				t.Fatal(err)
			}
			check(t, "side by side", want, append([]inference.Result{r0}, res...), false)
			for _, f := range m.Forks() {
				if f.Rows%lim.Align != 0 {
					t.Errorf("a fork of %d rows", f.Rows)
				}
			}
		})
	})
	small := lim
	small.Slots = 72
	want = alone(small)
	for _, store := range []bool{false, true} {
		t.Run(fmt.Sprintf("preempted, store %v", store), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reg := prometheus.NewRegistry()
				m := newPool(small)
				cfg := inference.Config{MaxSequences: 4, Registerer: reg}
				if store {
					st, err := kvstore.Open(kvstore.Config{Layout: m.KVLayout(), Memory: 1 << 20, Logger: zerolog.Nop()})
					if err != nil {
						t.Fatal(err)
					}
					cfg.KVStore = st
				}
				e := inference.New(m, inferencetest.NewVocab(words), cfg)
				defer e.Close()
				check(t, "preempted", want, inferencetest.RunAll(t, e, reqs), false)
				if n := metricValue(t, reg, "hexserve_preemptions_total"); n == 0 {
					t.Fatal("no preemption: the test does not exercise it")
				}
			})
		})
	}
}
