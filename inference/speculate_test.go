package inference_test

import (
	"context"
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
)

// specVocab has single letters, some two-letter pieces (so one text has
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

// specModel's logits are a function of the whole sequence so far: a
// preferred successor of the last token plus noise hashed from the prefix.
// It implements inference.Verifier with lazily computed rows.
type specModel struct {
	ctxLen   int
	noVerify bool
	logits   []float32
	verifies int // Verify calls
	rows     int // rows whose logits were asked for
	evals    int
	before   func(seq []int32, valid int) // called as each Eval and Verify starts
}

func (m *specModel) Info() inference.ModelInfo {
	return inference.ModelInfo{Name: "spec", VocabSize: len(specPieces), ContextLen: m.ctxLen, PrefillWindow: 16, EOS: []int32{specEOT}}
}

func (m *specModel) fill(prefix []int32) inference.Logits {
	if m.logits == nil {
		m.logits = make([]float32, len(specPieces))
	}
	h := fnv.New64a()
	for _, id := range prefix {
		fmt.Fprint(h, id, ",")
	}
	r := rand.New(rand.NewPCG(h.Sum64(), 7))
	last := prefix[len(prefix)-1]
	for i := range m.logits {
		m.logits[i] = float32(r.NormFloat64())
	}
	m.logits[(last*7+3)%specEOT] += 3
	m.logits[specEOT] -= 2
	return inference.Logits{Type: inference.F32, F32: m.logits}
}

func (m *specModel) Eval(ctx context.Context, seq []int32, valid int) (inference.Logits, int, error) {
	m.evals++
	if m.before != nil {
		m.before(seq, valid)
	}
	return m.fill(seq), valid, nil
}

func (m *specModel) Close() error { return nil }

func (m *specModel) MaxVerify(valid int) int {
	if m.noVerify {
		return 0
	}
	return min(8, m.ctxLen-valid)
}

func (m *specModel) Verify(ctx context.Context, seq []int32, valid int) (inference.Rows, error) {
	if len(seq)-valid > m.MaxVerify(valid) || len(seq) > m.ctxLen {
		return nil, fmt.Errorf("verify of %d rows at %d", len(seq)-valid, valid)
	}
	m.verifies++
	if m.before != nil {
		m.before(seq, valid)
	}
	return &specRows{m: m, seq: slices.Clone(seq), valid: valid, next: 0}, nil
}

func (m *specModel) Costs(k int) (verify, decode time.Duration) {
	return 11*time.Millisecond + time.Duration(k)*time.Millisecond, 10 * time.Millisecond
}

type specRows struct {
	m     *specModel
	seq   []int32
	valid int
	next  int
}

func (r *specRows) Len() int { return len(r.seq) - r.valid }

func (r *specRows) Logits(ctx context.Context, i int) (inference.Logits, error) {
	if i < r.next {
		return inference.Logits{}, errors.New("rows asked for out of order")
	}
	r.next = i + 1
	r.m.rows++
	return r.m.fill(r.seq[:r.valid+i+1]), nil
}

