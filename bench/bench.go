package bench

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/internal/threadcpu"
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
	HTTP   bool // also stream through the HTTP server to SSE clients
	// Emulation sets hostsim's latency floors for the streaming and prefix
	// phases (the caller passes the v79 figures, plan.V79Costs); zero: none.
	Emulation    Latency
	Tokens       int // decode tokens per request; 0: 64 (quick: 16)
	Runs         int // requests per measurement; 0: 3 (quick: 1)
	PromptTokens int // throughput and streaming prompts; 0: one prefill window
	Progress     io.Writer
	// Phases selects phases by key (tokenizer, stream, http, prefix, kvstore,
	// speculative, host, structured);
	// nil: all (http only with HTTP).
	Phases []string
}

// PhaseKeys are the keys Options.Phases accepts, in run order.
var PhaseKeys = []string{"tokenizer", "stream", "http", "prefix", "kvstore", "speculative", "host", "structured"}

// Loaded is an opened model.
type Loaded struct {
	Model     Model
	Tokenizer *tokenizer.Tokenizer
	// Dir is the folder of the model's files, where mapped files are
	// looked for; empty: not reported.
	Dir string
}

// Report is the whole result; its JSON form is `hexserve bench --json`.
type Report struct {
	Bundle      string         `json:"bundle"`
	Model       ModelSummary   `json:"model"`
	Quick       bool           `json:"quick"`
	GoVersion   string         `json:"go_version"`
	CPUs        int            `json:"cpus"`
	Started     time.Time      `json:"started"`
	Seconds     float64        `json:"seconds"`
	Workload    Workload       `json:"workload"`
	Tokenizer   TokenizerSpeed `json:"tokenizer"`
	Native      []Throughput   `json:"throughput_native"`
	Host        []HostTime     `json:"host_time"`
	Streaming   []Streaming    `json:"streaming"`
	PrefixCache PrefixCache    `json:"prefix_cache"`
	KVStore     KVStoreBench   `json:"kv_store"`
	Speculative []Speculative  `json:"speculative"`
	Memory      Memory         `json:"memory"`
	Structured  *Structured    `json:"structured,omitempty"`
	Goals       []Goal         `json:"goals"`
}

// ModelSummary describes the loaded model.
type ModelSummary struct {
	Name          string `json:"name"`
	Vocab         int    `json:"vocab"`
	ContextLen    int    `json:"context_len"`
	PrefillWindow int    `json:"prefill_window"`
}

// Workload records the parameters the run used.
type Workload struct {
	PromptTokens int     `json:"prompt_tokens"`
	DecodeTokens int     `json:"decode_tokens"`
	Runs         int     `json:"runs"`
	Emulation    Latency `json:"emulation"` // zero: off
}

// TokenizerSpeed is encode throughput on the golden paragraph ×256 in 20 KB chunks.
type TokenizerSpeed struct {
	Bytes      int     `json:"bytes"`
	Tokens     int     `json:"tokens"`
	MBps       Dist    `json:"mb_per_s"` // per pass (MB = 10^6 bytes)
	TokensPerS float64 `json:"tokens_per_s"`
	Reference  float64 `json:"reference_mb_per_s"`
}

// Throughput is prefill and decode speed at hostsim's own speed (no emulation).
type Throughput struct {
	Sampling     string  `json:"sampling"`
	PromptTokens int     `json:"prompt_tokens"`
	PrefillTokS  Dist    `json:"prefill_tok_s"`  // per request
	DecodeTokS   float64 `json:"decode_tok_s"`   // decode tokens ÷ their summed step time
	DecodeStepMS Dist    `json:"decode_step_ms"` // per decode token, wall
	TTFTMS       Dist    `json:"ttft_ms"`        // Submit → first token event
}

