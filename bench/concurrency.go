package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hexserve/hexserve/inference"
)

// Concurrency goals (issue 25; the stream and n goals are .pte's, each
// other kind's are in streamGoals).
const (
	GoalConc4X        = 3.5  // 4 streams' aggregate tok/s ÷ one stream
	GoalConc4XChunked = 2.3  // on a chunked bundle (ceiling ≈ 2.65× at v79 costs)
	GoalConc4XQHexRT  = 0.95 // on a QHexRT-contract bundle (sequences take turns)
	GoalConc4XGenie   = 1.8  // on a Genie bundle (issue 42)
	GoalConc8X        = 6    // 8 streams
	GoalConc8XGenie   = 3.5  // 8 streams on a Genie bundle
	GoalConc16X       = 12   // 16 streams, on a context of conc16Context or more
	GoalConcN4X       = 3    // n = 4 side by side ÷ n = 4 one after another
	GoalConcTTFT      = 0.5  // s, p50 TTFT of a short request during 4-stream load
	GoalConcAlone     = 0.98 // one stream side-by-side engine ÷ one-at-a-time engine
	conc16Context     = 4096 // the 16-stream workload needs this context (16 sequences' slots)
)

// Concurrency is the concurrency phase's result: the same workloads on an
// engine that runs one request at a time (max_sequences 1, today's
// behaviour) and on one that runs up to 8 sequences side by side.
type Concurrency struct {
	// Kind is the model kind the goals are for (modelKind): "pte", or
	// the runner's contract ("genie"; a QHexRT bundle's "chunked",
	// "qhexrt").
	Kind         string  `json:"kind"`
	Emulation    Latency `json:"emulation"`
	PromptTokens int     `json:"prompt_tokens"`
	OutputTokens int     `json:"output_tokens"` // per stream
	Runs         int     `json:"runs"`          // runs per side-by-side figure and of one stream alone (median); one for the others
	// Aggregate generated tok/s (tokens ÷ wall time from submit to the last
	// Done) by streams, for each engine.
	Serial     map[string]float64 `json:"serial_tok_per_s"`
	SideBySide map[string]float64 `json:"side_by_side_tok_per_s"`
	// TTFT of a 4-token request sent while 4 streams run (side by side),
	// and one such request on the one-at-a-time engine.
	// Per side-by-side workload: graph calls (all shards) per token and
	// their mean time (hostsim computes every row of a call, padding
	// included, so a call can take longer than the emulated floor), and
	// the host's share of the wall time (outside graph calls).
	CallsPerToken map[string]float64 `json:"side_by_side_calls_per_token"`
	CallMS        map[string]float64 `json:"side_by_side_graph_ms_per_call"`
	HostShare     map[string]float64 `json:"side_by_side_host_share"`
	// The engine's own count (Engine.StepTimes): the host's share of its
	// steps' time (planning, sampling, text, events against Step calls),
	// idle time between requests excluded.
	StepHostShare map[string]float64 `json:"side_by_side_step_host_share"`
	TTFTMS        Dist               `json:"ttft_ms_under_load"`
	SerialTTFTMS  float64            `json:"serial_ttft_ms_under_load"` // 0: not measured (only with Full)
	// Ceiling is each workload's bound from the model's measured call costs
	// (inference.Batcher.StepCost at the end of the side-by-side runs):
	// for N rows a step, N × cost(1-row step) ÷ cost(N-row step), the
	// ratio to one stream that a perfect scheduler would reach ("1": the
	// side-by-side ÷ one-at-a-time ratio, 1). TTFTCeilingMS is one step
	// carrying the 4 load rows and the short request's prompt.
	Ceiling       map[string]float64 `json:"ceiling_x"`
	TTFTCeilingMS float64            `json:"ttft_ceiling_ms"`
	// CallCostMS is the runner's learned cost of one call of each graph at
	// the end of the side-by-side runs (inference.GraphTotal.Cost: recent
	// calls, all shards), what its StepCost weighs.
	CallCostMS map[string]float64 `json:"graph_call_cost_ms,omitempty"`
	Error      string             `json:"error,omitempty"`
}

// concurrencyKeys are the workloads in report order: streams side by side
// ("1", "4", "8", "16") and one request with n = 4 ("n4").
var concurrencyKeys = []string{"1", "4", "8", "16", "n4"}

