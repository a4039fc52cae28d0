package inference_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hexserve/hexserve/inference"

	"github.com/hexserve/hexserve/inference/inferencetest"
	"github.com/hexserve/hexserve/inference/sample"
)

const (
	eot   = 999
	vocab = 1000
)

var words = map[int32]string{
	1: "Hel", 2: "lo", 3: " wor", 4: "ld", 5: "!", 6: "<|python_tag|>", 7: "\xe2\x82", 8: "\xac",
	eot: "<|eot_id|>",
}

func setup(t *testing.T, script []int32, cfg inference.Config) (*inference.Engine, *inferencetest.Model) {
	t.Helper()
	m := inferencetest.NewScripted(inference.ModelInfo{VocabSize: vocab, ContextLen: 64, EOS: []int32{eot}}, script)
	e := inference.New(m, inferencetest.NewVocab(words), cfg)
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e, m
}

func run(t *testing.T, e *inference.Engine, req inference.Request) (inference.Result, error) {
	t.Helper()
	s, err := e.Submit(t.Context(), req)
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	return inference.Collect(s)
}

func TestGenerate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, m := setup(t, []int32{1, 2, 6, 3, 4, 7, 8, 5}, inference.Config{})
		r, err := run(t, e, inference.Request{Prompt: []int32{10, 11, 12}, Logprobs: true, TopLogprobs: 2})
		if err != nil {
			t.Fatal(err)
		}
		c := r.Choices[0]
		if c.Text != "Hello world€!" || c.Finish != inference.FinishStop || r.Finish != inference.FinishStop {
			t.Fatalf("got %q %s", c.Text, c.Finish)
		}
		if !slices.Equal(c.Tokens, []int32{1, 2, 6, 3, 4, 7, 8, 5}) || len(c.Logprobs) != 8 {
			t.Fatalf("tokens %v, %d logprobs", c.Tokens, len(c.Logprobs))
		}
		if lp := c.Logprobs[0]; lp.ID != 1 || lp.Logprob < -1e-3 || string(lp.Bytes) != "Hel" || len(lp.Top) != 2 || lp.Top[0].ID != 1 {
			t.Fatalf("logprob %+v", lp)
		}
		if u := r.Usage; u.PromptTokens != 3 || u.CompletionTokens != 9 || u.CachedTokens != 0 {
			t.Fatalf("usage %+v", u)
		}
		// The decode steps reuse everything but the new token.
		calls := m.Calls()
		if len(calls) != 9 || calls[0].Valid != 0 || calls[1].Valid != 3 || calls[8].Valid != 10 {
			t.Fatalf("calls %+v", calls)
		}
	})
}

// TestDeltaUsage: every delta carries the prompt's tokens and how many of
// them were reused, known once the request runs (Anthropic's message_start
// sends them before the reply); the rest of Usage comes with Done.
func TestDeltaUsage(t *testing.T) {
	e, _ := setupStore(t, []int32{1, 2})
	if _, err := run(t, e, inference.Request{Prompt: []int32{10, 11, 12, 13}}); err != nil {
		t.Fatal(err)
	}
	s, err := e.Submit(t.Context(), inference.Request{Prompt: []int32{10, 11, 12, 20, 21}})
	if err != nil {
		t.Fatal(err)
	}
	deltas := 0
	for ev := range s.Events() {
		if !ev.Done {
			deltas++
			if ev.Usage != (inference.Usage{PromptTokens: 5, CachedTokens: 3}) {
				t.Fatalf("delta %+v", ev)
			}
		}
	}
	if deltas == 0 {
		t.Fatal("no delta")
	}
}

