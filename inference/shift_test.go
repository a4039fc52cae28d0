package inference_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/inferencetest"
	"github.com/hexserve/hexserve/inference/kvstore"
)

const shiftWindow = 64

var shiftLimits = inference.BatchLimits{Sequences: 4, Rows: 32, Slots: 4 * shiftWindow}

// shiftModel is a fake pool of a 64-row window: a plain Pool (the engine
// re-reads), or a Ring (the engine Shifts) whose positions stop at
// maxPositions (0: none).
type shiftModel struct {
	*inferencetest.Pool
	ring *inferencetest.Ring
}

func newShiftModel(ring bool, maxPositions int) (inference.Model, *inferencetest.Pool, *inferencetest.Ring) {
	info := inference.ModelInfo{Name: "fake", VocabSize: vocab, ContextLen: shiftWindow, EOS: []int32{eot}}
	if ring {
		r := inferencetest.NewRing(info, shiftLimits, maxPositions)
		return r, r.Pool, r
	}
	p := inferencetest.NewPool(info, shiftLimits)
	return p, p, nil
}

// shiftedTokens is what a choice past the window generates on the fake,
// whose next token depends only on the rows its sequence holds: before
// each row that would pass the window, the rows after the first keep are
// cut by a quarter of the window, the oldest first.
func shiftedTokens(next func([]int32) int32, prompt []int32, keep, maxTokens int) []int32 {
	held := slices.Clone(prompt)
	var out []int32
	for len(out) < maxTokens {
		t := next(held)
		out = append(out, t)
		if len(held)+1 > shiftWindow {
			held = append(held[:keep:keep], held[keep+shiftWindow/4:]...)
		}
		held = append(held, t)
	}
	return out
}

func shiftPrompt(n int, seed int32) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = 20 + (seed*7+int32(i)*13)%300
	}
	return p
}

// TestContextShift: with context_shift a choice goes on past the window
// until max_tokens (finish length), keeping its sink and newest rows: by a
// Shift on a ContextShifter (ring), by reading them again otherwise
// (reread), and by reading them again in a new sequence once a ring's
// positions would pass MaxPositions (renumber); prompt lookup drafts keep
// within the window. Until the first shift its tokens are the unshifted
// run's, and two runs agree.
func TestContextShift(t *testing.T) {
	cases := []struct {
		name         string
		ring         bool
		maxPositions int
		spec         inference.Speculative
		kinds        map[string]float64 // shifts by kind: at least
	}{
		{"reread", false, 0, inference.Speculative{}, map[string]float64{"reread": 1}},
		{"ring", true, 0, inference.Speculative{}, map[string]float64{"ring": 1}},
		{"renumber", true, 100, inference.Speculative{}, map[string]float64{"ring": 1, "reread": 1}},
		{"ring-drafts", true, 0, inference.DefaultSpeculative, map[string]float64{"ring": 1}},
		{"reread-drafts", false, 0, inference.DefaultSpeculative, map[string]float64{"reread": 1}},
	}
	const keep, maxTokens = 4, 200
	prompt := shiftPrompt(10, 1)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m, pool, ring := newShiftModel(tc.ring, tc.maxPositions)
				reg := prometheus.NewRegistry()
				e := inference.New(m, inferencetest.NewVocab(words), inference.Config{Registerer: reg, Speculative: tc.spec})
				defer e.Close()
				req := inference.Request{Prompt: prompt, MaxTokens: maxTokens, ContextShift: true, Keep: keep}
				want := shiftedTokens(pool.Next, prompt, keep, maxTokens)
				for range 2 {
					r, err := run(t, e, req)
					if err != nil || r.Finish != inference.FinishLength || !slices.Equal(r.Choices[0].Tokens, want) {
						t.Fatalf("got %v %v %v\nwant %v", r.Finish, err, r.Choices[0].Tokens, want)
					}
				}
				unshifted, err := run(t, e, inference.Request{Prompt: prompt, MaxTokens: maxTokens})
				if err != nil || unshifted.Finish != inference.FinishContext ||
					!slices.Equal(unshifted.Choices[0].Tokens, want[:shiftWindow-len(prompt)]) {
					t.Fatalf("unshifted: %v %v %v", unshifted.Finish, err, unshifted.Choices[0].Tokens)
				}
				for kind, least := range tc.kinds {
					if n := metricValue(t, reg, "hexserve_context_shifts_total", kind); n < least {
						t.Errorf("%s shifts = %v, want at least %v", kind, n, least)
					}
				}
				if ring != nil && len(ring.Shifts()) > 0 {
					if s := ring.Shifts()[0]; s.Keep != keep || s.N != shiftWindow/4 || s.HeldBefore != shiftWindow {
						t.Errorf("first shift %+v", s)
					}
				}
			})
		})
	}
}

