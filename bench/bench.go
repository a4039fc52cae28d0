package bench

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/hexserve/hexserve/inference"

	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/tokenizer"
)

// Paragraph is the tokenizer golden's 20,495-byte paragraph
// (testdata/tokenizer/golden_public.jsonl, category paragraph_20k).
//
//go:embed paragraph_20k.txt
var Paragraph string

// Latency is hostsim's per-execute latency floor in µs (HOSTSIM_LATENCY_US_*).
type Latency struct {
	PrefillUS int `json:"prefill_us"`
	DecodeUS  int `json:"decode_us"`
	LMHeadUS  int `json:"lmhead_us"`
}

// Goals.
const (
	GoalHostUS       = 150   // host µs per decode token (median), both sampling settings
	GoalStreaming    = 0.99  // SSE-delivered tok/s ÷ engine tok/s
	GoalPrefixRatio  = 0.3   // turn-2 TTFT with the prefix cache ÷ without
	GoalDelayP50MS   = 1     // a token's delay from its model call to the SSE client, median
	GoalDelayP99MS   = 5     // and p99
	GoalGoSideMB     = 60    // Go runtime memory beyond the mapped model files
	ReferenceMBps    = 2.6   // HF tokenizers (Rust), testdata/tokenizer/SOURCE.md
	GoalTokenizerX   = 2     // × the reference
	historyTokens    = 400   // prefix phase: the chat history
	prefixReplyToks  = 16    // prefix phase: turn 1's reply
	tokenizerRepeats = 256   // tokenizer phase: paragraph copies
	tokenizerChunk   = 20480 // tokenizer phase: bytes per Encode call
)

// Options configure Run.
type Options struct {
	// Load opens the model and its tokenizer; Run closes the model.
	Load func() (Loaded, error)
	// Bundle names the bundle in the report.
	Bundle string
	Quick  bool // fewer tokens and runs, emulation scaled to 1/10
	// Full runs the whole workload (about 15 minutes on the tiny bundle
	// here): every measurement Runs times, the kvstore phase's 4
	// conversations × 6 turns both ways, every concurrency workload on
	// every model kind. The default takes fewer, well-chosen runs
	// (runner.fewRuns) and says what it left out.
	Full bool
	HTTP bool // also stream through the HTTP server to SSE clients
	// Emulation sets hostsim's latency floors for the streaming and prefix
	// phases (the caller passes the v79 figures, plan.V79Costs); zero: none.
	Emulation    Latency
	Tokens       int // decode tokens per request; 0: 64 (quick: 16)
	Runs         int // requests per measurement; 0: 3 (quick: 1); set: used everywhere, as with Full
	PromptTokens int // throughput and streaming prompts; 0: one prefill window
	Progress     io.Writer
	// Phases selects phases by key (tokenizer, stream, http, prefix, kvstore,
	// speculative, host, structured, concurrency, burst, context);
	// nil: all (http only with HTTP), but context.
	Phases []string
	// MaxSequences is the burst phase's engine.max_sequences (0: auto).
	MaxSequences int
}

// PhaseKeys are the keys Options.Phases accepts, in run order.
var PhaseKeys = []string{"tokenizer", "stream", "http", "prefix", "kvstore", "speculative", "host", "structured", "concurrency", "burst", "context"}

// Loaded is an opened model.
type Loaded struct {
	Model inference.Model // calls are never concurrent
	// Counters reads the model's cumulative counters; nil: it has none (its
	// graph time counts as host time).
	Counters  func() Counters
	Tokenizer *tokenizer.Tokenizer
	// Dir is the folder of the model's files, where mapped files are
	// looked for; empty: not reported.
	Dir string
}

// Settings are the two sampling configurations measured.
var Settings = []struct {
	Name string
	P    sample.Params
}{
	{"greedy", sample.Params{}},
	{"t0.7_p0.9_penalties", sample.Params{Temperature: 0.7, TopP: 0.9, PresencePenalty: 0.5, FrequencyPenalty: 0.5, RepetitionPenalty: 1.1}},
}