// TestPrefixCacheAndChoices: a request reuses the rows of an earlier one's
// prompt (through the KV store) and its second choice evaluates the
// prompt again (a one-sequence model cannot fork).
func TestPrefixCacheAndChoices(t *testing.T) {
	e, m := setupStore(t, []int32{1, 2})
	if _, err := run(t, e, inference.Request{Prompt: []int32{10, 11, 12, 13}}); err != nil {
		t.Fatal(err)
	}
	n := len(m.calls)
	r, err := run(t, e, inference.Request{Prompt: []int32{10, 11, 12, 20, 21}, N: 2, Sampling: sample.Params{Temperature: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Usage.CachedTokens != 3 || r.Usage.CompletionTokens != 6 || len(r.Choices) != 2 {
		t.Fatalf("usage %+v, %d choices", r.Usage, len(r.Choices))
	}
	for i, c := range r.Choices {
		if c.Text != "Hello" || c.Finish != inference.FinishStop {
			t.Fatalf("choice %d: %q %s", i, c.Text, c.Finish)
		}
	}
	calls := m.calls[n:]
	if calls[0].Valid != 3 {
		t.Fatalf("first step starts at %d, want 3", calls[0].Valid)
	}
	if c := calls[3]; len(c.Seq) != 5 || c.Valid != 0 { // second choice: prompt again
		t.Fatalf("second choice's first step %+v", c)
	}
}

func TestContextPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		script := make([]int32, 100)
		for i := range script {
			script[i] = 5
		}
		e, _ := setup(t, script, inference.Config{})
		long := make([]int32, 64)
		_, err := e.Submit(t.Context(), inference.Request{Prompt: long, MaxTokens: 5})
		var cle *inference.ContextLengthError
		if !errors.As(err, &cle) || cle.PromptTokens != 64 || cle.ContextLen != 64 || cle.MaxTokens != 5 {
			t.Fatalf("err = %v", err)
		}
		r, err := run(t, e, inference.Request{Prompt: make([]int32, 60), MaxTokens: 100})
		if err != nil || r.Finish != inference.FinishContext || r.Usage.CompletionTokens != 4 {
			t.Fatalf("clamped: %+v %v", r, err)
		}
		r, err = run(t, e, inference.Request{Prompt: make([]int32, 63)})
		if err != nil || r.Finish != inference.FinishContext || r.Choices[0].Text != "!" {
			t.Fatalf("last row: %+v %v", r, err)
		}
		r, _ = run(t, e, inference.Request{Prompt: []int32{1}, MaxTokens: 3})
		if r.Finish != inference.FinishLength || r.Choices[0].Text != "!!!" {
			t.Fatalf("max tokens: %+v", r)
		}
	})
}

func TestValidation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := setup(t, nil, inference.Config{})
		cases := []struct {
			param string
			req   inference.Request
		}{
			{"prompt", inference.Request{}},
			{"prompt", inference.Request{Prompt: []int32{1, vocab}}},
			{"prompt", inference.Request{Prompt: []int32{-1}}},
			{"n", inference.Request{Prompt: []int32{1}, N: inference.MaxChoices + 1}},
			{"stop", inference.Request{Prompt: []int32{1}, Stop: make([]string, 17)}},
			{"top_logprobs", inference.Request{Prompt: []int32{1}, Logprobs: true, TopLogprobs: 21}},
			{"temperature", inference.Request{Prompt: []int32{1}, Sampling: sample.Params{Temperature: -1}}},
			{"logit_bias", inference.Request{Prompt: []int32{1}, Sampling: sample.Params{LogitBias: map[int32]float32{vocab: 1}}}},
			{"n_keep", inference.Request{Prompt: []int32{1}, Keep: -1}},
			{"n_keep", inference.Request{Prompt: []int32{1, 2}, Keep: 3, ContextShift: true}},
		}
		for _, tc := range cases {
			_, err := e.Submit(t.Context(), tc.req)
			var ie *inference.InvalidRequestError
			if !errors.As(err, &ie) || ie.Param != tc.param {
				t.Errorf("%s: err = %v", tc.param, err)
			}
		}
	})
}

func TestStopString(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := setup(t, []int32{1, 2, 3, 4}, inference.Config{})
		r, err := run(t, e, inference.Request{Prompt: []int32{1}, Stop: []string{"zz", "o w"}, Logprobs: true})
		if err != nil {
			t.Fatal(err)
		}
		c := r.Choices[0]
		if c.Text != "Hell" || c.Finish != inference.FinishStop || c.Stop != "o w" || len(c.Tokens) != 2 || len(c.Logprobs) != 2 {
			t.Fatalf("%+v", c)
		}
		if r.Usage.CompletionTokens != 3 {
			t.Fatalf("usage %+v", r.Usage)
		}
	})
}

// order collects which streams finished, in order.
type order struct {
	mu   sync.Mutex
	done []string
	res  map[string]inference.Result
	errs map[string]error
}

func (o *order) read(name string, s *inference.Stream) {
	r, err := inference.Collect(s)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.done = append(o.done, name)
	if o.res == nil {
		o.res, o.errs = map[string]inference.Result{}, map[string]error{}
	}
	o.res[name], o.errs[name] = r, err
}

func TestFIFOAndFullQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, m := setup(t, []int32{1, 2}, inference.Config{QueueLen: 2})
		m.SetLatency(10 * time.Millisecond)
		var o order
		for _, name := range []string{"a", "b", "c"} {
			s, err := e.Submit(t.Context(), inference.Request{Prompt: []int32{1}})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			go o.read(name, s)
			synctest.Wait() // a starts running before b and c queue
		}
		if d := e.QueueDepth(); d != 2 {
			t.Fatalf("queue depth %d", d)
		}
		if _, err := e.Submit(t.Context(), inference.Request{Prompt: []int32{1}}); !errors.Is(err, inference.ErrBusy) {
			t.Fatalf("full queue: %v", err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		o.mu.Lock()
		defer o.mu.Unlock()
		if !slices.Equal(o.done, []string{"a", "b", "c"}) {
			t.Fatalf("finished in order %v", o.done)
		}
		if q := o.res["c"].Timings.QueueWait; q != 60*time.Millisecond {
			t.Fatalf("c waited %v", q)
		}
		want := inference.Timings{PromptEval: 10 * time.Millisecond, Generation: 20 * time.Millisecond, PromptN: 1, PredictedN: 3}
		if tm := o.res["a"].Timings; tm != want || tm.PredictedPerSecond() != 100 || tm.PromptPerSecond() != 100 {
			t.Fatalf("timings %+v, want %+v", tm, want)
		}
	})
}

func TestCancelQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, m := setup(t, []int32{1, 2}, inference.Config{QueueLen: 4})
		gate := m.Gate(true)
		a, _ := e.Submit(t.Context(), inference.Request{Prompt: []int32{1}})
		synctest.Wait()
		ctx, cancel := context.WithCancel(t.Context())
		b, err := e.Submit(ctx, inference.Request{Prompt: []int32{2}})
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		synctest.Wait()
		if e.QueueDepth() != 0 {
			t.Fatal("cancelled request still queued")
		}
		r, err := inference.Collect(b) // answered while a still holds the model
		if !errors.Is(err, context.Canceled) || r.Finish != inference.FinishCancelled {
			t.Fatalf("b: %+v %v", r, err)
		}
		m.Gate(false)
		close(gate)
		if r, err := inference.Collect(a); err != nil || r.Choices[0].Text != "Hello" {
			t.Fatalf("a: %+v %v", r, err)
		}
		for _, c := range m.Calls() {
			if c.Seq[0] == 2 {
				t.Fatal("cancelled request reached the model")
			}
		}
	})
}

func TestCancelRunningAndTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		script := slices.Repeat([]int32{5}, 50)
		e, m := setup(t, script, inference.Config{Timeout: time.Hour})
		m.SetLatency(10 * time.Millisecond)

		ctx, cancel := context.WithCancel(t.Context())
		s, _ := e.Submit(ctx, inference.Request{Prompt: []int32{1}})
		time.Sleep(35 * time.Millisecond) // 3 tokens, the 4th eval in flight
		cancel()
		r, err := inference.Collect(s)
		if !errors.Is(err, context.Canceled) || r.Finish != inference.FinishCancelled {
			t.Fatalf("cancel: %+v %v", r, err)
		}
		if n := len(m.Calls()); n != 4 {
			t.Fatalf("%d evals, want 4 (the 4th interrupted)", n)
		}

		r, err = run(t, e, inference.Request{Prompt: []int32{1}, Timeout: 55 * time.Millisecond})
		if err != nil || r.Finish != inference.FinishTimeout || r.Usage.CompletionTokens != 5 {
			t.Fatalf("timeout: %+v %v", r, err)
		}
		if c := r.Choices[0]; c.Text != "!!!!!" || c.Finish != inference.FinishTimeout {
			t.Fatalf("timeout choice %+v", c)
		}

		// With n = 3 the timeout ends the first choice; the two that never
		// started still finish, so every choice has a finish reason.
		r, err = run(t, e, inference.Request{Prompt: []int32{1}, N: 3, Timeout: 55 * time.Millisecond})
		if err != nil || len(r.Choices) != 3 {
			t.Fatalf("timeout n=3: %d choices, %v", len(r.Choices), err)
		}
		for i, c := range r.Choices {
			if c.Finish != inference.FinishTimeout {
				t.Errorf("choice %d: finish %q, want timeout", i, c.Finish)
			}
		}

		e2, m2 := setup(t, script, inference.Config{Timeout: 25 * time.Millisecond})
		m2.SetLatency(10 * time.Millisecond)
		r, err = run(t, e2, inference.Request{Prompt: []int32{1}})
		if err != nil || r.Finish != inference.FinishTimeout || r.Usage.CompletionTokens != 2 {
			t.Fatalf("default timeout: %+v %v", r, err)
		}
	})
}