// workloadRows is how many rows a decode step of workload key carries.
func workloadRows(key string) int {
	if key == "n4" {
		return 4
	}
	n := 0
	fmt.Sscan(key, &n)
	return n
}

// concurrencyPhase measures issue 25's goals. It needs a model whose pool
// holds several sequences; others are skipped.
func (r *runner) concurrencyPhase(ctx context.Context) error {
	if r.model.BatchLimits().Sequences < 2 {
		r.progress("  skipped: the model runs one sequence at a time (BatchLimits().Sequences is 1)")
		return nil
	}
	emu := r.emu
	if !separateLMHead(r.model) { // a .pte's decode call includes its lm-head
		emu = Latency{PrefillUS: r.emu.PrefillUS, DecodeUS: r.emu.DecodeUS + r.emu.LMHeadUS}
	}
	defer setLatency(emu)()
	out, kind := r.opt.Tokens, modelKind(r.model)
	prompt := r.tok.Encode("Write a short story about a lighthouse keeper and a storm.", true, false)
	c := &Concurrency{Kind: kind, Emulation: emu, PromptTokens: len(prompt), OutputTokens: out,
		Serial: map[string]float64{}, SideBySide: map[string]float64{}, Ceiling: map[string]float64{},
		CallsPerToken: map[string]float64{}, CallMS: map[string]float64{}, HostShare: map[string]float64{}, StepHostShare: map[string]float64{}}
	r.rep.Concurrency = c
	req := func(n int) inference.Request {
		return inference.Request{Prompt: prompt, MaxTokens: out, N: n, IgnoreEOS: true}
	}
	// Sequences side by side: 16 when the window holds them (ContextLen is
	// the window less the one token a reply needs).
	wide := 8
	if r.info.ContextLen+1 >= conc16Context {
		wide = 16
	} else {
		r.progress("  16 streams: skipped, the %d-token window is below %d (mkmodel --ctx %d)", r.info.ContextLen+1, conc16Context, conc16Context)
	}
	for _, mode := range []struct {
		seqs int
		res  map[string]float64
	}{{1, c.Serial}, {wide, c.SideBySide}} {
		e := inference.New(r.model, r.tok, inference.Config{MaxSequences: mode.seqs, QueueLen: 32})
		if _, err := streams(ctx, e, req(1), 1); err != nil { // warm-up: both graphs measured
			e.Close()
			return err
		}
		for _, k := range []struct {
			key     string
			streams int
			n       int
		}{{"1", 1, 1}, {"4", 4, 1}, {"8", 8, 1}, {"16", 16, 1}, {"n4", 1, 4}} {
			if mode.seqs == 1 && k.streams > 4 {
				continue // 8 or 16 one after another say nothing that 4 do not
			}
			if k.streams > wide {
				continue
			}
			if !r.opt.Full && !goalReads(kind, mode.seqs > 1, k.key) {
				continue // no goal reads it; --full runs it
			}
			r.progress("  max_sequences %d: %s", mode.seqs, k.key)
			g0, t0 := graphTotals(r.model), time.Now()
			h0, m0 := e.StepTimes()
			var all []float64
			for range r.runsFor(mode.seqs, k.key) {
				tps, err := streams(ctx, e, req(k.n), k.streams)
				if err != nil {
					e.Close()
					return err
				}
				all = append(all, tps)
			}
			mode.res[k.key] = median(all)
			if g1 := graphTotals(r.model); mode.seqs > 1 && g1.Calls > g0.Calls {
				calls, d := g1.Calls-g0.Calls, g1.Time-g0.Time
				c.CallsPerToken[k.key] = round3(float64(calls) / float64(out*k.streams*k.n*len(all)))
				c.CallMS[k.key] = round3(ms(d) / float64(calls))
				c.HostShare[k.key] = round3(1 - d.Seconds()/time.Since(t0).Seconds())
				h1, m1 := e.StepTimes()
				c.StepHostShare[k.key] = round3((h1 - h0).Seconds() / (h1 - h0 + m1 - m0).Seconds())
			}
			c.Runs = r.opt.Runs
		}
		if mode.seqs == 1 && !r.opt.Full {
			e.Close() // one at a time, the short request waits for the whole load: --full measures it
			continue
		}
		samples := 5
		if mode.seqs == 1 {
			samples = 1
		}
		ttft, err := ttftUnderLoad(ctx, e, req(1), prompt[:4], samples)
		e.Close()
		if err != nil {
			return err
		}
		if mode.seqs == 1 {
			c.SerialTTFTMS = ttft.P50
		} else {
			c.TTFTMS = ttft
		}
	}
	c.ceilings(r.model.(inference.Batcher))
	if gt, ok := r.model.(inference.GraphTimer); ok {
		c.CallCostMS = map[string]float64{}
		for _, g := range gt.GraphTotals() {
			c.CallCostMS[g.Graph] = round3(ms(g.Cost))
		}
	}
	return nil
}

