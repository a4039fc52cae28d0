package inference_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hexserve/hexserve/inference"

	"github.com/hexserve/hexserve/inference/inferencetest"
	"github.com/hexserve/hexserve/inference/sample"
)

// specVocab has one-letter pieces, some two-letter pieces (so one text has
// several tokenisations), space, newline and an end-of-turn token.
var specPieces = func() []string {
	p := []string{}
	for c := 'a'; c <= 'z'; c++ {
		p = append(p, string(c))
	}
	return append(p, " ", "\n", "th", "he", "in", "er", "an", " t", "<|eot|>")
}()

var specEOT = int32(len(specPieces) - 1)

type specVocab struct{}

func (specVocab) Piece(id int32) []byte   { return []byte(specPieces[id]) }
func (specVocab) IsSpecial(id int32) bool { return id == specEOT }

// Encode is greedy longest-match (special tokens are never parsed).
func (specVocab) Encode(text string, addBOS, parseSpecial bool) []int32 {
	var ids []int32
	for len(text) > 0 {
		best, n := int32(-1), 0
		for id, p := range specPieces[:specEOT] {
			if len(p) > n && strings.HasPrefix(text, p) {
				best, n = int32(id), len(p)
			}
		}
		if best < 0 {
			text = text[1:]
			continue
		}
		ids = append(ids, best)
		text = text[n:]
	}
	return ids
}

// specLogits is specFill's buffer (tests run one model call at a time).
var specLogits = make([]float32, len(specPieces))

// specFill is the spec models' logits after prefix: a preferred successor
// of the last token plus noise hashed from the prefix.
func specFill(prefix []int32, _ int) sample.Logits {
	h := fnv.New64a()
	for _, id := range prefix {
		fmt.Fprint(h, id, ",")
	}
	r := rand.New(rand.NewPCG(h.Sum64(), 7))
	last := prefix[len(prefix)-1]
	for i := range specLogits {
		specLogits[i] = float32(r.NormFloat64())
	}
	specLogits[(last*7+3)%specEOT] += 3
	specLogits[specEOT] -= 2
	return sample.Logits{Type: sample.F32, F32: specLogits}
}

// newSpecModel is a one-sequence model over specFill. Its verify rows are
// cheap (a step of k rows costs 11 + k ms against 10 for one), or, with
// costly, as dear as decoding them one by one, so that drafts never pay.
func newSpecModel(ctxLen int, costly bool) *seqModel {
	cost := func(rows int) time.Duration {
		if rows <= 1 {
			return 10 * time.Millisecond
		}
		return 11*time.Millisecond + time.Duration(rows)*time.Millisecond
	}
	if costly {
		cost = func(rows int) time.Duration { return time.Duration(rows) * 10 * time.Millisecond }
	}
	return &seqModel{info: inference.ModelInfo{Name: "spec", VocabSize: len(specPieces), ContextLen: ctxLen, PrefillWindow: 16, EOS: []int32{specEOT}},
		fill: specFill, cost: cost}
}

func specEngine(t *testing.T, m *seqModel, spec inference.Speculative) *inference.Engine {
	t.Helper()
	e := inference.New(m, specVocab{}, inference.Config{Speculative: spec})
	t.Cleanup(func() { e.Close() })
	return e
}

