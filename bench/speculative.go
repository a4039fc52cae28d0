package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hexserve/hexserve/inference"
)

// Goals of the speculative phase: decode tok/s with speculation ÷ without,
// on the same requests.
const (
	GoalSpecPrediction = 3.0  // a prediction equal to the output
	GoalSpecCodeEdit   = 2.5  // a file with a few lines changed, predicted by the original
	GoalSpecLookup     = 1.8  // prompt lookup alone, quoting the prompt
	GoalSpecUnrelated  = 0.97 // non-repetitive text, an unrelated prediction: no slowdown
)

// Speculative is one workload of the speculative phase, run with
// speculation off and on against the same requests. The model's output is
// forced (HOSTSIM_SCRIPT) to the workload's text, so the tiny model's
// random weights do not matter.
type Speculative struct {
	Workload     string  `json:"workload"`
	Emulation    Latency `json:"emulation"`
	PromptTokens int     `json:"prompt_tokens"`
	OutputTokens int     `json:"output_tokens"`
	Prediction   bool    `json:"prediction"`       // a prediction was sent
	OffTokS      float64 `json:"off_decode_tok_s"` // median over runs
	OnTokS       float64 `json:"on_decode_tok_s"`
	Ratio        float64 `json:"ratio"`
	Goal         float64 `json:"goal"`
	Accepted     int     `json:"accepted_prediction_tokens"` // last run with speculation
	Rejected     int     `json:"rejected_prediction_tokens"`
	Error        string  `json:"error,omitempty"`
}

// editSource is the file of the code-editing workload.
const editSource = `package store

import (
	"errors"
	"sync"
)

// ErrNotFound is returned for a missing key.
var ErrNotFound = errors.New("store: not found")

// Store is a map guarded by a mutex.
type Store struct {
	mu   sync.Mutex
	data map[string]string
}

// New returns an empty store.
func New() *Store { return &Store{data: map[string]string{}} }

// Get returns the value of key.
func (s *Store) Get(key string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.data[key]
	if !ok {
		return "", ErrNotFound
	}
	return v, nil
}

// Put sets key to value.
func (s *Store) Put(key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data[key] = value
}
`

// specWorkload is one request of the phase.
type specWorkload struct {
	name       string
	prompt     string
	output     string // forced
	prediction string
	goal       float64
}

func specWorkloads() []specWorkload {
	edited := strings.NewReplacer(
		"// Store is a map guarded by a mutex.", "// Store is a map guarded by a read-write mutex.",
		"mu   sync.Mutex", "mu   sync.RWMutex",
		"func (s *Store) Get(key string) (string, error) {\n\ts.mu.Lock()\n\tdefer s.mu.Unlock()",
		"func (s *Store) Get(key string) (string, error) {\n\ts.mu.RLock()\n\tdefer s.mu.RUnlock()",
	).Replace(editSource)
	doc := Paragraph[:1400]
	quote := Paragraph[400:1000]
	return []specWorkload{
		{"prediction_equals_output", "Write the store package.", editSource, editSource, GoalSpecPrediction},
		{"code_edit", "Use a sync.RWMutex and read locks in Get:\n\n" + editSource, edited, editSource, GoalSpecCodeEdit},
		{"quote_prompt_lookup", "Quote the middle of this text:\n\n" + doc, quote, "", GoalSpecLookup},
		{"unrelated_text", "Continue:\n\n" + Paragraph[3000:3400], Paragraph[6000:6600], Paragraph[12000:12600], GoalSpecUnrelated},
	}
}

// speculativePhase runs each workload with speculation off and on, with the
// latency emulation, and compares decode tok/s.
func (r *runner) speculativePhase(ctx context.Context) error {
	// Drafts pay where a multi-row call takes the cache's past rows: a
	// chunked bundle or a .pte (the runner with background KV copies).
	_, pte := r.model.(backgroundCopier)
	if r.model.BatchLimits().Rows < 2 || modelKind(r.model) != "chunked" && !pte {
		r.progress("  skipped: the model does not verify drafts cheaply (not a chunked bundle or a .pte)")
		return nil
	}
	defer setLatency(r.emu)()
	dir, err := os.MkdirTemp("", "hexserve-bench-script-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	old, had := os.LookupEnv("HOSTSIM_SCRIPT")
	defer func() {
		if had {
			os.Setenv("HOSTSIM_SCRIPT", old)
		} else {
			os.Unsetenv("HOSTSIM_SCRIPT")
		}
	}()
	scripts := 0
	for _, w := range specWorkloads() {
		res := Speculative{Workload: w.name, Emulation: r.emu, Prediction: w.prediction != "", Goal: w.goal}
		prompt := r.tok.Encode(w.prompt, false, false)
		if bos := r.tok.Specials().BOS; bos >= 0 {
			prompt = append([]int32{bos}, prompt...)
		}
		out := r.tok.Encode(w.output, false, false)
		res.PromptTokens, res.OutputTokens = len(prompt), len(out)
		if len(prompt)+len(out)+1 > r.info.ContextLen {
			res.Error = fmt.Sprintf("%d prompt and %d output tokens exceed the %d-token context", len(prompt), len(out), r.info.ContextLen)
			r.rep.Speculative = append(r.rep.Speculative, res)
			continue
		}
		// The script: the output's tokens, read afresh (from position 0)
		// for each request through a new path.
		var b strings.Builder
		for _, id := range out {
			b.WriteString(strconv.Itoa(int(id)) + "\n")
		}
		var on, off []float64
		for run := range r.fewRuns() { // decode tok/s over the whole output: one run is already a mean
			r.progress("  %s %d/%d", w.name, run+1, r.fewRuns())
			for _, spec := range []bool{false, true} {
				scripts++
				path := filepath.Join(dir, fmt.Sprintf("script-%d.txt", scripts))
				if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
					return err
				}
				os.Setenv("HOSTSIM_SCRIPT", path)
				cfg := inference.Config{}
				if spec {
					cfg.Speculative = inference.DefaultSpeculative
				}
				e := inference.New(r.model, r.tok, cfg)
				got, _, _, err := request(ctx, e, inference.Request{Prompt: prompt, MaxTokens: len(out), IgnoreEOS: true, Prediction: w.prediction})
				e.Close()
				if err != nil {
					return err
				}
				if len(got.Choices) != 1 || !slices.Equal(got.Choices[0].Tokens, out) {
					res.Error = "the model's output was not the scripted text (HOSTSIM_SCRIPT unsupported?)"
				}
				tps := got.Timings.PredictedPerSecond()
				if spec {
					on = append(on, tps)
					res.Accepted, res.Rejected = got.Usage.AcceptedPredictionTokens, got.Usage.RejectedPredictionTokens
				} else {
					off = append(off, tps)
				}
			}
		}
		res.OffTokS, res.OnTokS = round3(median(off)), round3(median(on))
		if res.OffTokS > 0 {
			res.Ratio = round3(res.OnTokS / res.OffTokS)
		}
		r.progress("  %s: %.1f → %.1f tok/s (%.2f×)", w.name, res.OffTokS, res.OnTokS, res.Ratio)
		r.rep.Speculative = append(r.rep.Speculative, res)
	}
	return nil
}