type runner struct {
	opt      Options
	allRuns  bool // Full, or Runs given: every measurement runs Runs times
	model    inference.Model
	counters func() Counters // Loaded.Counters
	tok      *tokenizer.Tokenizer
	info     inference.ModelInfo
	emu      Latency
	rep      *Report
}

// Run executes the workload. Phases that cannot run on this model (too
// short a context) are skipped with a note on Progress.
func Run(ctx context.Context, opt Options) (*Report, error) {
	if opt.Progress == nil {
		opt.Progress = io.Discard
	}
	if opt.Tokens <= 0 {
		opt.Tokens = 64
		if opt.Quick {
			opt.Tokens = 16
		}
	}
	runsSet := opt.Runs > 0
	if opt.Runs <= 0 {
		opt.Runs = 3
		if opt.Quick {
			opt.Runs = 1
		}
	}
	r := &runner{opt: opt, allRuns: opt.Full || runsSet, rep: &Report{Bundle: opt.Bundle, Quick: opt.Quick, Full: opt.Full, GoVersion: runtime.Version(),
		CPUs: runtime.NumCPU(), Started: time.Now().UTC(),
		Native: []Throughput{}, Host: []HostTime{}, Streaming: []Streaming{}, Speculative: []Speculative{}, Goals: []Goal{}}}
	r.emu = opt.Emulation
	if opt.Quick {
		r.emu = Latency{r.emu.PrefillUS / 10, r.emu.DecodeUS / 10, r.emu.LMHeadUS / 10}
	}
	start := time.Now()
	debug.FreeOSMemory() // a GC, and idle heap back to the OS
	r.rep.Memory.Snapshots = append(r.rep.Memory.Snapshots, snapshot("before_load"))
	r.progress("loading the model")
	ld, err := opt.Load()
	if err != nil {
		return nil, err
	}
	defer ld.Model.Close()
	r.model, r.counters, r.tok, r.info = ld.Model, ld.Counters, ld.Tokenizer, ld.Model.Info()
	debug.FreeOSMemory() // a GC, and idle heap back to the OS
	r.rep.Memory.Snapshots = append(r.rep.Memory.Snapshots, snapshot("after_load"))
	r.rep.Model = ModelSummary{Name: r.info.Name, Vocab: r.info.VocabSize, ContextLen: r.info.ContextLen, PrefillWindow: r.info.PrefillWindow}
	prompt := opt.PromptTokens
	if prompt <= 0 {
		prompt = max(r.info.PrefillWindow, 1)
	}
	prompt = min(prompt, r.info.ContextLen-opt.Tokens-1)
	if prompt < 1 {
		return nil, fmt.Errorf("bench: context %d too short for %d tokens", r.info.ContextLen, opt.Tokens)
	}
	r.rep.Workload = Workload{PromptTokens: prompt, DecodeTokens: opt.Tokens, Runs: opt.Runs, Emulation: r.emu}

	type phase struct {
		key, name string
		f         func(context.Context) error
	}
	var phases []phase
	for _, p := range []phase{
		{"tokenizer", "tokenizer", r.tokenizerPhase},
		{"stream", "streaming (in-process)", func(ctx context.Context) error { return r.streamPhase(ctx, prompt, false) }},
		{"http", "streaming (HTTP, SSE)", func(ctx context.Context) error { return r.streamPhase(ctx, prompt, true) }},
		{"prefix", "prefix cache", r.prefixPhase},
		{"kvstore", "KV store (conversations taking turns)", r.kvStorePhase},
		{"speculative", "speculative decoding, off and on", r.speculativePhase},
		{"host", "host time and throughput (hostsim speed)", func(ctx context.Context) error { return r.hostPhase(ctx, prompt) }},
		{"structured", "structured outputs (constraint per token, schema compile)", r.structuredPhase},
		{"concurrency", "concurrency (streams side by side, n = 4, TTFT under load)", r.concurrencyPhase},
		{"burst", "burst (8 clients at once against one alone, the configured engine)", r.burstPhase},
		{"context", "context shift (a generation several windows long)", r.contextPhase},
	} {
		// http runs only with HTTP, context (minutes of emulated decode) only when named.
		if (p.key != "http" || opt.HTTP) && (opt.Phases == nil && p.key != "context" || slices.Contains(opt.Phases, p.key)) {
			phases = append(phases, p)
		}
	}
	for i, p := range phases {
		r.progress("[%d/%d] %s", i+1, len(phases), p.name)
		if err := p.f(ctx); err != nil {
			return nil, fmt.Errorf("bench: %s: %w", p.name, err)
		}
	}
	debug.FreeOSMemory() // a GC, and idle heap back to the OS
	after := snapshot("after_generation")
	r.rep.Memory.Snapshots = append(r.rep.Memory.Snapshots, after)
	if ld.Dir != "" {
		r.rep.Memory.ModelFiles = dirSize(ld.Dir)
		r.rep.Memory.MappedFiles = mappedFiles(ld.Dir)
	}
	r.rep.Memory.GoSide = after.GoRuntime
	r.rep.Seconds = round3(time.Since(start).Seconds())
	r.rep.Goals = goals(r.rep)
	r.progress("done in %.1f s", r.rep.Seconds)
	return r.rep, nil
}