// specPlain is a prompt of n tokens drawn from src and its plain
// (not speculative) greedy continuation of max tokens.
func specPlain(t *testing.T, src rand.Source, n, max int) ([]int32, inference.Result) {
	t.Helper()
	prompt := specPrompt(rand.New(src), n)
	off := specEngine(t, newSpecModel(128, false), inference.Speculative{})
	want, err := run(t, off, inference.Request{Prompt: prompt, MaxTokens: max, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	return prompt, want
}

func specPrompt(r *rand.Rand, n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(r.IntN(int(specEOT)))
	}
	return p
}

// edit changes a few bytes in the middle of s.
func edit(r *rand.Rand, s string) string {
	if len(s) < 4 {
		return s + "xyz"
	}
	i := r.IntN(len(s) - 2)
	return s[:i] + "qqz" + s[i+2:]
}

// TestSpeculativeEquivalence: with and without speculation, every request
// gives the same choices (text, tokens, logprobs, finish), greedy and seeded,
// whatever the prediction; a prediction equal to the output is accepted.
func TestSpeculativeEquivalence(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	seed := int64(42)
	type variant struct {
		name string
		pred func(out string) string
	}
	preds := []variant{
		{"right", func(out string) string { return out }},
		{"partly right", func(out string) string { return edit(r, out) }},
		{"wrong", func(string) string { return "zzzz qqqq xxxx wwww" }},
		{"empty", func(string) string { return "" }},
		{"longer than the context", func(out string) string { return strings.Repeat(out, 20) }},
	}
	samplings := []struct {
		name string
		req  inference.Request
	}{
		{"greedy", inference.Request{MaxTokens: 40}},
		{"greedy logprobs", inference.Request{MaxTokens: 40, Logprobs: true, TopLogprobs: 3}},
		{"seeded", inference.Request{MaxTokens: 40, Sampling: sample.Params{Temperature: 0.9, TopP: 0.95, Seed: &seed}}},
		{"penalties and bias", inference.Request{MaxTokens: 40, N: 2, Sampling: sample.Params{Temperature: 0.7, Seed: &seed,
			PresencePenalty: 0.5, FrequencyPenalty: 0.3, RepetitionPenalty: 1.2, LogitBias: map[int32]float32{4: 2}}}},
		{"stop", inference.Request{MaxTokens: 40, Stop: []string{"th"}}},
		{"constrained", inference.Request{MaxTokens: 40, Constrain: func() inference.Constraint { return &banConstraint{} }}},
		{"constrained seeded", inference.Request{MaxTokens: 40, Sampling: sample.Params{Temperature: 1, Seed: &seed},
			Constrain: func() inference.Constraint { return &banConstraint{} }}},
		{"to the end of the context", inference.Request{}},
	}
	for _, sm := range samplings {
		for _, pv := range preds {
			t.Run(sm.name+"/"+pv.name, func(t *testing.T) {
				off := specEngine(t, newSpecModel(96, false), inference.Speculative{})
				on := newSpecModel(96, false)
				eon := specEngine(t, on, inference.DefaultSpeculative)
				for trial := range 3 {
					req := sm.req
					req.Prompt = specPrompt(r, 8+r.IntN(30))
					want, err := run(t, off, req)
					if err != nil {
						t.Fatal(err)
					}
					req.Prediction = pv.pred(want.Choices[0].Text)
					got, err := run(t, eon, req)
					if err != nil {
						t.Fatal(err)
					}
					if !equalChoices(got.Choices, want.Choices) {
						t.Fatalf("trial %d: with speculation %+v\nwithout %+v", trial, got.Choices, want.Choices)
					}
					if got.Usage.CompletionTokens != want.Usage.CompletionTokens {
						t.Errorf("completion tokens %d, want %d", got.Usage.CompletionTokens, want.Usage.CompletionTokens)
					}
					u := got.Usage
					if pv.name == "right" && req.N <= 1 && u.AcceptedPredictionTokens < want.Usage.CompletionTokens/2 {
						t.Errorf("a right prediction: %d of %d tokens accepted (%d rejected)", u.AcceptedPredictionTokens, want.Usage.CompletionTokens, u.RejectedPredictionTokens)
					}
					if pv.name == "empty" && u.AcceptedPredictionTokens+u.RejectedPredictionTokens != 0 {
						t.Errorf("no prediction, but %d accepted and %d rejected", u.AcceptedPredictionTokens, u.RejectedPredictionTokens)
					}
				}
				if pv.name == "right" && on.verifies == 0 {
					t.Error("a right prediction was never verified")
				}
			})
		}
	}
}

// banConstraint forbids every third token id (and counts what it accepted).
type banConstraint struct{ n int }

func (c *banConstraint) Allowed(id int32) bool { return id == specEOT || id%3 != 0 }
func (c *banConstraint) Mask(allowed []uint64) { maskOf(allowed, specEOT+1, c.Allowed) }
func (c *banConstraint) Accept(id int32) error {
	if !c.Allowed(id) {
		return errors.New("banned")
	}
	c.n++
	return nil
}
func (c *banConstraint) Complete() bool { return true }

func equalChoices(a, b []inference.Choice) bool {
	return slices.EqualFunc(a, b, func(x, y inference.Choice) bool {
		return x.Text == y.Text && x.Finish == y.Finish && slices.Equal(x.Tokens, y.Tokens) &&
			slices.EqualFunc(x.Logprobs, y.Logprobs, func(p, q sample.Logprob) bool {
				return p.ID == q.ID && p.Logprob == q.Logprob && len(p.Top) == len(q.Top)
			})
	})
}

// TestSpeculativeSavesCalls: a right prediction needs far fewer model calls
// than tokens, and a model whose verify rows cost what decoding them does
// decodes plainly.
func TestSpeculativeSavesCalls(t *testing.T) {
	prompt, want := specPlain(t, rand.NewPCG(3, 4), 20, 60)
	for _, tc := range []struct {
		name     string
		noVerify bool
	}{{"verifier", false}, {"verify as dear as decode", true}} {
		t.Run(tc.name, func(t *testing.T) {
			m := newSpecModel(128, tc.noVerify)
			reg := prometheus.NewRegistry()
			e := inference.New(m, specVocab{}, inference.Config{Speculative: inference.DefaultSpeculative, Registerer: reg})
			t.Cleanup(func() { e.Close() })
			got, err := run(t, e, inference.Request{Prompt: prompt, MaxTokens: 60, IgnoreEOS: true, Prediction: want.Choices[0].Text})
			if err != nil {
				t.Fatal(err)
			}
			if got.Choices[0].Text != want.Choices[0].Text {
				t.Fatalf("text %q, want %q", got.Choices[0].Text, want.Choices[0].Text)
			}
			calls := m.steps - 1 // the prompt's step samples the first token
			switch {
			case tc.noVerify && (m.verifies != 0 || calls != 59):
				t.Errorf("%d steps and %d verifies, want 59 plain decode steps after the prompt's", calls, m.verifies)
			case !tc.noVerify && calls > 60/4:
				t.Errorf("%d steps (%d verifies) for 60 tokens with a right prediction", calls, m.verifies)
			case !tc.noVerify && got.Usage.AcceptedPredictionTokens < 50:
				t.Errorf("accepted %d prediction tokens of 60", got.Usage.AcceptedPredictionTokens)
			}
			if v := metricValue(t, reg, "hexserve_verify_calls_total"); v != float64(m.verifies) {
				t.Errorf("hexserve_verify_calls_total %v, want %d", v, m.verifies)
			}
		})
	}
}

// TestSpeculativeSamplingDistribution: over a fixed set of seeds, the
// distribution of a short sampled continuation with speculation (prompt
// lookup and a prediction that is sometimes right) matches plain sampling's
// by a chi-square test.
func TestSpeculativeSamplingDistribution(t *testing.T) {
	prompt := []int32{0, 1, 2, 3, 0, 1, 2, 3, 0, 1}
	off := specEngine(t, newSpecModel(64, false), inference.Speculative{})
	on := newSpecModel(64, false)
	eon := specEngine(t, on, inference.DefaultSpeculative)
	const seeds = 400
	var plain, spec []string
	for i := range seeds {
		plainSeed, specSeed := int64(i), int64(seeds+i) // independent samples
		req := inference.Request{Prompt: prompt, MaxTokens: 3, IgnoreEOS: true,
			Sampling: sample.Params{Temperature: 1.5, TopK: 4, Seed: &plainSeed}}
		a, err := run(t, off, req)
		if err != nil {
			t.Fatal(err)
		}
		req.Sampling.Seed = &specSeed
		req.Prediction = "kbk" // the likeliest continuation: (last·7+3) mod 36 from 1
		b, err := run(t, eon, req)
		if err != nil {
			t.Fatal(err)
		}
		plain, spec = append(plain, a.Choices[0].Text), append(spec, b.Choices[0].Text)
	}
	if on.verifies == 0 {
		t.Fatal("no verify call: the test does not exercise speculation")
	}
	chi2, df := chiSquare(plain, spec)
	// The 0.999 quantile of chi-square for df degrees of freedom (Wilson–Hilferty).
	z := 3.09
	limit := float64(df) * math.Pow(1-2/(9*float64(df))+z*math.Sqrt(2/(9*float64(df))), 3)
	if df < 1 || chi2 > limit {
		t.Errorf("chi-square %.1f over %d degrees of freedom (limit %.1f)", chi2, df, limit)
	}
}

// chiSquare is the two-sample chi-square statistic over the categories seen
// at least 5 times in total (the rest pooled).
func chiSquare(a, b []string) (float64, int) {
	count := map[string][2]float64{}
	for _, s := range a {
		c := count[s]
		c[0]++
		count[s] = c
	}
	for _, s := range b {
		c := count[s]
		c[1]++
		count[s] = c
	}
	var cats [][2]float64
	var rest [2]float64
	for _, c := range count {
		if c[0]+c[1] >= 5 {
			cats = append(cats, c)
		} else {
			rest[0] += c[0]
			rest[1] += c[1]
		}
	}
	if rest[0]+rest[1] > 0 {
		cats = append(cats, rest)
	}
	na, nb := float64(len(a)), float64(len(b))
	var chi2 float64
	for _, c := range cats {
		tot := c[0] + c[1]
		ea, eb := tot*na/(na+nb), tot*nb/(na+nb)
		chi2 += (c[0]-ea)*(c[0]-ea)/ea + (c[1]-eb)*(c[1]-eb)/eb
	}
	return chi2, len(cats) - 1
}

// TestSpeculativeStreaming: every token a step accepted has reached the
// reader before the next model call starts (no chunk waits on a call).
func TestSpeculativeStreaming(t *testing.T) {
	prompt, want := specPlain(t, rand.NewPCG(7, 8), 12, 40)
	var read atomic.Int64
	var late atomic.Int64
	m := newSpecModel(128, false)
	m.before = func(_ []int32, start int) error {
		if start < len(prompt) {
			return nil // the prompt's call
		}
		emitted := int64(start + 1 - len(prompt)) // tokens sampled so far
		deadline := time.Now().Add(5 * time.Second)
		for read.Load() < emitted {
			if time.Now().After(deadline) {
				late.Add(1)
				return nil
			}
			time.Sleep(time.Millisecond)
		}
		return nil
	}
	e := specEngine(t, m, inference.DefaultSpeculative)
	s := inferencetest.Submit(t, e, inference.Request{Prompt: prompt, MaxTokens: 40, IgnoreEOS: true, Prediction: want.Choices[0].Text})
	multi := 0
	for ev := range s.Events() {
		if len(ev.Tokens) > 1 {
			multi++
		}
		read.Add(int64(len(ev.Tokens)))
	}
	if m.verifies == 0 || read.Load() != 40 {
		t.Fatalf("%d verify calls, %d tokens read", m.verifies, read.Load())
	}
	if n := late.Load(); n > 0 {
		t.Errorf("%d model calls started before the reader had the earlier tokens", n)
	}
	if multi > 0 {
		t.Logf("%d events carried several tokens", multi)
	}
}

// savingStore records what the engine saves and checks the rows it gets.
type savingStore struct {
	saved [][]int32
	bad   error
}

func (s *savingStore) Restore(string, []int32, int, func(int, []byte) error) (int, error) {
	return 0, nil
}
func (s *savingStore) Stats() inference.KVStats { return inference.KVStats{} }
func (s *savingStore) Save(owner, tag string, seq []int32, get func(from, to int, dst []byte) error) error {
	s.saved = append(s.saved, slices.Clone(seq))
	dst := make([]byte, 8*len(seq))
	if err := get(0, len(seq), dst); err != nil {
		s.bad = err
		return err
	}
	for p, h := range prefixHashes(seq) {
		if binary.LittleEndian.Uint64(dst[p*8:]) != h {
			s.bad = fmt.Errorf("saved row %d does not hold the saved sequence", p)
		}
	}
	return nil
}

// TestSpeculativeKVStore: only committed rows reach the KV store: never the
// rows a verify wrote for rejected draft tokens.
func TestSpeculativeKVStore(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	st := &savingStore{}
	m := newSpecModel(128, false)
	e := inference.New(m, specVocab{}, inference.Config{Speculative: inference.DefaultSpeculative, KVStore: st})
	t.Cleanup(func() { e.Close() })
	rejected := 0
	for trial := range 12 {
		prompt := specPrompt(r, 10)
		// A stop string ends requests in the middle of a verify step.
		got, err := run(t, e, inference.Request{Prompt: prompt, MaxTokens: 30, Stop: []string{"e"},
			Prediction: "zz the then there thin an an er he" + fmt.Sprint(trial)})
		if err != nil {
			t.Fatal(err)
		}
		rejected += got.Usage.RejectedPredictionTokens
		// Every saved token after the prompt is the greedy choice after its
		// prefix: a rejected draft token is not.
		last := st.saved[len(st.saved)-1]
		if !slices.Equal(last[:len(prompt)], prompt) {
			t.Fatalf("trial %d: saved %v does not start with the prompt", trial, last)
		}
		for p := len(prompt); p < len(last); p++ {
			l := specFill(last[:p], 0)
			if best := int32(slices.Index(l.F32, slices.Max(l.F32))); last[p] != best {
				t.Fatalf("trial %d: saved token %d at %d was not generated (greedy: %d)", trial, last[p], p, best)
			}
		}
	}
	if st.bad != nil {
		t.Fatal(st.bad)
	}
	if got := m.verifies; got == 0 {
		t.Fatal("no verify call: the test does not exercise speculation")
	}
	if rejected == 0 {
		t.Fatal("no draft token was rejected: the test does not exercise rolled-back rows")
	}
}