// HostTime is the host-side time of a decode token: its step's wall time
// minus the time inside graph execution, and the host's own share of it.
type HostTime struct {
	Sampling string `json:"sampling"`
	Vocab    int    `json:"vocab"`
	TotalUS  Dist   `json:"total_us"` // wall
	// CPUUS is the engine worker thread's CPU time per decode token outside
	// graph calls (the worker locked to its thread; Linux): the host's own
	// work without time spent waiting for a core, which on a shared machine
	// (and with hostsim's threads computing the graphs on the same cores)
	// the wall figure includes. N = 0: not measured.
	CPUUS    Dist      `json:"cpu_us"`
	CPUSplit HostCPU   `json:"cpu_split_us"` // medians per token
	Thread   ThreadUse `json:"thread"`       // what the scheduler and the kernel did to that thread
	GraphMS  Dist      `json:"graph_ms"`     // inside graph execution, for scale
	Split    HostUS    `json:"split_us"`     // medians per token
	IO       IOSplit   `json:"io_us"`        // medians per token
}

// HostCPU splits CPUUS: the medians of its parts.
type HostCPU struct {
	ModelIO  float64 `json:"model_io"` // inside Eval outside graph calls: the runner's I/O and the calls' own overhead
	Engine   float64 `json:"engine"`   // between Evals: sampling, detokenising, text, events
	Sampling float64 `json:"sampling"` // Engine minus the small-vocabulary baseline's
	// EngineWarm is Engine on a replay of the first request's logits
	// (recorded by an unmeasured run of it) with
	// no graph call between the steps: what the engine costs when the
	// graph computation has not just filled the caches and TLB with
	// weights (hostsim on the host's cores; on a phone the NPU does not).
	EngineWarm float64 `json:"engine_warm"`
	// EngineCold is the same replay with a 64 MiB buffer written before
	// every step (caches emptied, as on a phone whose NPU computed the
	// step): the engine's own cost with cold caches and no other core's
	// dirty lines to fetch.
	EngineCold float64 `json:"engine_cold"`
}

// ThreadUse is the engine worker thread's accounting per decode token
// (graph calls included), means over the tokens.
type ThreadUse struct {
	InvolSwitches float64 `json:"involuntary_switches"` // preemptions
	VolSwitches   float64 `json:"voluntary_switches"`   // blocking: hostsim's caller waiting for its pool
	MinorFaults   float64 `json:"minor_faults"`
	RunDelayUS    float64 `json:"run_delay_us"` // runnable, waiting for a core
	// EngineMinorFaults counts only the faults between Evals (the engine's own work).
	EngineMinorFaults float64 `json:"engine_minor_faults"`
}

// HostUS splits the host time per decode token: the median of each part
// (medians need not add up to the total's).
type HostUS struct {
	Sampling   float64 `json:"sampling"`   // engine time outside Eval minus the small-vocabulary baseline's
	ModelIO    float64 `json:"model_io"`   // embedding, RoPE, mask, KV copy, lm-head input
	Detokenise float64 `json:"detokenise"` // vocabulary lookups (Piece, IsSpecial)
	Rest       float64 `json:"rest"`       // text, stop handling, events, bookkeeping
}

// IOSplit is the runner's host-side work per decode token.
type IOSplit struct {
	Embed   float64 `json:"embed"`
	Rope    float64 `json:"rope"`
	Mask    float64 `json:"mask"`
	KVCopy  float64 `json:"kv_copy"`
	Convert float64 `json:"convert"`
}

// Streaming compares the rate tokens reach a client with the rate the engine produced them.
type Streaming struct {
	Transport     string  `json:"transport"` // "in-process" or "http-sse"
	Emulation     Latency `json:"emulation"`
	Requests      int     `json:"requests"`
	Tokens        int     `json:"tokens"`          // per request (engine)
	EngineTokS    float64 `json:"engine_tok_s"`    // tokens ÷ (last model call done − request sent)
	DeliveredTokS float64 `json:"delivered_tok_s"` // tokens ÷ (last token received − request sent)
	Efficiency    float64 `json:"efficiency"`      // delivered ÷ engine, median over requests
	DecodeTokS    float64 `json:"decode_tok_s"`    // between the first and last token's model calls
	TTFTMS        Dist    `json:"ttft_ms"`
	// TokenDelayMS is each token's delay from the end of the model call that
	// produced it to its arrival at the client, over all requests: what a
	// server that buffered tokens would show even when the last one is on time.
	// A token whose bytes end inside a UTF-8 character (or could start a stop
	// string) is held until the next one completes it, a whole decode step.
	TokenDelayMS Dist `json:"token_delay_ms"`
	// HeldTokens counts those: tokens that arrived together with a later one.
	HeldTokens int `json:"held_tokens"`
	// ReleaseDelayMS is each chunk's delay from the end of the model call of
	// its last token (the one that released it) to its arrival: the server's
	// and the transport's own share, without what the text forced.
	ReleaseDelayMS Dist   `json:"release_delay_ms"`
	Error          string `json:"error,omitempty"`
}