func specEngine(t *testing.T, m *specModel, spec inference.Speculative) *inference.Engine {
	t.Helper()
	e := inference.New(m, specVocab{}, inference.Config{Speculative: spec})
	t.Cleanup(func() { e.Close() })
	return e
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
		{"seeded", inference.Request{MaxTokens: 40, Sampling: inference.Sampling{Temperature: 0.9, TopP: 0.95, Seed: &seed}}},
		{"penalties and bias", inference.Request{MaxTokens: 40, N: 2, Sampling: inference.Sampling{Temperature: 0.7, Seed: &seed,
			PresencePenalty: 0.5, FrequencyPenalty: 0.3, RepetitionPenalty: 1.2, LogitBias: map[int32]float32{4: 2}}}},
		{"stop", inference.Request{MaxTokens: 40, Stop: []string{"th"}}},
		{"constrained", inference.Request{MaxTokens: 40, Constrain: func() inference.Constraint { return &banConstraint{} }}},
		{"constrained seeded", inference.Request{MaxTokens: 40, Sampling: inference.Sampling{Temperature: 1, Seed: &seed},
			Constrain: func() inference.Constraint { return &banConstraint{} }}},
		{"to the end of the context", inference.Request{}},
	}
	for _, sm := range samplings {
		for _, pv := range preds {
			t.Run(sm.name+"/"+pv.name, func(t *testing.T) {
				off := specEngine(t, &specModel{ctxLen: 96}, inference.Speculative{})
				on := &specModel{ctxLen: 96}
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
func (c *banConstraint) Mask(allowed []uint64) {
	clear(allowed)
	for id := range specEOT + 1 {
		if c.Allowed(id) {
			allowed[id>>6] |= 1 << (id & 63)
		}
	}
}
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
			slices.EqualFunc(x.Logprobs, y.Logprobs, func(p, q inference.Logprob) bool {
				return p.ID == q.ID && p.Logprob == q.Logprob && len(p.Top) == len(q.Top)
			})
	})
}

// TestSpeculativeSavesCalls: a right prediction needs far fewer model calls
// than tokens, and a model without Verifier (MaxVerify 0) decodes plainly.
func TestSpeculativeSavesCalls(t *testing.T) {
	prompt := specPrompt(rand.New(rand.NewPCG(3, 4)), 20)
	off := specEngine(t, &specModel{ctxLen: 128}, inference.Speculative{})
	want, err := run(t, off, inference.Request{Prompt: prompt, MaxTokens: 60, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		noVerify bool
	}{{"verifier", false}, {"no verify room", true}} {
		t.Run(tc.name, func(t *testing.T) {
			m := &specModel{ctxLen: 128, noVerify: tc.noVerify}
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
			calls := m.evals + m.verifies
			switch {
			case tc.noVerify && (m.verifies != 0 || calls != 60):
				t.Errorf("%d evals and %d verifies, want 60 plain evals", m.evals, m.verifies)
			case !tc.noVerify && calls > 60/4:
				t.Errorf("%d evals and %d verifies for 60 tokens with a right prediction", m.evals, m.verifies)
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
	off := specEngine(t, &specModel{ctxLen: 64}, inference.Speculative{})
	on := &specModel{ctxLen: 64}
	eon := specEngine(t, on, inference.DefaultSpeculative)
	const seeds = 400
	var plain, spec []string
	for i := range seeds {
		plainSeed, specSeed := int64(i), int64(seeds+i) // independent samples
		req := inference.Request{Prompt: prompt, MaxTokens: 3, IgnoreEOS: true,
			Sampling: inference.Sampling{Temperature: 1.5, TopK: 4, Seed: &plainSeed}}
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
	prompt := specPrompt(rand.New(rand.NewPCG(7, 8)), 12)
	off := specEngine(t, &specModel{ctxLen: 128}, inference.Speculative{})
	want, err := run(t, off, inference.Request{Prompt: prompt, MaxTokens: 40, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	var read atomic.Int64
	var late atomic.Int64
	m := &specModel{ctxLen: 128}
	m.before = func(seq []int32, valid int) {
		if valid < len(prompt) {
			return // the prompt's call
		}
		emitted := int64(valid + 1 - len(prompt)) // tokens sampled so far
		deadline := time.Now().Add(5 * time.Second)
		for read.Load() < emitted {
			if time.Now().After(deadline) {
				late.Add(1)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	e := specEngine(t, m, inference.DefaultSpeculative)
	s, err := e.Submit(t.Context(), inference.Request{Prompt: prompt, MaxTokens: 40, IgnoreEOS: true, Prediction: want.Choices[0].Text})
	if err != nil {
		t.Fatal(err)
	}
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

// kvSpecModel is a specModel with a checked KV cache: row p holds a hash of
// seq[:p+1], written by Eval and Verify alike (a verify's rejected rows too).
type kvSpecModel struct {
	*specModel
	rows  []uint64
	valid int
}

func (m *kvSpecModel) write(seq []int32, valid int) {
	copy(m.rows[valid:], prefixHashes(seq)[valid:])
	m.valid = len(seq)
}

func (m *kvSpecModel) Eval(ctx context.Context, seq []int32, valid int) (inference.Logits, int, error) {
	m.write(seq, min(valid, m.valid))
	return m.specModel.Eval(ctx, seq, valid)
}

func (m *kvSpecModel) Verify(ctx context.Context, seq []int32, valid int) (inference.Rows, error) {
	m.write(seq, min(valid, m.valid))
	return m.specModel.Verify(ctx, seq, valid)
}

func (m *kvSpecModel) KVLayout() inference.KVLayout {
	return inference.KVLayout{Identity: "rows", RowBytes: 8}
}
func (m *kvSpecModel) SaveKV(from, to int, dst []byte) error {
	if to > m.valid {
		return errors.New("SaveKV past the valid rows")
	}
	for p := from; p < to; p++ {
		binary.LittleEndian.PutUint64(dst[(p-from)*8:], m.rows[p])
	}
	return nil
}
func (m *kvSpecModel) RestoreKV(from int, src []byte) error { return errors.New("not restored here") }

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
	m := &kvSpecModel{specModel: &specModel{ctxLen: 128}, rows: make([]uint64, 128)}
	e := inference.New(m, specVocab{}, inference.Config{Speculative: inference.DefaultSpeculative, KVStore: st})
	t.Cleanup(func() { e.Close() })
	rejected := 0
	check := &specModel{ctxLen: 128}
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
			l := check.fill(last[:p])
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
