package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/bench"
	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/hexagon/plan"
)

// benchMain implements `hexserve bench`.
func benchMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("bench", stdout, stderr)
	path := fs.String("config", "", "YAML config `file` (as for serve: model.path, model.libraries, ...)")
	modelPath := fs.String("model", "", "model `path` as for serve: bundle, manifest, .pte or a folder holding one (replaces model.path)")
	fs.StringVar(modelPath, "bundle", "", "alias of --model")
	asJSON := fs.Bool("json", false, "write the report as JSON on stdout (default: tables)")
	overHTTP := fs.Bool("http", false, "also stream through the HTTP server on loopback to SSE clients")
	quick := fs.Bool("quick", false, "a few seconds: fewer tokens and runs, latency emulation at 1/10")
	full := fs.Bool("full", false, "the whole workload (about 15 minutes on the tiny bundle): every measurement --runs times, 4 conversations × 6 turns both ways, every concurrency workload (default: fewer, well-chosen runs, under 5 minutes on the tiny bundle)")
	emulate := fs.Bool("emulate-v79", true, "set hostsim's latency floors to the v79 figures (plan.V79Costs: prefill 64.5 ms/call, decode 55 ms + lm-head 7.5 ms) for the streaming and prefix-cache phases")
	tokens := fs.Int("tokens", 0, "decode tokens per request (0: 64, quick 16)")
	runs := fs.Int("runs", 0, "requests per measurement (0: 3, quick 1; set, it applies to every measurement, as with --full)")
	prompt := fs.Int("prompt", 0, "prompt tokens in the throughput and streaming phases (0: one prefill window)")
	phases := fs.String("phases", "", "comma-separated `phases` to run: "+strings.Join(bench.PhaseKeys, ",")+" (default all but context; http needs --http)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to `file`")
	memprofile := fs.String("memprofile", "", "write a heap profile at the end to `file`")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: hexserve bench [flags]\n\nRuns the fixed workload of docs/performance.md on a bundle and reports\nthroughput, host time per token, streaming efficiency, prefix-cache gain,\nmemory and tokenizer speed against the goals. Progress goes to stderr.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if code, ok := parseNoArgs(fs, args, stderr); !ok {
		return code
	}
	cfg, err := benchConfig(*path, *modelPath)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if *quick && *full {
		fmt.Fprintln(stderr, "hexserve bench: --quick and --full exclude each other")
		return 2
	}
	phaseList, err := benchPhases(*phases)
	if err != nil {
		fmt.Fprintln(stderr, "hexserve bench:", err)
		return 2
	}
	if *cpuprofile != "" {
		stop, err := startCPUProfile(*cpuprofile)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer stop()
	}

	log := zerolog.New(zerolog.ConsoleWriter{Out: stderr, NoColor: true}).Level(zerolog.WarnLevel).With().Timestamp().Logger()
	var emu bench.Latency
	if *emulate {
		emu = emulation(cfg.Model.Location())
	}
	opt := bench.Options{
		Bundle: cfg.Model.Location(), Quick: *quick, Full: *full, HTTP: *overHTTP, Emulation: emu,
		Tokens: *tokens, Runs: *runs, PromptTokens: *prompt, Progress: stderr, Phases: phaseList, MaxSequences: cfg.Engine.MaxSequences,
		Load: func() (bench.Loaded, error) { return benchLoad(cfg, log) },
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, opt)
	if err != nil {
		fmt.Fprintln(stderr, "hexserve bench:", err)
		return 1
	}
	if *memprofile != "" {
		if err := writeHeapProfile(*memprofile); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	if err := writeBenchReport(stdout, rep, *asJSON); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// writeBenchReport writes rep as tables, or as indented JSON.
func writeBenchReport(w io.Writer, rep *bench.Report, asJSON bool) error {
	if !asJSON {
		return bench.WriteText(w, rep)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// benchConfig is --config's configuration (the defaults without one) with --model's path,
// validated; the model's path is required.
func benchConfig(path, model string) (config.Config, error) {
	cfg := config.Default()
	if path != "" {
		var err error
		if cfg, err = config.Load(path); err != nil {
			return cfg, err
		}
	}
	if model != "" {
		cfg.Model.SetLocation(model)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	if cfg.Model.Location() == "" {
		return cfg, errors.New("hexserve bench: --model (or model.path in --config) is required")
	}
	return cfg, nil
}

// benchPhases is --phases' list ("": every phase).
func benchPhases(list string) ([]string, error) {
	if list == "" {
		return nil, nil
	}
	var out []string
	for _, p := range strings.Split(list, ",") {
		if !slices.Contains(bench.PhaseKeys, p) {
			return nil, fmt.Errorf("unknown phase %q (have %s)", p, strings.Join(bench.PhaseKeys, ", "))
		}
		out = append(out, p)
	}
	return out, nil
}

// emulation is --emulate-v79's latency for the model at path: its format's (format.emulation),
// else plan.V79Costs'.
func emulation(path string) bench.Latency {
	if kind, _, err := locateModel(path); err == nil && kind.emulation != (bench.Latency{}) {
		return kind.emulation
	}
	c := plan.V79Costs
	return bench.Latency{PrefillUS: int(c.Prefill.Microseconds()), DecodeUS: int(c.Decode.Microseconds()), LMHeadUS: int(c.LMHead.Microseconds())}
}

// startCPUProfile profiles the process's CPU into a new file at path until stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// writeHeapProfile writes a heap profile, after a GC, to a new file at path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	return errors.Join(pprof.WriteHeapProfile(f), f.Close())
}

// benchLoad loads the model as serve does; a model with graph statistics (every runner) has
// them read as bench's counters.
func benchLoad(cfg config.Config, log zerolog.Logger) (bench.Loaded, error) {
	o, _, err := openModel(cfg, log)
	if err != nil {
		return bench.Loaded{}, err
	}
	ld := bench.Loaded{Model: o.model, Tokenizer: o.tok, Dir: o.dir}
	if s, ok := o.model.(statser); ok {
		ld.Counters = func() bench.Counters { return counters(s.Stats()) }
	}
	if t, ok := o.model.(threadTimer); ok {
		t.TimeThreadCPU() // the host phase's graph CPU time (off in serve)
	}
	return ld, nil
}

// statser is a model that reports its graph statistics.
type statser interface{ Stats() plan.Stats }

// threadTimer is a runner that can time its graph calls' thread CPU.
type threadTimer interface{ TimeThreadCPU() }

// genieV79 is the emulation of a Genie bundle: AI Hub's Llama 3.2 1B w4a16 on the Snapdragon 8 Elite
// (perf.yaml: TTFT 37 ms for a prompt ≤ 128 tokens, 53.6 tok/s: one AR-128 step 37 ms, one AR-1
// step 18.6 ms, all parts together; the lm-head is in the last part).
var genieV79 = bench.Latency{PrefillUS: 37000, DecodeUS: 18600}

// counters sums the graphs' times; re-striding (.pte) counts as KV copy.
func counters(s plan.Stats) bench.Counters {
	var g bench.Counters
	for _, gs := range s.Graphs {
		g.Graph += gs.Time
		g.GraphCPU += gs.CPU
		g.Calls += gs.Calls
	}
	g.Embed, g.Rope, g.Mask, g.KVCopy, g.Convert = s.Embed, s.Rope, s.Mask, s.KVCopy+s.Restride, s.Convert
	return g
}