// PrefixCache compares turn 2's time to first token with and without the cache.
type PrefixCache struct {
	Emulation      Latency `json:"emulation"`
	HistoryTokens  int     `json:"history_tokens"` // turn 1's prompt
	Turn2Tokens    int     `json:"turn2_tokens"`
	CachedTokens   int     `json:"cached_tokens"` // reported by the engine
	TTFTCachedMS   float64 `json:"ttft_cached_ms"`
	TTFTUncachedMS float64 `json:"ttft_uncached_ms"`
	Ratio          float64 `json:"ratio"`
}

// Memory is the process's memory around loading and generation.
type Memory struct {
	Snapshots   []MemSnapshot `json:"snapshots"`
	ModelFiles  int64         `json:"model_files_bytes"` // files in the model folder
	MappedFiles []MappedFile  `json:"mapped_files"`
	// GoSide is the Go runtime's memory (Sys − HeapReleased) after
	// generation: what the Go process holds beyond the mapped model files
	// and the backend's (on a phone, the NPU's) allocations.
	GoSide int64 `json:"go_side_bytes"`
}

// Settings are the two sampling configurations measured.
var Settings = []struct {
	Name string
	P    inference.Sampling
}{
	{"greedy", inference.Sampling{}},
	{"t0.7_p0.9_penalties", inference.Sampling{Temperature: 0.7, TopP: 0.9, PresencePenalty: 0.5, FrequencyPenalty: 0.5, RepetitionPenalty: 1.1}},
}