// fewRuns is how many times a measurement that averages many steps runs
// (an aggregate over streams, a long decode): once by default, where one
// run's figure is already a mean over hundreds of graph calls; Runs with
// Full or an explicit Runs.
func (r *runner) fewRuns() int {
	if r.allRuns {
		return r.opt.Runs
	}
	return 1
}

func (r *runner) progress(format string, a ...any) {
	fmt.Fprintf(r.opt.Progress, "bench: "+format+"\n", a...)
}

// goals evaluates the targets.
func goals(rep *Report) []Goal {
	var g []Goal
	for _, h := range rep.Host {
		if h.CPUUS.N > 0 {
			g = append(g, goal("host_us_per_decode_token/"+h.Sampling, h.CPUUS.P50, "<=", GoalHostUS, "µs",
				fmt.Sprintf("median thread CPU time outside graph calls (wall %.1f); V = %d", h.TotalUS.P50, h.Vocab)))
			continue
		}
		g = append(g, goal("host_us_per_decode_token/"+h.Sampling, h.TotalUS.P50, "<=", GoalHostUS, "µs",
			fmt.Sprintf("median wall time (no thread CPU clock); V = %d", h.Vocab)))
	}
	for _, s := range rep.Streaming {
		if s.Transport == "http-sse" && s.Error == "" {
			g = append(g, goal("streaming_efficiency", s.Efficiency, ">=", GoalStreaming, "", "SSE-delivered ÷ engine tok/s"),
				goal("streaming_token_delay_p50_ms", s.TokenDelayMS.P50, "<=", GoalDelayP50MS, "ms", "model call done → token read by the SSE client"),
				goal("streaming_token_delay_p99_ms", s.TokenDelayMS.P99, "<=", GoalDelayP99MS, "ms",
					fmt.Sprintf("%d of %d tokens held for the next (UTF-8)", s.HeldTokens, s.TokenDelayMS.N)),
				goal("streaming_release_delay_p99_ms", s.ReleaseDelayMS.P99, "<=", GoalDelayP99MS, "ms", "releasing model call done → chunk read"))
		}
	}
	if rep.PrefixCache.Ratio > 0 {
		g = append(g, goal("prefix_cache_ttft_ratio", rep.PrefixCache.Ratio, "<=", GoalPrefixRatio, "",
			fmt.Sprintf("turn 2 after %d history tokens", rep.PrefixCache.HistoryTokens)))
	}
	for _, s := range rep.Speculative {
		if s.Error == "" {
			g = append(g, goal("speculative_decode_ratio/"+s.Workload, s.Ratio, ">=", s.Goal, "×",
				fmt.Sprintf("decode tok/s on ÷ off, %d output tokens", s.OutputTokens)))
		}
	}
	g = append(g, kvTurnGoals(rep.KVStore)...)
	g = append(g, concurrencyGoals(rep.Concurrency)...)
	g = append(g, burstGoals(rep.Burst)...)
	g = append(g, contextGoals(rep.Context)...)
	if st := rep.Structured; st != nil {
		g = append(g, goal("constraint_us_per_token_p50", st.MaskUS.P50, "<=", GoalMaskMedianUS, "µs",
			fmt.Sprintf("V = %d, uniformly random proposals", st.Vocab)),
			goal("constraint_us_per_token_p99", st.MaskUS.P99, "<=", GoalMaskP99US, "µs", "wall clock"))
		if st.MaskCPUUS.N > 0 {
			g = append(g, goal("constraint_cpu_us_per_token_p99", st.MaskCPUUS.P99, "<=", GoalMaskP99US, "µs", "thread CPU time: descheduling excluded"))
		}
		g = append(g,
			goal("schema_compile_ms", st.CompileMS.Max, "<=", GoalCompileMS, "ms", "slowest bench schema"))
	}
	g = append(g, goal("go_side_rss_mb", float64(rep.Memory.GoSide)/(1<<20), "<=", GoalGoSideMB, "MiB",
		"Go runtime memory (Sys − HeapReleased) after generation"))
	if rep.Tokenizer.Bytes > 0 {
		g = append(g, goal("tokenizer_mb_per_s", rep.Tokenizer.MBps.P50, ">=", GoalTokenizerX*ReferenceMBps, "MB/s",
			fmt.Sprintf("2× HF tokenizers' %.1f MB/s; repeated text: the word cache hits", ReferenceMBps)))
	}
	return g
}