// TestContextShiftDefaults: without max_tokens a shifting choice generates
// one window of tokens and ends by length, never by the window; each shift
// logs an INFO line with the model, the rows kept and evicted and the
// position.
func TestContextShiftDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _, _ := newShiftModel(false, 0)
		var log strings.Builder
		// The server's engine logger names the model.
		e := inference.New(m, inferencetest.NewVocab(words), inference.Config{Logger: zerolog.New(&log).With().Str("model", "fake").Logger()})
		defer e.Close()
		r, err := run(t, e, inference.Request{Prompt: shiftPrompt(60, 2), ContextShift: true})
		if err != nil || r.Finish != inference.FinishLength || r.Usage.CompletionTokens != shiftWindow {
			t.Fatalf("%v %v %+v", r.Finish, err, r.Usage)
		}
		// At position 64 the sink (1) and the newest 47 rows are kept, 16 evicted.
		want := `{"level":"info","model":"fake","seq":1,"choice":0,"kind":"reread","kept":48,"evicted":16,"position":64,"message":"context shift: the sequence goes on past the window"}`
		if !strings.Contains(log.String(), want) {
			t.Errorf("log:\n%s\nwant a line %s", log.String(), want)
		}
	})
}

// TestShiftedRowsNotReused: a shifted sequence's rows are not the KV of a
// prefix of its tokens: the KV store gets only its rows from before the
// first shift, and no later request of its owner takes it over or forks it
// (retained, or live): a request that starts with its tokens reuses the
// rows saved before the first shift, and answers as on a fresh engine.
func TestShiftedRowsNotReused(t *testing.T) {
	cases := []struct {
		name       string
		ring, live bool
	}{
		{"ring-retained", true, false},
		{"reread-retained", false, false},
		{"ring-live", true, true},
		{"reread-live", false, true},
	}
	for _, tc := range cases {
		for _, shift := range []bool{true, false} {
			t.Run(tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					second, fresh, cached, forks := reuseAfter(t, tc.ring, tc.live, shift)
					if !slices.Equal(second, fresh) {
						t.Fatalf("the second request answers %v, on a fresh engine %v", second, fresh)
					}
					// Its prompt shares 50 tokens with the first's, all of them
					// in the rows saved at the first shift (or the end).
					if cached != 50 || shift && forks != 0 {
						t.Fatalf("%d cached (want 50), %d forks", cached, forks)
					}
				})
			})
		}
	}
}

// reuseAfter runs a first request (shifting when shift; 54 tokens without,
// which end at the window) and, after it or while it runs (live: past its
// first shift, or unshifted after 50 tokens), a second of the same owner
// whose prompt is the first's and its first 40 tokens: the second's tokens,
// the same request's on a fresh engine, its cached tokens and the Fork
// calls.
func reuseAfter(t *testing.T, ring, live, shift bool) (second, fresh []int32, cached, forks int) {
	m, pool, _ := newShiftModel(ring, 0)
	pool.SetLatency(stepLatency)
	st, err := kvstore.Open(kvstore.Config{Layout: pool.KVLayout(), Memory: 1 << 20, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	e := inference.New(m, inferencetest.NewVocab(words), inference.Config{KVStore: st})
	defer e.Close()
	prompt := shiftPrompt(10, 3)
	first := inference.Request{Prompt: prompt, Owner: "a", ContextShift: shift, Keep: 4, IgnoreEOS: true}
	if shift {
		first.MaxTokens = 400
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s, err := e.Submit(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	var out []int32
	for ev := range s.Events() {
		out = append(out, ev.Tokens...)
		if live && (len(out) >= shiftWindow || !shift && len(out) >= 50) {
			break // past the first shift (unshifted: still running)
		}
	}
	req := inference.Request{Prompt: append(slices.Concat(prompt, out[:40]), 5), Owner: "a", MaxTokens: 8}
	r, err := run(t, e, req)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	m2, _, _ := newShiftModel(ring, 0)
	e2 := inference.New(m2, inferencetest.NewVocab(words), inference.Config{})
	defer e2.Close()
	alone, err := run(t, e2, req)
	if err != nil {
		t.Fatal(err)
	}
	return r.Choices[0].Tokens, alone.Choices[0].Tokens, r.Usage.CachedTokens, len(pool.Forks())
}

// TestShiftAmongStreams: four streams side by side, one of which goes on
// past the window: the other three's answers equal their answers alone,
// and the shifting one's equal its own alone.
func TestShiftAmongStreams(t *testing.T) {
	for _, ring := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			m, pool, _ := newShiftModel(ring, 0)
			pool.SetLatency(stepLatency)
			e := inference.New(m, inferencetest.NewVocab(words), inference.Config{Speculative: inference.DefaultSpeculative})
			defer e.Close()
			reqs := []inference.Request{
				{Prompt: shiftPrompt(30, 4), MaxTokens: 150, ContextShift: true, Keep: 6},
				{Prompt: shiftPrompt(12, 5), MaxTokens: 40},
				{Prompt: shiftPrompt(40, 6), MaxTokens: 20},
				{Prompt: shiftPrompt(5, 7)},
			}
			alone := make([][]int32, len(reqs))
			for i, req := range reqs {
				r, err := run(t, e, req)
				if err != nil {
					t.Fatal(err)
				}
				alone[i] = r.Choices[0].Tokens
			}
			streams := make([]*inference.Stream, len(reqs))
			for i, req := range reqs {
				s, err := e.Submit(t.Context(), req)
				if err != nil {
					t.Fatal(err)
				}
				streams[i] = s
			}
			for i, s := range streams {
				r, err := inference.Collect(s)
				if err != nil || !slices.Equal(r.Choices[0].Tokens, alone[i]) {
					t.Errorf("ring %v, stream %d side by side: %v %v\nalone: %v", ring, i, err, r.Choices[0].Tokens, alone[i])
				}
			}
		})
	}
}