func TestSlowConsumer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := setup(t, slices.Repeat([]int32{5}, 40), inference.Config{})
		slow, _ := e.Submit(t.Context(), inference.Request{Prompt: []int32{1}}) // nobody reads yet
		r, err := run(t, e, inference.Request{Prompt: []int32{2}})
		if err != nil || r.Usage.CompletionTokens != 41 {
			t.Fatalf("second request: %+v %v", r, err)
		}
		r, err = inference.Collect(slow)
		if err != nil || r.Choices[0].Text != strings.Repeat("!", 40) {
			t.Fatalf("slow reader: %q %v", r.Choices[0].Text, err)
		}
	})
}

func TestAbandonedStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := setup(t, slices.Repeat([]int32{5}, 40), inference.Config{})
		ctx, cancel := context.WithCancel(t.Context())
		s, _ := e.Submit(ctx, inference.Request{Prompt: []int32{1}})
		<-s.Events() // read one event, then go away
		cancel()
		synctest.Wait()
		// The stream's goroutine has not leaked (synctest.Test would fail);
		// a late reader still finds the Done event.
		var last inference.Event
		for ev := range s.Events() {
			last = ev
		}
		if !last.Done {
			t.Fatalf("last event %+v", last)
		}
	})
}

func TestModelFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, m := setup(t, []int32{1, 2}, inference.Config{})
		boom := errors.New("boom")
		m.Fail(nil, boom) // the prompt works, the first decode step fails
		r, err := run(t, e, inference.Request{Prompt: []int32{1}})
		if !errors.Is(err, boom) || r.Finish != inference.FinishError || r.Choices[0].Text != "Hel" {
			t.Fatalf("partial: %+v %v", r, err)
		}
		for i := range 2 { // with the one above: 3 consecutive failures
			if e.Healthy() != nil {
				t.Fatalf("unhealthy after %d failures", i+1)
			}
			m.Fail(boom)
			if _, err := run(t, e, inference.Request{Prompt: []int32{1}}); !errors.Is(err, boom) {
				t.Fatalf("run %d: %v", i, err)
			}
		}
		if err := e.Healthy(); !errors.Is(err, boom) {
			t.Fatalf("healthy after 3 failures: %v", err)
		}
		calls := len(m.Calls())
		r, err = run(t, e, inference.Request{Prompt: []int32{1}})
		if err != nil || r.Choices[0].Text != "Hello" || e.Healthy() != nil {
			t.Fatalf("recovery: %+v %v %v", r, err, e.Healthy())
		}
		if c := m.Calls()[calls]; c.Valid != 0 {
			t.Fatalf("after a failure the cache must be invalid, valid = %d", c.Valid)
		}
	})
}

func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := inferencetest.NewScripted(inference.ModelInfo{VocabSize: vocab, EOS: []int32{eot}}, []int32{1})
		e := inference.New(m, inferencetest.NewVocab(words), inference.Config{})
		gate := m.Gate(true)
		a, _ := e.Submit(t.Context(), inference.Request{Prompt: []int32{1}})
		synctest.Wait()
		b, _ := e.Submit(t.Context(), inference.Request{Prompt: []int32{1}})
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		_ = gate
		for _, s := range []*inference.Stream{a, b} {
			if _, err := inference.Collect(s); !errors.Is(err, inference.ErrClosed) {
				t.Fatalf("after Close: %v", err)
			}
		}
		if _, err := e.Submit(t.Context(), inference.Request{Prompt: []int32{1}}); !errors.Is(err, inference.ErrClosed) {
			t.Fatalf("Submit after Close: %v", err)
		}
		if e.Healthy() == nil || m.Closed() {
			t.Fatal("closed engine healthy, or the model closed by the engine")
		}
	})
}

func TestSeededRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, m := setup(t, slices.Repeat([]int32{5}, 30), inference.Config{})
		r := rand.New(rand.NewPCG(1, 2))
		bg := make([]float32, vocab)
		for i := range bg {
			bg[i] = float32(r.NormFloat64())
		}
		m.SetBackground(bg, 0.5) // a flat distribution: the sampler decides
		tokens := func(seed int64) [][]int32 {
			req := inference.Request{Prompt: []int32{1}, MaxTokens: 20, N: 2,
				Sampling: sample.Params{Temperature: 1, TopP: 0.95, Seed: &seed}}
			res, err := run(t, e, req)
			if err != nil {
				t.Fatal(err)
			}
			var out [][]int32
			for _, c := range res.Choices {
				out = append(out, c.Tokens)
			}
			return out
		}
		a, b, c := tokens(7), tokens(7), tokens(8)
		if !slices.EqualFunc(a, b, slices.Equal) {
			t.Fatalf("same seed: %v vs %v", a, b)
		}
		if slices.EqualFunc(a, c, slices.Equal) || slices.Equal(a[0], a[1]) {
			t.Fatalf("seeds 7 and 8 or the two choices agree: %v %v", a, c)
		}
	})
}

func TestMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		e, _ := setup(t, []int32{1, 2}, inference.Config{Registerer: reg})
		if _, err := run(t, e, inference.Request{Prompt: []int32{1, 2}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Submit(t.Context(), inference.Request{}); err == nil {
			t.Fatal("empty prompt accepted")
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				name := mf.GetName()
				for _, l := range m.GetLabel() {
					name += "/" + l.GetValue()
				}
				if c := m.GetCounter(); c != nil {
					got[name] = c.GetValue()
				}
			}
		}
		want := map[string]float64{
			"hexserve_generated_tokens_total":     3,
			"hexserve_prompt_tokens_total":        2,
			"hexserve_requests_total/invalid":     1,
			"hexserve_requests_total/stop":        1,
			"hexserve_cached_prompt_tokens_total": 0,
			"hexserve_graph_calls_total/fake":     3,
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %v, want %v", k, got[k], v)
			}
		}
		if len(mfs) < 8 {
			t.Errorf("%d metric families", len(mfs))
		}
	})
}

// badModel returns logits of the wrong length, then panics.
func badModel() *seqModel {
	calls := 0
	return &seqModel{info: inference.ModelInfo{VocabSize: vocab, ContextLen: 64, EOS: []int32{eot}},
		fill: func([]int32, int) sample.Logits {
			calls++
			if calls == 1 {
				return sample.Logits{Type: sample.F32, F32: make([]float32, 10)}
			}
			panic("kaput")
		}}
}

func TestMalformedModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := inference.New(badModel(), inferencetest.NewVocab(words), inference.Config{})
		defer e.Close()
		for _, want := range []string{"10 logits", "kaput"} {
			r, err := run(t, e, inference.Request{Prompt: []int32{1}})
			if err == nil || !strings.Contains(err.Error(), want) || r.Finish != inference.FinishError {
				t.Fatalf("%+v %v, want an error about %q", r, err, want)
			}
		}
	})
}

// TestPrefixCacheOwners: rows computed for one owner (API key) are neither
// reused for nor reported as cached to another, so cached_tokens cannot
// tell a key how far its guess matches another key's prompt.
func TestPrefixCacheOwners(t *testing.T) {
	secret := []int32{10, 11, 12, 13, 14, 15} // "the PIN is 1 3 1 5"
	tests := []struct {
		name       string
		owner      string
		prompt     []int32
		wantCached int
	}{
		{"same owner, right guess", "alice", []int32{10, 11, 12, 13, 14, 15, 20}, 6},
		{"same owner, wrong guess", "alice", []int32{10, 11, 12, 13, 99, 15, 20}, 4},
		{"other owner, right guess", "mallory", []int32{10, 11, 12, 13, 14, 15, 20}, 0},
		{"other owner, wrong guess", "mallory", []int32{10, 11, 12, 13, 99, 15, 20}, 0},
		{"no keys, after an owner", "", []int32{10, 11, 12, 13, 14, 15, 20}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, m := setupStore(t, []int32{1, eot})
			if _, err := run(t, e, inference.Request{Prompt: secret, Owner: "alice"}); err != nil {
				t.Fatal(err)
			}
			n := len(m.calls)
			r, err := run(t, e, inference.Request{Prompt: tt.prompt, Owner: tt.owner})
			if err != nil {
				t.Fatal(err)
			}
			if r.Usage.CachedTokens != tt.wantCached {
				t.Errorf("cached_tokens = %d, want %d", r.Usage.CachedTokens, tt.wantCached)
			}
			if v := m.calls[n].Valid; v != tt.wantCached {
				t.Errorf("first step reused %d rows, want %d", v, tt.wantCached)
			}
		})
	}
}
