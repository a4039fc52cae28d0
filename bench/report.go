package bench

import (
	"time"
)

// Report is the whole result; its JSON form is `hexserve bench --json`.
type Report struct {
	Bundle      string         `json:"bundle"`
	Model       ModelSummary   `json:"model"`
	Quick       bool           `json:"quick"`
	Full        bool           `json:"full"`
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
	Concurrency *Concurrency   `json:"concurrency,omitempty"`
	Burst       *Burst         `json:"burst,omitempty"`
	Context     *Context       `json:"context,omitempty"`
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
	// the wall figure includes. The thread-clock readings' own cost
	// (ClockReadUS per interval between two readings) is left out, and each
	// part (inside Step, between Steps) is bounded by its wall time, see
	// RawCPUUS. N = 0: not measured.
	CPUUS Dist `json:"cpu_us"`
	// RawCPUUS is CPUUS as the thread clock reads it: the readings' cost
	// included, its parts not bounded by their wall times (on a VM whose
	// clock charges part of a graph call after the call, more than the host
	// did, docs/performance.md).
	RawCPUUS Dist `json:"cpu_raw_us"`
	// ClockReadUS is the engine thread's CPU time per thread-clock reading
	// (a system call), measured on that thread (median over the requests).
	ClockReadUS float64   `json:"clock_read_us"`
	CPUSplit    HostCPU   `json:"cpu_split_us"` // medians per token
	Thread      ThreadUse `json:"thread"`       // what the scheduler and the kernel did to that thread
	GraphMS     Dist      `json:"graph_ms"`     // inside graph execution, for scale
	Split       HostUS    `json:"split_us"`     // medians per token
	IO          IOSplit   `json:"io_us"`        // medians per token
}

// HostCPU splits CPUUS: the medians of its parts.
type HostCPU struct {
	ModelIO  float64 `json:"model_io"` // inside Step outside graph calls: the runner's I/O and the calls' own overhead
	Engine   float64 `json:"engine"`   // between Steps: sampling, detokenising, text, events
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
	// EngineMinorFaults counts only the faults between Steps (the engine's own work).
	EngineMinorFaults float64 `json:"engine_minor_faults"`
}

// HostUS splits the host time per decode token: the median of each part
// (medians need not add up to the total's).
type HostUS struct {
	Sampling   float64 `json:"sampling"`   // engine time outside Step minus the small-vocabulary baseline's
	ModelIO    float64 `json:"model_io"`   // embedding, RoPE, mask, KV copy, lm-head input
	Detokenise float64 `json:"detokenise"` // vocabulary lookups (Piece, IsSpecial)
	Rest       float64 `json:"rest"`       // text, stop handling, events, bookkeeping
}

// IOSplit is the runner's host-side work per decode token.
type IOSplit struct {
	Embed  float64 `json:"embed"`
	Rope   float64 `json:"rope"`
	Mask   float64 `json:"mask"`
	KVCopy float64 `json:"kv_copy"` // on the critical path (included in host time)
	// KVCopyBackground is the KV copy the model ran on other threads, off
	// the critical path (overlapping graph calls and sampling), between two
	// Step starts; not part of host time (or of the host thread's CPU time).
	KVCopyBackground float64 `json:"kv_copy_background"`
	Convert          float64 `json:"convert"`
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
