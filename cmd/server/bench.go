package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
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
	cfg := config.Default()
	if *path != "" {
		var err error
		if cfg, err = config.Load(*path); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}
	if *modelPath != "" {
		cfg.Model.SetLocation(*modelPath)
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if *quick && *full {
		fmt.Fprintln(stderr, "hexserve bench: --quick and --full exclude each other")
		return 2
	}
	if cfg.Model.Location() == "" {
		fmt.Fprintln(stderr, "hexserve bench: --model (or model.path in --config) is required")
		return 2
	}

	var phaseList []string
	if *phases != "" {
		for _, p := range strings.Split(*phases, ",") {
			if !slices.Contains(bench.PhaseKeys, p) {
				fmt.Fprintf(stderr, "hexserve bench: unknown phase %q (have %s)\n", p, strings.Join(bench.PhaseKeys, ", "))
				return 2
			}
			phaseList = append(phaseList, p)
		}
	}

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}

	log := zerolog.New(zerolog.ConsoleWriter{Out: stderr, NoColor: true}).Level(zerolog.WarnLevel).With().Timestamp().Logger()
	var emu bench.Latency
	if *emulate {
		c := plan.V79Costs
		emu = bench.Latency{PrefillUS: int(c.Prefill.Microseconds()), DecodeUS: int(c.Decode.Microseconds()), LMHeadUS: int(c.LMHead.Microseconds())}
		if kind, _, err := locateModel(cfg.Model.Location()); err == nil && kind == kindGenie {
			emu = genieV79 // AI Hub's published Llama 3.2 1B w4a16 figures on the 8 Elite
		}
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
		f, err := os.Create(*memprofile)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		runtime.GC()
		err = pprof.WriteHeapProfile(f)
		f.Close()
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = bench.WriteText(stdout, rep)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// benchLoad loads the model as serve does and adapts its runner's counters.
func benchLoad(cfg config.Config, log zerolog.Logger) (bench.Loaded, error) {
	m, tok, _, err := loadModel(cfg, log)
	if err != nil {
		return bench.Loaded{}, err
	}
	if g, ok := m.(*ownedGenie); ok {
		return bench.Loaded{Model: genieCounters{g}, Tokenizer: tok, Dir: cfg.Model.Location()}, nil
	}
	if p, ok := m.(*ownedPTE); ok {
		_, file, _ := locateModel(cfg.Model.Location())
		return bench.Loaded{Model: pteCounters{p}, Tokenizer: tok, Dir: filepath.Dir(file)}, nil
	}
	o, ok := m.(*ownedRuntime)
	if !ok {
		return bench.Loaded{Model: bench.NoCounters(m), Tokenizer: tok}, nil
	}
	return bench.Loaded{Model: runnerCounters{o}, Tokenizer: tok, Dir: o.dir}, nil

}

// runnerCounters and pteCounters adapt the two runners' Stats to
// bench.Counters; the runners' other methods (KV snapshots, Contract)
// stay visible.
type runnerCounters struct{ *ownedRuntime }

type pteCounters struct{ *ownedPTE }

type genieCounters struct{ *ownedGenie }

func (r genieCounters) Counters() bench.Counters { return counters(r.Stats()) }

// genieV79 is the emulation of a Genie bundle: AI Hub's Llama 3.2 1B w4a16 on the Snapdragon 8 Elite
// (perf.yaml: TTFT 37 ms for a prompt ≤ 128 tokens, 53.6 tok/s: one AR-128 step 37 ms, one AR-1
// step 18.6 ms, all parts together; the lm-head is in the last part).
var genieV79 = bench.Latency{PrefillUS: 37000, DecodeUS: 18600}

func (r runnerCounters) Counters() bench.Counters { return counters(r.Stats()) }
func (r pteCounters) Counters() bench.Counters    { return counters(r.Stats()) }

// counters sums the graphs' times; re-striding (.pte) counts as KV copy.
func counters(s plan.Stats) bench.Counters {
	var g bench.Counters
	for _, gs := range s.Graphs {
		g.Graph += gs.Time
		g.GraphCPU += gs.CPU
	}
	g.Embed, g.Rope, g.Mask, g.KVCopy, g.Convert = s.Embed, s.Rope, s.Mask, s.KVCopy+s.Restride, s.Convert
	return g
}