// stepCoster prices a step of rows from measured call costs (an
// inference.Batcher's StepCost).
type stepCoster interface {
	StepCost(rows int) time.Duration
}

// ceilings sets each workload's ceiling from b's measured call costs.
func (c *Concurrency) ceilings(b stepCoster) {
	one := b.StepCost(1)
	for _, k := range concurrencyKeys {
		if _, ran := c.SideBySide[k]; !ran {
			continue
		}
		n := workloadRows(k)
		if cost := b.StepCost(n); cost > 0 && one > 0 {
			c.Ceiling[k] = round3(float64(n) * one.Seconds() / cost.Seconds())
		}
	}
	c.Ceiling["1"] = 1
	c.TTFTCeilingMS = round3(ms(b.StepCost(4 + 4)))
}

// streams runs k copies of req at once and returns their generated tokens
// per second of wall time.
func streams(ctx context.Context, e *inference.Engine, req inference.Request, k int) (float64, error) {
	reqs := make([]inference.Request, k)
	for i := range reqs {
		reqs[i] = req
	}
	return atOnce(ctx, e, reqs)
}

// atOnce submits reqs at once and returns their generated tokens per second
// of wall time, from the first submit to the last Done.
func atOnce(ctx context.Context, e *inference.Engine, reqs []inference.Request) (float64, error) {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(reqs))
	toks := make([]int, len(reqs))
	for i, req := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := e.Submit(ctx, req)
			if err == nil {
				var res inference.Result
				res, err = inference.Collect(s)
				toks[i] = res.Usage.CompletionTokens
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	total := 0
	for i, err := range errs {
		if err != nil {
			return 0, err
		}
		total += toks[i]
	}
	return float64(total) / time.Since(start).Seconds(), nil
}

// ttftUnderLoad starts 4 streams of load, then sends samples short
// requests (4 prompt tokens, 1 output token) one after another while they
// run, and returns their times to first token. The load is cancelled once
// the samples are in (what it would generate after them is not measured).
func ttftUnderLoad(ctx context.Context, e *inference.Engine, load inference.Request, short []int32, samples int) (Dist, error) {
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	loadErr := make([]error, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := e.Submit(lctx, load)
			if err == nil {
				_, err = inference.Collect(s)
			}
			loadErr[i] = err
		}()
	}
	time.Sleep(500 * time.Millisecond) // the load is decoding
	var xs []float64
	for range samples {
		t0 := time.Now()
		s, err := e.Submit(ctx, inference.Request{Prompt: slices.Clone(short), MaxTokens: 1})
		if err != nil {
			return Dist{}, err
		}
		first := true
		for ev := range s.Events() {
			if first && (len(ev.Tokens) > 0 || ev.Done) {
				xs = append(xs, float64(time.Since(t0).Microseconds())/1000)
				first = false
			}
			if ev.Done && ev.Err != nil {
				return Dist{}, fmt.Errorf("short request: %w", ev.Err)
			}
		}
	}
	cancelled := lctx.Err() == nil && ctx.Err() == nil
	stop()
	wg.Wait()
	for _, err := range loadErr {
		if err != nil && !(cancelled && errors.Is(err, context.Canceled)) {
			return Dist{}, err
		}
	}
	return newDist(xs), nil
}

// streamGoal is a goal on a side-by-side workload's aggregate tok/s ÷ one
// stream's ("n4": ÷ n = 4 one after another).
type streamGoal struct {
	key string // the workload: "4", "8", "16" streams or "n4"
	min float64
}

// streamGoals are each model kind's workload goals; a kind not listed
// takes the .pte's.
var streamGoals = map[string][]streamGoal{
	"pte":     {{"4", GoalConc4X}, {"8", GoalConc8X}, {"16", GoalConc16X}, {"n4", GoalConcN4X}},
	"genie":   {{"4", GoalConc4XGenie}, {"8", GoalConc8XGenie}},
	"chunked": {{"4", GoalConc4XChunked}},
	"qhexrt":  {{"4", GoalConc4XQHexRT}},
}