type runner struct {
	opt   Options
	model Model
	tok   *tokenizer.Tokenizer
	info  inference.ModelInfo
	emu   Latency
	rep   *Report
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
	if opt.Runs <= 0 {
		opt.Runs = 3
		if opt.Quick {
			opt.Runs = 1
		}
	}
	r := &runner{opt: opt, rep: &Report{Bundle: opt.Bundle, Quick: opt.Quick, GoVersion: runtime.Version(),
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
	r.model, r.tok, r.info = ld.Model, ld.Tokenizer, ld.Model.Info()
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
	} {
		if (p.key != "http" || opt.HTTP) && (opt.Phases == nil || slices.Contains(opt.Phases, p.key)) {
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

// tokenizerPhase encodes the golden paragraph ×256 in 20 KB chunks.
func (r *runner) tokenizerPhase(ctx context.Context) error {
	reps, passes := tokenizerRepeats, 3
	if r.opt.Quick {
		reps, passes = 32, 1
	}
	text := strings.Repeat(Paragraph, reps)
	var rates []float64
	ntok := 0
	var total time.Duration
	for range passes {
		if err := ctx.Err(); err != nil {
			return err
		}
		ntok = 0
		t0 := time.Now()
		for i := 0; i < len(text); i += tokenizerChunk {
			ntok += len(r.tok.Encode(text[i:min(i+tokenizerChunk, len(text))], false, false))
		}
		d := time.Since(t0)
		total += d
		rates = append(rates, float64(len(text))/1e6/d.Seconds())
	}
	r.rep.Tokenizer = TokenizerSpeed{Bytes: len(text), Tokens: ntok, MBps: newDist(rates),
		TokensPerS: round3(float64(ntok*passes) / total.Seconds()), Reference: ReferenceMBps}
	return nil
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

// stepSample is one decode token's measurements.
type stepSample struct {
	wall, graph, outside, detok time.Duration
	io                          Counters
	cpu                         time.Duration   // thread CPU time outside graph calls
	ioCPU, outsideCPU           time.Duration   // its parts inside Eval and after it
	use                         threadcpu.Usage // thread accounting over the step
	engineUse                   threadcpu.Usage // and between the Evals
	cpuOK                       bool
}

// decodeSteps measures the decode tokens of one request's records: token i
// (i ≥ 1) runs from Eval i's start to Eval i+1's start. The last token has
// no next Eval and is left out. Thread figures need both records' thread
// readings and, when graphs ran, their CPU time.
func decodeSteps(recs []evalRec) []stepSample {
	var out []stepSample
	for i := 1; i+1 < len(recs); i++ {
		a, b := recs[i], recs[i+1]
		s := stepSample{wall: b.start.Sub(a.start), graph: a.d.Graph, outside: b.start.Sub(a.end),
			detok: b.vocab - a.vocab, io: a.d}
		if a.useOK && b.useOK && (a.d.Graph == 0 || a.d.GraphCPU > 0) {
			// Readings at Eval's end are left out: Eval runs to endUse.CPU, the engine from endCPU.
			read := a.endCPU - a.endUse.CPU
			s.cpu, s.use, s.cpuOK = b.use.CPU-a.cpu-a.d.GraphCPU-read, b.use.Sub(a.use), true
			s.ioCPU, s.outsideCPU = a.endUse.CPU-a.cpu-a.d.GraphCPU, b.use.CPU-a.endCPU
			s.engineUse = b.use.Sub(a.endUse)
		}
		out = append(out, s)
	}
	return out
}

func (r *runner) hostPhase(ctx context.Context, promptN int) error {
	prompt := r.benchPrompt(promptN)
	for _, set := range Settings {
		tv := &timedVocab{v: r.tok}
		rec := &recorder{m: r.model, v: tv, thread: true}
		var steps []stepSample
		var prefill, ttft []float64
		var first []int32
		for run := range r.opt.Runs {
			r.progress("  %s: request %d/%d (%d prompt + %d decode tokens)", set.Name, run+1, r.opt.Runs, len(prompt), r.opt.Tokens)
			e := inference.New(rec, tv, inference.Config{}) // fresh: no cached rows
			runtime.GC()                                    // collect the last engine's buffers now, not during the steps
			seed := int64(run + 1)
			p := set.P
			p.Seed = &seed
			res, t0, arr, err := request(ctx, e, inference.Request{Prompt: prompt, MaxTokens: r.opt.Tokens, Sampling: p, IgnoreEOS: true})
			e.Close()
			recs := rec.take()
			if err != nil {
				return err
			}
			if len(recs) == 0 {
				return errors.New("no model calls recorded")
			}
			if len(arr) > 0 {
				ttft = append(ttft, ms(arr[0].Sub(t0)))
			}
			n := recs[0].seqLen - recs[0].reused
			prefill = append(prefill, float64(n)/recs[0].end.Sub(recs[0].start).Seconds())
			steps = append(steps, decodeSteps(recs)...)
			if first == nil && len(res.Choices) > 0 {
				first = res.Choices[0].Tokens
			}
		}
		base, err := r.baseline(ctx, set.P, first, len(prompt))
		if err != nil {
			return err
		}
		kept, err := r.record(ctx, set.P, prompt, first)
		if err != nil {
			return err
		}
		warm, err := r.replayEngine(ctx, set.P, kept, prompt, first, false)
		if err != nil {
			return err
		}
		cold, err := r.replayEngine(ctx, set.P, kept, prompt, first, true)
		if err != nil {
			return err
		}
		var host, cpu, graph, stepMS, smp, io, detok, rest []float64
		var emb, rope, mask, kv, conv, delay, ioCPU, outCPU, smpCPU []float64
		var th ThreadUse
		var wall time.Duration
		for _, s := range steps {
			if s.cpuOK {
				cpu = append(cpu, us(s.cpu))
				ioCPU, outCPU = append(ioCPU, us(s.ioCPU)), append(outCPU, us(s.outsideCPU))
				smpCPU = append(smpCPU, max(us(s.outsideCPU)-base.cpu, 0))
				delay = append(delay, us(s.use.RunDelay))
				th.InvolSwitches += float64(s.use.InvolSwitches)
				th.VolSwitches += float64(s.use.VolSwitches)
				th.MinorFaults += float64(s.use.MinorFaults)
				th.EngineMinorFaults += float64(s.engineUse.MinorFaults)
			}
			h := s.wall - s.graph
			host = append(host, us(h))
			graph = append(graph, ms(s.graph))
			stepMS = append(stepMS, ms(s.wall))
			wall += s.wall
			sp := max(us(s.outside)-base.wall, 0)
			smp = append(smp, sp)
			io = append(io, us(s.io.IO()))
			detok = append(detok, us(s.detok))
			rest = append(rest, us(h)-sp-us(s.io.IO())-us(s.detok))
			emb, rope, mask = append(emb, us(s.io.Embed)), append(rope, us(s.io.Rope)), append(mask, us(s.io.Mask))
			kv, conv = append(kv, us(s.io.KVCopy)), append(conv, us(s.io.Convert))
		}
		if n := float64(len(cpu)); n > 0 {
			th = ThreadUse{round3(th.InvolSwitches / n), round3(th.VolSwitches / n), round3(th.MinorFaults / n), newDist(delay).Mean,
				round3(th.EngineMinorFaults / n)}
		}
		h := HostTime{Sampling: set.Name, Vocab: r.info.VocabSize, TotalUS: newDist(host), CPUUS: newDist(cpu), Thread: th,
			CPUSplit: HostCPU{ModelIO: median(ioCPU), Engine: median(outCPU), Sampling: median(smpCPU), EngineWarm: warm, EngineCold: cold}, GraphMS: newDist(graph),
			Split: HostUS{Sampling: median(smp), ModelIO: median(io), Detokenise: median(detok), Rest: median(rest)},
			IO:    IOSplit{Embed: median(emb), Rope: median(rope), Mask: median(mask), KVCopy: median(kv), Convert: median(conv)}}
		r.rep.Host = append(r.rep.Host, h)
		tp := Throughput{Sampling: set.Name, PromptTokens: len(prompt), PrefillTokS: newDist(prefill),
			DecodeStepMS: newDist(stepMS), TTFTMS: newDist(ttft)}
		if wall > 0 {
			tp.DecodeTokS = round3(float64(len(steps)) / wall.Seconds())
		}
		r.rep.Native = append(r.rep.Native, tp)
	}
	return nil
}

// record runs the first request again (seed 1), unmeasured, keeping every
// Eval's logits for the replays; it fails if the tokens differ from the
// measured run's.
func (r *runner) record(ctx context.Context, p inference.Sampling, prompt, tokens []int32) ([]evalRec, error) {
	if len(tokens) < 3 {
		return nil, nil
	}
	r.progress("  recording the logits for the replays")
	rec := &recorder{m: r.model, keep: true}
	e := inference.New(rec, r.tok, inference.Config{})
	seed := int64(1)
	p.Seed = &seed
	res, _, _, err := request(ctx, e, inference.Request{Prompt: prompt, MaxTokens: len(tokens), Sampling: p, IgnoreEOS: true})
	e.Close()
	if err != nil {
		return nil, err
	}
	if len(res.Choices) == 0 || !slices.Equal(res.Choices[0].Tokens, tokens) {
		return nil, errors.New("the recording run gave other tokens than the measured one")
	}
	return rec.take(), nil
}

// evictBytes is the replay's cache-emptying buffer: twice this machine's L3.
const evictBytes = 64 << 20

// replayEngine runs the engine again on the recorded logits of recs (same
// prompt and sampling, seed 1, as the first request), with the caches
// emptied before each step if cold, and returns its median thread CPU time
// per decode token between Evals, µs. It fails if the replay does not
// reproduce the recorded tokens.
func (r *runner) replayEngine(ctx context.Context, p inference.Sampling, recs []evalRec, prompt, tokens []int32, cold bool) (float64, error) {
	if len(recs) < 3 {
		return 0, nil
	}
	tv := &timedVocab{v: r.tok}
	m := newRecorded(r.info, recs)
	if cold {
		m.evict = make([]byte, evictBytes)
	}
	rec := &recorder{m: m, v: tv, thread: true}
	e := inference.New(rec, tv, inference.Config{})
	runtime.GC()
	seed := int64(1)
	p.Seed = &seed
	res, _, _, err := request(ctx, e, inference.Request{Prompt: prompt, MaxTokens: len(tokens), Sampling: p, IgnoreEOS: true})
	e.Close()
	if err != nil {
		return 0, err
	}
	if len(res.Choices) == 0 || !slices.Equal(res.Choices[0].Tokens, tokens) {
		return 0, errors.New("replaying the recorded logits gave other tokens")
	}
	var out []float64
	for _, s := range decodeSteps(rec.take()) {
		if s.cpuOK {
			out = append(out, us(s.outsideCPU))
		}
	}
	return median(out), nil
}

// engineUS is the engine's median time per decode token outside Eval, µs.
type engineUS struct{ wall, cpu float64 }

// baseline replays tokens on a near-free model over a vocabulary of only
// the distinct tokens, with the same sampling settings and text, and
// returns the engine's median time outside Eval per decode token (wall, and
// the thread's CPU time): everything but the sampler's vocabulary-sized work.
func (r *runner) baseline(ctx context.Context, p inference.Sampling, tokens []int32, promptN int) (engineUS, error) {
	if len(tokens) < 3 {
		return engineUS{}, nil
	}
	script, ids := remap(tokens)
	rp := newReplay(script, len(ids), r.info.ContextLen, promptN)
	tv := &timedVocab{v: mappedVocab{v: r.tok, ids: ids}}
	rec := &recorder{m: rp, v: tv, thread: true} // as the measured runs
	var outside, outsideCPU []float64
	for run := range max(r.opt.Runs, 2) {
		e := inference.New(rec, tv, inference.Config{})
		runtime.GC()
		seed := int64(run + 1)
		p.Seed = &seed
		_, _, _, err := request(ctx, e, inference.Request{Prompt: make([]int32, promptN), MaxTokens: len(tokens), Sampling: p, IgnoreEOS: true})
		e.Close()
		if err != nil {
			return engineUS{}, err
		}
		for _, s := range decodeSteps(rec.take()) {
			outside = append(outside, us(s.outside))
			if s.cpuOK {
				outsideCPU = append(outsideCPU, us(s.outsideCPU))
			}
		}
	}
	return engineUS{median(outside), median(outsideCPU)}, nil
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

// streamPhase measures streaming efficiency in-process or over HTTP: per
// request, tokens ÷ (last token delivered − request sent) over tokens ÷
// (last token's model call done − request sent).
func (r *runner) streamPhase(ctx context.Context, promptN int, overHTTP bool) error {
	defer setLatency(r.emu)()
	tokens := min(r.opt.Tokens, 48)
	st := Streaming{Transport: "in-process", Emulation: r.emu, Tokens: tokens}
	if overHTTP {
		st.Transport = "http-sse"
	}
	rec := &recorder{m: r.model}
	e := inference.New(rec, r.tok, inference.Config{})
	defer e.Close()
	var effs, eng, del, dec, ttfts, delays, releases []float64
	for run := range r.opt.Runs {
		r.progress("  %s: request %d/%d (%d tokens)", st.Transport, run+1, r.opt.Runs, tokens)
		var t0, end time.Time
		var arr []time.Time
		if overHTTP {
			var err error
			t0, arr, end, err = r.sseRequest(ctx, e, tokens, run)
			if err != nil {
				rec.take()
				st.Error = err.Error()
				r.progress("  http-sse: %v", err)
				break
			}
		} else {
			p := r.benchPrompt(promptN)
			p[len(p)-1] = int32(run + 1000) // a different prompt each run
			var err error
			_, t0, arr, err = request(ctx, e, inference.Request{Prompt: p, MaxTokens: tokens, IgnoreEOS: true})
			if err != nil {
				return err
			}
		}
		recs := rec.take()
		if len(recs) < 2 || len(arr) == 0 {
			continue
		}
		first, last := arr[0], arr[len(arr)-1]
		if end.After(last) {
			last = end // the finish chunk of a turn that ended on end-of-turn
		}
		n := min(len(arr), len(recs)) // token i comes from model call i
		for i := range n {
			delays = append(delays, ms(arr[i].Sub(recs[i].end)))
			if i+1 < n && arr[i+1].Equal(arr[i]) { // same chunk as the next token
				st.HeldTokens++
			} else {
				releases = append(releases, ms(arr[i].Sub(recs[i].end)))
			}
		}
		nr := float64(len(recs))
		prod := recs[len(recs)-1].end.Sub(t0).Seconds()
		got := last.Sub(t0).Seconds()
		eng = append(eng, nr/prod)
		del = append(del, nr/got)
		effs = append(effs, prod/got)
		dec = append(dec, (nr-1)/recs[len(recs)-1].end.Sub(recs[0].end).Seconds())
		ttfts = append(ttfts, ms(first.Sub(t0)))
		st.Requests++
	}
	st.EngineTokS, st.DeliveredTokS, st.Efficiency = round3(median(eng)), round3(median(del)), round3(median(effs))
	st.DecodeTokS = round3(median(dec))
	st.TTFTMS = newDist(ttfts)
	st.TokenDelayMS, st.ReleaseDelayMS = newDist(delays), newDist(releases)
	r.rep.Streaming = append(r.rep.Streaming, st)
	return nil
}

// chatHistory builds a conversation whose rendered prompt has about n tokens.
func (r *runner) chatHistory(n int) []chat.Message {
	sentences := strings.SplitAfter(Paragraph, ". ")
	msgs := []chat.Message{{Role: "system", Content: "You are a concise assistant."}}
	for i := 0; ; i += 2 {
		if len(r.encode(msgs, true)) >= n || i+1 >= len(sentences) {
			break
		}
		msgs = append(msgs, chat.Message{Role: "user", Content: strings.TrimSpace(sentences[i])},
			chat.Message{Role: "assistant", Content: strings.TrimSpace(sentences[i+1])})
	}
	return append(msgs, chat.Message{Role: "user", Content: "Summarise that in one line."})
}

// encode renders and tokenizes messages the way the server does.
func (r *runner) encode(msgs []chat.Message, genPrompt bool) []int32 {
	segs, err := chat.RenderSegments(msgs, chat.Options{AddGenerationPrompt: genPrompt})
	if err != nil {
		return nil
	}
	ts := make([]tokenizer.Segment, len(segs))
	for i, s := range segs {
		ts[i] = tokenizer.Segment{Text: s.Text, Special: s.Special}
	}
	return r.tok.EncodeSegments(ts, false)
}

// prefixPhase times turn 2 of a chat with the cache holding turn 1, and
// on a fresh engine (no cached rows).
func (r *runner) prefixPhase(ctx context.Context) error {
	defer setLatency(r.emu)()
	pc := PrefixCache{Emulation: r.emu}
	hist := r.chatHistory(historyTokens)
	turn1 := r.encode(hist, true)
	if len(turn1)+prefixReplyToks+64 > r.info.ContextLen {
		r.progress("  skipped: a %d-token history does not fit the %d-token context", len(turn1), r.info.ContextLen)
		return nil
	}
	pc.HistoryTokens = len(turn1)
	var cached, uncached []float64
	for run := range r.opt.Runs {
		r.progress("  turn 2 with and without the cache %d/%d", run+1, r.opt.Runs)
		e := inference.New(r.model, r.tok, inference.Config{})
		res, _, _, err := request(ctx, e, inference.Request{Prompt: turn1, MaxTokens: prefixReplyToks, IgnoreEOS: true})
		if err != nil {
			e.Close()
			return err
		}
		reply := ""
		if len(res.Choices) > 0 {
			reply = res.Choices[0].Text
		}
		turn2 := r.encode(append(hist, chat.Message{Role: "assistant", Content: reply},
			chat.Message{Role: "user", Content: "Why?"}), true)
		pc.Turn2Tokens = len(turn2)
		t0 := time.Now()
		res, _, _, err = request(ctx, e, inference.Request{Prompt: turn2, MaxTokens: 1})
		d := time.Since(t0)
		e.Close()
		if err != nil {
			return err
		}
		cached = append(cached, ms(d))
		pc.CachedTokens = res.Usage.CachedTokens

		e = inference.New(r.model, r.tok, inference.Config{}) // a fresh engine: nothing cached
		t0 = time.Now()
		_, _, _, err = request(ctx, e, inference.Request{Prompt: turn2, MaxTokens: 1})
		d = time.Since(t0)
		e.Close()
		if err != nil {
			return err
		}
		uncached = append(uncached, ms(d))
	}
	pc.TTFTCachedMS, pc.TTFTUncachedMS = median(cached), median(uncached)
	if pc.TTFTUncachedMS > 0 {
		pc.Ratio = round3(pc.TTFTCachedMS / pc.TTFTUncachedMS)
	}
	r.rep.PrefixCache = pc
	return nil
}