// benchPrompt is n tokens: BOS, then the paragraph's tokens.
func (r *runner) benchPrompt(n int) []int32 {
	ids := r.tok.Encode(Paragraph, false, false)
	p := []int32{r.info.BOS}
	for len(p) < n {
		p = append(p, ids[:min(len(ids), n-len(p))]...)
	}
	return p
}

// request runs one request to the end on e and returns the result, the
// time just before Submit and the arrival time of every generated token (the
// time the event carrying it was read).
func request(ctx context.Context, e *inference.Engine, req inference.Request) (inference.Result, time.Time, []time.Time, error) {
	t0 := time.Now()
	s, err := e.Submit(ctx, req)
	if err != nil {
		return inference.Result{}, t0, nil, err
	}
	var res inference.Result
	var arrivals []time.Time
	for ev := range s.Events() {
		now := time.Now()
		if ev.Done {
			res.Usage, res.Timings, res.Finish = ev.Usage, ev.Timings, ev.Finish
			if ev.Err != nil {
				return res, t0, nil, ev.Err
			}
			continue
		}
		for range ev.Tokens {
			arrivals = append(arrivals, now)
		}
		for len(res.Choices) <= ev.Choice {
			res.Choices = append(res.Choices, inference.Choice{})
		}
		c := &res.Choices[ev.Choice]
		c.Text += ev.Text
		c.Tokens = append(c.Tokens, ev.Tokens...)
	}
	return res, t0, arrivals, nil
}

// setLatency sets hostsim's latency floors (zero clears them) and returns
// a function that restores the previous values.
func setLatency(l Latency) func() {
	vars := []struct {
		k string
		v int
	}{{"HOSTSIM_LATENCY_US_PREFILL", l.PrefillUS}, {"HOSTSIM_LATENCY_US_DECODE", l.DecodeUS}, {"HOSTSIM_LATENCY_US_LMHEAD", l.LMHeadUS}}
	var restore []func()
	for _, kv := range vars {
		old, had := os.LookupEnv(kv.k)
		if kv.v > 0 {
			os.Setenv(kv.k, strconv.Itoa(kv.v))
		} else {
			os.Unsetenv(kv.k)
		}
		restore = append(restore, func() {
			if had {
				os.Setenv(kv.k, old)
			} else {
				os.Unsetenv(kv.k)
			}
		})
	}
	return func() {
		for _, f := range restore {
			f()
		}
	}
}