func kindGoals(kind string) []streamGoal {
	if gs, ok := streamGoals[kind]; ok {
		return gs
	}
	return streamGoals["pte"]
}

// goalReads reports whether a goal of kind reads workload key on the
// side-by-side engine (sideBySide) or the one-at-a-time one: one stream
// on both, the kind's workloads side by side, n = 4 on both where the
// kind has its goal.
func goalReads(kind string, sideBySide bool, key string) bool {
	for _, g := range kindGoals(kind) {
		if g.key == key && (sideBySide || key == "n4") {
			return true
		}
	}
	return key == "1"
}

// concurrencyGoals evaluates the phase against issue 25's goals (issue 42's
// for a Genie bundle).
func concurrencyGoals(c *Concurrency) []Goal {
	if c == nil || c.Error != "" || c.SideBySide["1"] == 0 || c.Serial["1"] == 0 {
		return nil
	}
	one := c.SideBySide["1"]
	withCeiling := func(g Goal, key string) Goal {
		g.Ceiling = c.Ceiling[key]
		return g
	}
	var gs []Goal
	for _, sg := range kindGoals(c.Kind) {
		v, ok := c.SideBySide[sg.key]
		if !ok && sg.key == "16" {
			continue // the window is below conc16Context: not run
		}
		name, den := "concurrency_"+sg.key+"_streams_x", one
		what := fmt.Sprintf("aggregate tok/s of %s streams ÷ one stream, side by side", sg.key)
		switch sg.key {
		case "16":
			what += fmt.Sprintf(", context ≥ %d", conc16Context)
		case "n4":
			name, den, what = "concurrency_n4_x", c.Serial["n4"], "n = 4 side by side ÷ n = 4 one after another"
		}
		if c.Kind != "pte" {
			what += ", " + c.Kind + " bundle"
		}
		gs = append(gs, withCeiling(goal(name, round3(v/den), ">=", sg.min, "×", what), sg.key))
	}
	note := fmt.Sprintf("4-token request during 4-stream load; p99 %.3f s", c.TTFTMS.P99/1000)
	if c.SerialTTFTMS > 0 {
		note += fmt.Sprintf("; one at a time: %.3f s", c.SerialTTFTMS/1000)
	}
	ttft := goal("concurrency_ttft_p50_s", round3(c.TTFTMS.P50/1000), "<=", GoalConcTTFT, "s", note)
	ttft.Ceiling = round3(c.TTFTCeilingMS / 1000)
	return append(gs, ttft,
		withCeiling(goal("concurrency_one_stream_x", round3(one/c.Serial["1"]), ">=", GoalConcAlone, "×", "one stream, side-by-side engine ÷ one-at-a-time engine"), "1"),
	)
}

// modelKind is "pte", or a QHexRT bundle's contract.
func modelKind(m inference.Model) string {
	if c, ok := m.(interface{ Contract() string }); ok {
		return c.Contract()
	}
	return "pte"
}

// separateLMHead reports whether m runs its lm-head as a graph of its own
// (a QHexRT bundle), which hostsim then delays by its lm-head floor.
func separateLMHead(m inference.Model) bool {
	k, ok := m.(interface{ GraphKey(role string) string })
	return ok && k.GraphKey("lmhead") != ""
}

// graphTotals sums a model's graph counters (zero without inference.GraphTimer).
func graphTotals(m inference.Model) inference.GraphTotal {
	var t inference.GraphTotal
	if gt, ok := m.(inference.GraphTimer); ok {
		for _, g := range gt.GraphTotals() {
			t.Calls += g.Calls
			t.Time += g.Time
		}
	}
	return t
}

// runsFor is how many times a workload runs (its median is reported):
// Options.Runs for one stream alone (the denominator of every ratio);
// r.fewRuns() for the side-by-side multi-stream workloads (an aggregate
// over 4 to 16 streams' steps); once for the slow one-at-a-time
// multi-stream runs.
func (r *runner) runsFor(seqs int, key string) int {
	switch {
	case key == "1":
		return r.opt.Runs
	case seqs > 1:
		return r.fewRuns()
	}
	return 1
}
