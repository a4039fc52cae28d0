package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hexserve/hexserve/inference"

	"github.com/hexserve/hexserve/inference/inferencetest"
	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/internal/threadcpu"
	"github.com/hexserve/hexserve/tokenizer"
)

const tokenizerPath = "../testdata/tokenizer/llama3.2/tokenizer.json"

func loadTokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.Load(tokenizerPath)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestRunScripted runs the whole quick workload, HTTP included, on a
// scripted model and checks that every section of the report is filled.
func TestRunScripted(t *testing.T) {
	tok := loadTokenizer(t)
	script := tok.Encode(" The quick brown fox jumps over the lazy dog.", false, false)
	var progress bytes.Buffer
	rep, err := Run(context.Background(), Options{
		Bundle: "scripted", Quick: true, HTTP: true, Emulation: Latency{PrefillUS: 64500, DecodeUS: 55000, LMHeadUS: 7500}, Progress: &progress,
		Load: func() (Loaded, error) {
			m := inferencetest.NewScripted(inference.ModelInfo{Name: "scripted", BOS: 128000, EOS: []int32{128009}}, script)
			m.Record(false)
			return Loaded{Model: &snapModel{Model: m}, Tokenizer: tok, Dir: t.TempDir()}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Model.Vocab != 128256 || rep.Workload.PromptTokens != 128 || rep.Workload.DecodeTokens != 16 {
		t.Errorf("model %+v, workload %+v", rep.Model, rep.Workload)
	}
	if len(rep.Host) != 2 || len(rep.Native) != 2 {
		t.Fatalf("%d host-time and %d throughput entries, want 2 each", len(rep.Host), len(rep.Native))
	}
	for _, h := range rep.Host {
		// 16 tokens: the first comes from the prompt's call, the last has no next call.
		if h.TotalUS.N != 14 || h.TotalUS.P50 <= 0 || h.Vocab != 128256 {
			t.Errorf("%s: host time %+v", h.Sampling, h)
		}
		if _, ok := threadcpu.Time(); ok && (h.CPUUS.N != 14 || h.CPUUS.P50 <= 0) {
			t.Errorf("%s: thread CPU time %+v, want 14 tokens (no graph time to subtract)", h.Sampling, h.CPUUS)
		}
		if _, ok := threadcpu.Time(); ok && (h.CPUSplit.Engine <= 0 || h.CPUSplit.EngineWarm <= 0 || h.CPUSplit.EngineCold <= 0) {
			t.Errorf("%s: CPU split %+v, want the engine's time live and replayed", h.Sampling, h.CPUSplit)
		}
	}
	for _, n := range rep.Native {
		if n.PrefillTokS.P50 <= 0 || n.DecodeTokS <= 0 || n.TTFTMS.N != 1 {
			t.Errorf("%s: throughput %+v", n.Sampling, n)
		}
	}
	if len(rep.Streaming) != 2 {
		t.Fatalf("streaming entries: %+v", rep.Streaming)
	}
	for _, s := range rep.Streaming {
		if s.Error != "" {
			t.Errorf("%s: %s", s.Transport, s.Error)
			continue
		}
		if s.Requests != 1 || s.Efficiency <= 0 || s.Efficiency > 1 || s.EngineTokS <= 0 ||
			s.TokenDelayMS.N < 2 || s.TokenDelayMS.Min < 0 || s.TokenDelayMS.P99 < s.TokenDelayMS.P50 {
			t.Errorf("%s: %+v", s.Transport, s)
		}
	}
	pc := rep.PrefixCache
	if pc.HistoryTokens < historyTokens || pc.Turn2Tokens <= pc.HistoryTokens || pc.CachedTokens < pc.HistoryTokens-1 || pc.Ratio <= 0 {
		t.Errorf("prefix cache %+v", pc)
	}
	if len(rep.Memory.Snapshots) != 3 {
		t.Errorf("memory snapshots: %+v", rep.Memory.Snapshots)
	}
	if _, err := os.Stat("/proc/self/status"); err == nil && rep.Memory.Snapshots[1].VmRSS == 0 {
		t.Error("VmRSS not read")
	}
	if rep.Tokenizer.Bytes != 32*len(Paragraph) || rep.Tokenizer.Tokens == 0 || rep.Tokenizer.MBps.P50 <= 0 {
		t.Errorf("tokenizer %+v", rep.Tokenizer)
	}
	names := map[string]bool{}
	for _, g := range rep.Goals {
		names[g.Name] = true
	}
	for _, want := range []string{"host_us_per_decode_token/greedy", "host_us_per_decode_token/t0.7_p0.9_penalties",
		"streaming_efficiency", "prefix_cache_ttft_ratio", "go_side_rss_mb", "tokenizer_mb_per_s",
		"constraint_us_per_token_p50", "constraint_us_per_token_p99", "schema_compile_ms"} {
		if !names[want] {
			t.Errorf("goal %s missing from %+v", want, rep.Goals)
		}
	}
	if len(rep.Speculative) != 0 || !strings.Contains(progress.String(), "skipped: the model does not verify drafts") {
		t.Errorf("speculative phase on a model without Verifier: %+v", rep.Speculative)
	}
	if k := rep.KVStore; k.Skipped != "" || len(k.Detail) != 2*3 || k.ShortTurns != 0 || k.Store.Entries != 2 || k.TTFTWithoutMS <= 0 {
		t.Errorf("kv store %+v", k)
	}
	if st := rep.Structured; st == nil || st.Tokens != len(BenchSchemas)*structuredTokens/5 || st.MaskUS.P50 <= 0 || st.CompileMS.N != len(BenchSchemas) {
		t.Errorf("structured %+v", st)
	}
	if !strings.Contains(progress.String(), "bench: [8/10] structured outputs") || !strings.Contains(progress.String(), "skipped: the model runs one sequence at a time") || rep.Concurrency != nil || rep.Burst != nil {
		t.Errorf("progress:\n%s", progress.String())
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"host_time", "streaming", "prefix_cache", "kv_store", "memory", "tokenizer", "goals", "throughput_native"} {
		if back[k] == nil {
			t.Errorf("JSON has no %q", k)
		}
	}
	var text bytes.Buffer
	if err := WriteText(&text, rep); err != nil || !strings.Contains(text.String(), "GOAL") {
		t.Errorf("WriteText: %v\n%s", err, text.String())
	}
}

func TestParagraph(t *testing.T) {
	f, err := os.ReadFile("../testdata/tokenizer/golden_public.jsonl")
	if err != nil {
		t.Skip("no tokenizer goldens:", err)
	}
	for _, line := range strings.Split(string(f), "\n") {
		var g struct{ Category, Text string }
		if json.Unmarshal([]byte(line), &g) == nil && g.Category == "paragraph_20k" {
			if g.Text != Paragraph || len(Paragraph) != 20495 {
				t.Fatalf("embedded paragraph (%d bytes) differs from the golden (%d bytes)", len(Paragraph), len(g.Text))
			}
			return
		}
	}
	t.Fatal("no paragraph_20k golden")
}

func TestDist(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want Dist
	}{
		{nil, Dist{}},
		{[]float64{5}, Dist{N: 1, Mean: 5, P50: 5, P99: 5, Min: 5, Max: 5}},
		{[]float64{4, 1, 3, 2}, Dist{N: 4, Mean: 2.5, P50: 2, P99: 4, Min: 1, Max: 4}},
	} {
		if got := newDist(tc.xs); got != tc.want {
			t.Errorf("newDist(%v) = %+v, want %+v", tc.xs, got, tc.want)
		}
	}
	xs := make([]float64, 200)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	if d := newDist(xs); d.P50 != 100 || d.P99 != 198 {
		t.Errorf("1..200: p50 %v p99 %v, want 100 and 198", d.P50, d.P99)
	}
}

func TestGoal(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		op   string
		want bool
	}{{149, "<=", true}, {150, "<=", true}, {151, "<=", false}, {0.99, ">=", true}, {0.98, ">=", false}} {
		if g := goal("x", tc.v, tc.op, map[string]float64{"<=": 150, ">=": 0.99}[tc.op], "", ""); g.Pass != tc.want {
			t.Errorf("%v %s: pass %v, want %v", tc.v, tc.op, g.Pass, tc.want)
		}
	}
}

func TestParseStatus(t *testing.T) {
	var s MemSnapshot
	parseStatus(strings.NewReader("Name:\thexserve\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nRssAnon:\t   512 kB\nRssFile:\t   500 kB\nRssShmem:\t    12 kB\n"), &s)
	if s.VmRSS != 1<<20 || s.RssAnon != 512<<10 || s.RssFile != 500<<10 || s.RssShmem != 12<<10 || s.VmHWM != 2<<20 {
		t.Errorf("%+v", s)
	}
}

func TestParseSmaps(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/embed.bin", make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	smaps := strings.Join([]string{
		"7f0000000000-7f0000002000 r--s 00000000 fd:01 123 " + dir + "/embed.bin",
		"Size:                  8 kB",
		"Rss:                   4 kB",
		"7f0000002000-7f0000003000 rw-p 00000000 00:00 0 ",
		"Size:                  4 kB",
		"Rss:                   4 kB",
		"7f0000003000-7f0000004000 r--s 00002000 fd:01 123 " + dir + "/embed.bin",
		"Size:                  4 kB",
		"Rss:                   4 kB",
		"7f0000004000-7f0000005000 r--p 00000000 fd:01 9 /usr/lib/libc.so",
		"Rss:                   4 kB",
	}, "\n")
	got := parseSmaps(strings.NewReader(smaps), dir)
	want := []MappedFile{{Path: dir + "/embed.bin", Size: 8192, Map: 12 << 10, RSS: 8 << 10}}
	if len(got) != 1 || got[0] != want[0] {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestRemap(t *testing.T) {
	script, ids := remap([]int32{900, 7, 900, 55, 7})
	if want := []int32{0, 1, 0, 2, 1}; !slices.Equal(script, want) {
		t.Errorf("script %v, want %v", script, want)
	}
	if want := []int32{900, 7, 55}; !slices.Equal(ids, want) {
		t.Errorf("ids %v, want %v", ids, want)
	}
}

func TestReadSSE(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		tokens     int
		done       bool
		err        string
	}{
		{"ok", "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"hi\"},\"token_ids\":[5,6]}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"!\"},\"token_ids\":[7]}]}\n\ndata: [DONE]\n\n", 3, true, ""},
		{"no done", "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"},\"token_ids\":[5]}]}\n\n", 1, false, ""},
		{"error", "data: {\"error\":{\"message\":\"boom\"}}\n\n", 0, false, "boom"},
		{"bad json", "data: {\n\n", 0, false, "SSE chunk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arr, end, done, err := readSSE(strings.NewReader(tc.body))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || done != tc.done || len(arr) != tc.tokens || len(arr) > 1 && arr[len(arr)-1].Before(arr[0]) ||
				len(arr) > 0 && end.Before(arr[len(arr)-1]) {
				t.Errorf("arrivals %v done %v err %v", arr, done, err)
			}
		})
	}
}

func TestSetLatency(t *testing.T) {
	t.Setenv("HOSTSIM_LATENCY_US_PREFILL", "7")
	os.Unsetenv("HOSTSIM_LATENCY_US_DECODE")
	restore := setLatency(Latency{PrefillUS: 64500, DecodeUS: 55000})
	if os.Getenv("HOSTSIM_LATENCY_US_PREFILL") != "64500" || os.Getenv("HOSTSIM_LATENCY_US_DECODE") != "55000" {
		t.Error("latency not set")
	}
	if _, ok := os.LookupEnv("HOSTSIM_LATENCY_US_LMHEAD"); ok {
		t.Error("a zero latency should be unset")
	}
	restore()
	if os.Getenv("HOSTSIM_LATENCY_US_PREFILL") != "7" {
		t.Error("previous value not restored")
	}
	if _, ok := os.LookupEnv("HOSTSIM_LATENCY_US_DECODE"); ok {
		t.Error("an unset variable should be unset again")
	}
}

// TestDecodeSteps checks the step arithmetic on synthetic records.
func TestDecodeSteps(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(us int) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }
	recs := []evalRec{
		{start: at(0), end: at(1000), d: Counters{Graph: 900 * time.Microsecond}},
		{start: at(1100), end: at(1600), d: Counters{Graph: 450 * time.Microsecond, Embed: 10 * time.Microsecond}, vocab: 5 * time.Microsecond, bg: 40 * time.Microsecond},
		{start: at(1700), end: at(2200), vocab: 8 * time.Microsecond, bg: 110 * time.Microsecond},
	}
	s := decodeSteps(recs)
	if len(s) != 1 {
		t.Fatalf("%d steps, want 1", len(s))
	}
	if s[0].wall != 600*time.Microsecond || s[0].graph != 450*time.Microsecond || s[0].outside != 100*time.Microsecond ||
		s[0].detok != 3*time.Microsecond || s[0].io.IO() != 10*time.Microsecond || s[0].bg != 70*time.Microsecond {
		t.Errorf("%+v", s[0])
	}
}

// lazyModel runs its "lm-head" when the engine reads a row, as qhexrt
// does: 300 µs of graph time (200 µs of it the thread's CPU) and 20 µs of
// conversion per row read, on top of Step's own 100 µs graph call.
type lazyModel struct {
	inference.Model
	c Counters
}

func (m *lazyModel) Counters() Counters { return m.c }

func (m *lazyModel) Step(ctx context.Context, runs []inference.Run) ([]inference.Rows, error) {
	m.c.Graph += 100 * time.Microsecond
	m.c.GraphCPU += 50 * time.Microsecond
	rows, err := m.Model.Step(ctx, runs)
	for i := range rows {
		rows[i] = lazyRows{rows[i], m}
	}
	return rows, err
}

type lazyRows struct {
	inference.Rows
	m *lazyModel
}

func (r lazyRows) Logits(ctx context.Context, i int) (sample.Logits, error) {
	time.Sleep(320 * time.Microsecond)
	r.m.c.Graph += 300 * time.Microsecond
	r.m.c.GraphCPU += 200 * time.Microsecond
	r.m.c.Convert += 20 * time.Microsecond
	return r.Rows.Logits(ctx, i)
}

// TestDecodeStepsLazyGraph: graph calls a model makes after Step has
// returned, when the engine reads a row (qhexrt's lm-head in Rows.Logits),
// count as the token's graph time, and the rest of that read as model I/O,
// not as the engine's time between Steps (which the host phase reports as
// sampling).
func TestDecodeStepsLazyGraph(t *testing.T) {
	const us = time.Microsecond
	t0 := time.Unix(0, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	// The engine's one Rows.Logits call took 330 µs (240 µs of CPU): the
	// lazy graph call's 300 µs (200 µs CPU), its conversion and the rest.
	a := evalRec{start: at(0), end: at(500 * us), d: Counters{Graph: 400 * us, GraphCPU: 100 * us}, c0: Counters{}, c1: Counters{Graph: 400 * us, GraphCPU: 100 * us},
		read: 330 * us, readCPU: 240 * us, cpu: 1 * us, endUse: threadcpu.Usage{CPU: 181 * us}, endCPU: 181 * us, useOK: true}
	b := evalRec{start: at(1000 * us), c0: Counters{Graph: 700 * us, GraphCPU: 300 * us, Convert: 20 * us},
		use: threadcpu.Usage{CPU: 481 * us}, useOK: true}
	s := decodeSteps([]evalRec{{}, a, b})[0]
	// Between the Steps: 500 µs, of which the Logits call 330.
	if s.graph != 700*us || s.outside != 170*us || s.io.IO() != 20*us {
		t.Errorf("graph %v, outside %v, I/O %v; want 700µs, 170µs, 20µs", s.graph, s.outside, s.io.IO())
	}
	// Thread CPU between the Steps: 300 µs, less the Logits call's 240
	// (its graph call's 200 left out, the other 40 are model I/O): the
	// engine's 60 µs; model I/O 80 µs in Step and 40 in Logits.
	if !s.cpuOK || s.outsideCPU != 60*us || s.ioCPU != 120*us {
		t.Errorf("engine CPU %v, model I/O CPU %v (ok %v); want 60µs, 120µs", s.outsideCPU, s.ioCPU, s.cpuOK)
	}

	// Through the recorder: the lazy calls' counters land between the Steps.
	m := &lazyModel{Model: inferencetest.NewScripted(inference.ModelInfo{BOS: 128000}, []int32{1, 2, 3, 4})}
	rec := &recorder{Model: m, counters: m.Counters}
	e := inference.New(rec, inferencetest.NewVocab(map[int32]string{1: "a", 2: "b", 3: "c", 4: "d"}), inference.Config{})
	defer e.Close()
	st, err := e.Submit(context.Background(), inference.Request{Prompt: []int32{128000}, MaxTokens: 4, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inference.Collect(st); err != nil {
		t.Fatal(err)
	}
	recs := rec.take()
	steps, k := decodeSteps(recs), prefillSteps(recs)
	if len(steps) == 0 {
		t.Fatal("no decode steps")
	}
	for i, s := range steps {
		a := recs[k+i]
		between := recs[k+i+1].start.Sub(a.end)
		if s.graph != 400*us || s.io.Convert != 20*us || a.read < 320*us || s.outside != between-a.read {
			t.Errorf("step %d: graph %v, convert %v, outside %v of %v between the Steps, %v reading rows", i, s.graph, s.io.Convert, s.outside, between, a.read)
		}
	}
}

// copyingModel reports background KV copy time, 25 µs more after each Step.
type copyingModel struct {
	inference.Model
	bg time.Duration
}

func (m *copyingModel) Step(ctx context.Context, runs []inference.Run) ([]inference.Rows, error) {
	m.bg += 25 * time.Microsecond
	return m.Model.Step(ctx, runs)
}

func (m *copyingModel) BackgroundKVCopy() time.Duration { return m.bg }

// TestRecorderBackgroundCopy: the recorder reads a model's background KV
// copy time at each Step's start, and decodeSteps takes the differences.
func TestRecorderBackgroundCopy(t *testing.T) {
	m := &copyingModel{Model: inferencetest.NewScripted(inference.ModelInfo{BOS: 128000}, []int32{1, 2, 3})}
	rec := &recorder{Model: m}
	sess := inferencetest.NewSession(rec)
	seq := []int32{128000}
	for range 3 {
		if _, _, err := sess.Eval(context.Background(), seq, len(seq)-1); err != nil {
			t.Fatal(err)
		}
		seq = append(seq, 1)
	}
	steps := decodeSteps(rec.take())
	if len(steps) != 1 || steps[0].bg != 25*time.Microsecond {
		t.Fatalf("steps %+v, want one with 25 µs of background copy", steps)
	}
}

// TestDecodeStepsThread checks the thread CPU arithmetic: from the end of
// one Eval's reading to the start of the next one's, minus the graph calls'
// CPU time; no figure without both readings or with graphs of unknown CPU time.
func TestDecodeStepsThread(t *testing.T) {
	const us = time.Microsecond
	use := func(cpu time.Duration, faults int64) threadcpu.Usage {
		return threadcpu.Usage{CPU: cpu, MinorFaults: faults, InvolSwitches: 1, RunDelay: 7 * us}
	}
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	for _, tc := range []struct {
		name   string
		a, b   evalRec
		ok     bool
		cpu    time.Duration
		faults int64
	}{
		{"graph CPU subtracted",
			evalRec{start: at(0), end: at(5100 * us), use: use(1000*us, 3), cpu: 1002 * us, endUse: use(1832*us, 3), endCPU: 1832 * us, useOK: true, d: Counters{Graph: 5000 * us, GraphCPU: 800 * us}},
			evalRec{start: at(5300 * us), use: use(1900*us, 5), cpu: 1902 * us, useOK: true}, true, 98 * us, 2},
		// As above, with a row read of 10 µs CPU between the Steps and a
		// thread-clock reading costing 2 µs: Step's part (30 + the read's 10)
		// holds 3 readings (its start, the graph call, the read), the engine's
		// (68 − 10) 2 (its start, the read).
		{"clock readings left out",
			evalRec{start: at(0), end: at(5100 * us), use: use(1000*us, 3), cpu: 1002 * us, endUse: use(1832*us, 3), endCPU: 1832 * us, useOK: true,
				d: Counters{Graph: 5000 * us, GraphCPU: 800 * us, Calls: 1}, read: 12 * us, readCPU: 10 * us, reads: 1, clock: 2 * us},
			evalRec{start: at(5300 * us), use: use(1900*us, 5), cpu: 1902 * us, useOK: true}, true, 88 * us, 2},
		{"no graphs", evalRec{start: at(0), end: at(20 * us), use: use(0, 0), cpu: 1 * us, endUse: use(11*us, 0), endCPU: 11 * us, useOK: true},
			evalRec{start: at(100 * us), use: use(51*us, 0), useOK: true}, true, 50 * us, 0},
		{"readings at Eval's end left out", evalRec{start: at(0), end: at(20 * us), use: use(0, 0), cpu: 1 * us, endUse: use(9*us, 0), endCPU: 11 * us, useOK: true},
			evalRec{start: at(100 * us), use: use(53*us, 0), useOK: true}, true, 50 * us, 0},
		// The clock charges 262 µs of the graph call to Step's 40 µs outside it:
		// model I/O is bounded by those 40 µs, the engine's 42 µs stand.
		{"CPU beyond wall time bounded", evalRec{start: at(0), end: at(5040 * us), use: use(0, 0), cpu: 1 * us, endUse: use(1063*us, 0), endCPU: 1063 * us, useOK: true, d: Counters{Graph: 5000 * us, GraphCPU: 800 * us}},
			evalRec{start: at(5100 * us), use: use(1105*us, 0), useOK: true}, true, 82 * us, 0},
		{"graph CPU unknown", evalRec{useOK: true, d: Counters{Graph: us}}, evalRec{useOK: true}, false, 0, 0},
		{"no reading", evalRec{useOK: true}, evalRec{}, false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := decodeSteps([]evalRec{{}, tc.a, tc.b})
			if len(s) != 1 {
				t.Fatalf("%d steps", len(s))
			}
			if s[0].cpuOK != tc.ok || s[0].cpu != tc.cpu || s[0].use.MinorFaults != tc.faults {
				t.Errorf("cpu %v ok %v faults %d, want %v %v %d", s[0].cpu, s[0].cpuOK, s[0].use.MinorFaults, tc.cpu, tc.ok, tc.faults)
			}
			if tc.ok && s[0].ioCPU+s[0].outsideCPU != s[0].cpu {
				t.Errorf("parts %v + %v do not add up to %v", s[0].ioCPU, s[0].outsideCPU, s[0].cpu)
			}
			if tc.ok && (s[0].use.InvolSwitches != 0 || s[0].use.RunDelay != 0) {
				t.Errorf("usage deltas %+v, want zero switches and run delay", s[0].use)
			}
		})
	}
}

// TestHostGoalUsesThreadCPU checks that the host goal judges the thread CPU
// time when it was measured and the wall time otherwise.
func TestHostGoalUsesThreadCPU(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    HostTime
		want float64
		pass bool
	}{
		{"thread CPU", HostTime{Sampling: "greedy", TotalUS: Dist{N: 3, P50: 400}, CPUUS: Dist{N: 3, P50: 90}}, 90, true},
		{"wall only", HostTime{Sampling: "greedy", TotalUS: Dist{N: 3, P50: 400}}, 400, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := goals(&Report{Host: []HostTime{tc.h}})
			if g[0].Name != "host_us_per_decode_token/greedy" || g[0].Measured != tc.want || g[0].Pass != tc.pass {
				t.Errorf("goal %+v, want measured %v pass %v", g[0], tc.want, tc.pass)
			}
		})
	}
}

// TestRecorded checks that the replay model returns the recorded logits in
// order and refuses a Step beyond them.
func TestRecorded(t *testing.T) {
	recs := []evalRec{{logits: sample.Logits{Type: sample.F32, F32: []float32{1, 0}}},
		{logits: sample.Logits{Type: sample.F16, Raw16: []uint16{7}}}}
	m := newRecorded(inference.ModelInfo{VocabSize: 2, ContextLen: 8}, recs)
	ctx := context.Background()
	step := func() error {
		rows, err := m.Step(ctx, []inference.Run{{Seq: 1, Start: 2, Tokens: []int32{5}}})
		if err == nil && rows[0].Len() != 1 {
			err = errors.New("a row count other than the run's")
		}
		return err
	}
	for i, want := range []float32{1, 7} {
		rows, err := m.Step(ctx, []inference.Run{{Seq: 1, Start: 2, Tokens: []int32{5}}})
		if err != nil {
			t.Fatalf("Step %d: %v", i, err)
		}
		l, err := rows[0].Logits(ctx, 0)
		if err != nil {
			t.Fatalf("Step %d: %v", i, err)
		}
		if got := l.At(0); l.Type == sample.F16 {
			got = float32(l.Raw16[0])
			if got != want {
				t.Errorf("Step %d: logits %+v", i, l)
			}
		} else if got != want {
			t.Errorf("Step %d: logits %+v", i, l)
		}
	}
	if err := step(); err == nil {
		t.Error("a Step beyond the recording should fail")
	}
	m = newRecorded(inference.ModelInfo{VocabSize: 2, ContextLen: 8}, recs)
	m.evict = make([]byte, 130)
	step()
	if m.evict[0] != 1 || m.evict[64] != 1 || m.evict[128] != 1 || m.evict[1] != 0 {
		t.Errorf("evict buffer %v: want one write per 64-byte line", m.evict)
	}
}

func TestRunPhases(t *testing.T) {
	tok := loadTokenizer(t)
	rep, err := Run(context.Background(), Options{Quick: true, Phases: []string{"stream"},
		Load: func() (Loaded, error) {
			return Loaded{Model: inferencetest.NewScripted(inference.ModelInfo{BOS: 128000}, []int32{1, 2, 3}), Tokenizer: tok}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Streaming) != 1 || len(rep.Host) != 0 || rep.Tokenizer.Bytes != 0 || rep.PrefixCache.HistoryTokens != 0 {
		t.Errorf("only the stream phase should run: %+v", rep)
	}
	if len(rep.Goals) != 1 || rep.Goals[0].Name != "go_side_rss_mb" {
		t.Errorf("goals %+v, want only go_side_rss_mb", rep.Goals)
	}
	// Phases that did not run print nothing: no empty tables, no zeros.
	var text bytes.Buffer
	if err := WriteText(&text, rep); err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{"THROUGHPUT", "HOST TIME", "PREFIX CACHE", "KV STORE", "SPECULATIVE", "CONCURRENCY", "TOKENIZER", "STRUCTURED", "0.000"} {
		if strings.Contains(text.String(), absent) {
			t.Errorf("the report of the stream phase alone has %q:\n%s", absent, text.String())
		}
	}
	if !strings.Contains(text.String(), "STREAMING") {
		t.Errorf("no STREAMING section:\n%s", text.String())
	}
}

// snapModel gives a one-sequence model a KV cache of 4-byte rows (their
// position) that the kvstore phase can save and restore. A restored
// sequence's rows are evaluated by the model itself when it runs on (the
// engine names their tokens: SeqTokenRecorder).
type snapModel struct {
	inference.Model
	rows     [512 * 4]byte
	restored []int32 // tokens of restored rows the model has not evaluated
	id       inference.SeqID
}

func (m *snapModel) Step(ctx context.Context, runs []inference.Run) ([]inference.Rows, error) {
	if len(runs) != 1 || len(m.restored) == 0 || runs[0].Seq != m.id {
		return m.Model.Step(ctx, runs)
	}
	r := runs[0]
	toks := append(slices.Clone(m.restored[:r.Start]), r.Tokens...)
	m.restored = nil
	rows, err := m.Model.Step(ctx, []inference.Run{{Seq: r.Seq, Tokens: toks}})
	if err != nil {
		return nil, err
	}
	return []inference.Rows{tailRows{rows[0], r.Start}}, nil
}

// tailRows are rows from off on.
type tailRows struct {
	inference.Rows
	off int
}

func (t tailRows) Len() int { return t.Rows.Len() - t.off }
func (t tailRows) Logits(ctx context.Context, i int) (sample.Logits, error) {
	return t.Rows.Logits(ctx, t.off+i)
}

func (m *snapModel) KVLayout() inference.KVLayout {
	return inference.KVLayout{Identity: "scripted", RowBytes: 4}
}

func (m *snapModel) SaveSeqKV(_ inference.SeqID, from, to int, dst []byte) error {
	copy(dst, m.rows[from*4:to*4])
	return nil
}

func (m *snapModel) RestoreSeqKV(id inference.SeqID, from int, src []byte) error {
	copy(m.rows[from*4:], src)
	m.id = id
	return nil
}

func (m *snapModel) RestoredTokens(id inference.SeqID, toks []int32) {
	if id == m.id {
		m.restored = slices.Clone(toks)
	}
}

// costs prices steps as a .pte at v79 floors: a row through kv_forward
// (62.5 ms) or one 128-row prefill_forward call (64.5 ms), the cheaper.
type costs struct{ decode, prefill time.Duration }

func (c costs) StepCost(rows int) time.Duration { return min(time.Duration(rows)*c.decode, c.prefill) }

// TestCeilings: a workload's ceiling is N × cost(1 row) ÷ cost(N rows),
// from the costs the model measured: issue 41's 3.9×, 7.75× and 15.5× at
// v79 floors, and no more than 1× while a multi-row call costs N one-row calls or more.
func TestCeilings(t *testing.T) {
	v79 := costs{62500 * time.Microsecond, 64500 * time.Microsecond}
	slow := costs{62500 * time.Microsecond, 400 * time.Millisecond} // hostsim's 128-row call before issue 41
	for _, tc := range []struct {
		name string
		c    costs
		want map[string]float64
		ttft float64
	}{
		{"v79", v79, map[string]float64{"1": 1, "4": 3.876, "8": 7.752, "16": 15.504, "n4": 3.876}, 64.5},
		{"slow multi-row call", slow, map[string]float64{"1": 1, "4": 1, "8": 1.25, "16": 2.5, "n4": 1}, 400},
	} {
		c := &Concurrency{SideBySide: map[string]float64{"1": 1, "4": 1, "8": 1, "16": 1, "n4": 1}, Ceiling: map[string]float64{}}
		c.ceilings(tc.c)
		for k, want := range tc.want {
			if got := c.Ceiling[k]; got != want {
				t.Errorf("%s: ceiling %s = %v, want %v", tc.name, k, got, want)
			}
		}
		if c.TTFTCeilingMS != tc.ttft {
			t.Errorf("%s: TTFT ceiling %v ms, want %v", tc.name, c.TTFTCeilingMS, tc.ttft)
		}
	}
	// Workloads that did not run get no ceiling.
	c := &Concurrency{SideBySide: map[string]float64{"1": 1, "4": 1}, Ceiling: map[string]float64{}}
	c.ceilings(v79)
	if _, ok := c.Ceiling["16"]; ok {
		t.Errorf("ceiling for a workload that did not run: %v", c.Ceiling)
	}
}

// TestConcurrencyGoalsByKind: each model kind is judged by its own stream
// goals (a Genie bundle's 4 and 8 streams ≥ 1.8× and 3.5×, not a .pte's),
// and a default run runs the workloads those goals read.
func TestConcurrencyGoalsByKind(t *testing.T) {
	for _, tc := range []struct {
		kind string
		want map[string]float64 // goal → target
		runs []string           // side-by-side workloads a default run runs
	}{
		{"pte", map[string]float64{"concurrency_4_streams_x": GoalConc4X, "concurrency_8_streams_x": GoalConc8X,
			"concurrency_16_streams_x": GoalConc16X, "concurrency_n4_x": GoalConcN4X}, []string{"1", "4", "8", "16", "n4"}},
		{"genie", map[string]float64{"concurrency_4_streams_x": GoalConc4XGenie, "concurrency_8_streams_x": GoalConc8XGenie},
			[]string{"1", "4", "8"}},
		{"chunked", map[string]float64{"concurrency_4_streams_x": GoalConc4XChunked}, []string{"1", "4"}},
		{"qhexrt", map[string]float64{"concurrency_4_streams_x": GoalConc4XQHexRT}, []string{"1", "4"}},
	} {
		c := &Concurrency{Kind: tc.kind, SideBySide: map[string]float64{"1": 10, "4": 19, "8": 36, "16": 70, "n4": 30},
			Serial: map[string]float64{"1": 10, "n4": 10}}
		got := map[string]float64{}
		for _, g := range concurrencyGoals(c) {
			if strings.HasPrefix(g.Name, "concurrency_") && strings.HasSuffix(g.Name, "_x") && g.Name != "concurrency_one_stream_x" {
				got[g.Name] = g.Target
			}
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("%s: goals %v, want %v", tc.kind, got, tc.want)
		}
		var runs []string
		for _, k := range []string{"1", "4", "8", "16", "n4"} {
			if goalReads(tc.kind, true, k) {
				runs = append(runs, k)
			}
		}
		if !slices.Equal(runs, tc.runs) {
			t.Errorf("%s: side-by-side workloads run %v, want %v", tc.kind, runs, tc.runs)
		}
		if n4 := goalReads(tc.kind, false, "n4"); n4 != (tc.kind == "pte") || !goalReads(tc.kind, false, "1") || goalReads(tc.kind, false, "4") {
			t.Errorf("%s: one-at-a-time workloads: n4 %v, 1 %v, 4 %v", tc.kind, n4, goalReads(tc.kind, false, "1"), goalReads(tc.kind, false, "4"))
		}
	}
	// 4 streams at 1.9× pass on a Genie bundle and fail on a .pte.
	for kind, pass := range map[string]bool{"genie": true, "pte": false} {
		c := &Concurrency{Kind: kind, SideBySide: map[string]float64{"1": 10, "4": 19}, Serial: map[string]float64{"1": 10}}
		for _, g := range concurrencyGoals(c) {
			if g.Name == "concurrency_4_streams_x" && g.Pass != pass {
				t.Errorf("%s: 4 streams 1.9× pass %v, want %v", kind, g.Pass, pass)
			}
		}
	}
}

// TestRunFull: --full keeps the whole workload (4 conversations × 6 turns,
// every turn timed); the default takes 2 × 3 and leaves turn 1 untimed.
func TestRunFull(t *testing.T) {
	tok := loadTokenizer(t)
	script := tok.Encode(" The quick brown fox jumps over the lazy dog.", false, false)
	for _, full := range []bool{false, true} {
		rep, err := Run(context.Background(), Options{Full: full, Tokens: 8, Phases: []string{"kvstore"},
			Load: func() (Loaded, error) {
				m := inferencetest.NewScripted(inference.ModelInfo{Name: "scripted", BOS: 128000, EOS: []int32{128009}}, script)
				return Loaded{Model: &snapModel{Model: m}, Tokenizer: tok}, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		k := rep.KVStore
		convs, turns := 2, 3
		if full {
			convs, turns = kvConversations, kvTurns
		}
		if k.Conversations != convs || k.Turns != turns || len(k.Detail) != convs*turns || rep.Full != full {
			t.Fatalf("full %v: %d × %d turns, %d details", full, k.Conversations, k.Turns, len(k.Detail))
		}
		if timed := k.Detail[0].TTFTWithMS > 0 && k.Detail[0].TTFTWithoutMS > 0; timed != full {
			t.Errorf("full %v: turn 1 timed %v (%+v)", full, timed, k.Detail[0])
		}
		if d := k.Detail[len(k.Detail)-1]; d.TTFTWithMS <= 0 || d.TTFTWithoutMS <= 0 {
			t.Errorf("full %v: last turn not timed: %+v", full, d)
		}
	}
}

// TestBurstGoals: on a Genie bundle the burst goal reads the worst round;
// other kinds report their rounds without a goal.
func TestBurstGoals(t *testing.T) {
	g := burstGoals(&Burst{Kind: "genie", Ratio: []float64{3.9, 3.2, 4.1}})
	if len(g) != 1 || g[0].Measured != 3.2 || g[0].Pass {
		t.Errorf("genie, worst round 3.2: %+v", g)
	}
	if g := burstGoals(&Burst{Kind: "genie", Ratio: []float64{3.4, 3.3, 3.5}}); len(g) != 1 || !g[0].Pass {
		t.Errorf("genie, every round ≥ 3.3: %+v", g)
	}
	if g := burstGoals(&Burst{Kind: "pte", Ratio: []float64{1}}); g != nil {
		t.Errorf("pte: %+v, want no goal", g)
	}
}

// TestBurstPrompts: the clients' prompts have 20–55 tokens, start with BOS,
// and none starts with another's rows past BOS (no prefix-cache reuse).
func TestBurstPrompts(t *testing.T) {
	ids := make([]int32, 100)
	for i := range ids {
		ids[i] = int32(1000 + i)
	}
	p := newBurstPrompts(ids, 1)
	var all [][]int32
	for i := range burstClients {
		n := burstMinPrompt + burstPromptStep*i
		q := p.next(n)
		if len(q) != n || q[0] != 1 {
			t.Fatalf("prompt %d: %d tokens starting %d, want %d starting with BOS", i, len(q), q[0], n)
		}
		for _, o := range all {
			if o[1] == q[1] {
				t.Fatalf("prompt %d starts as an earlier one: %v, %v", i, q[:4], o[:4])
			}
		}
		all = append(all, q)
	}
	if last := all[len(all)-1]; len(last) != 55 {
		t.Errorf("the longest prompt has %d tokens, want 55", len(last))
	}
}

// TestContextPhase: the context phase runs only when named, generates past
// the window with context shift on a ring-buffer model and one that
// re-reads, and reports each's shifts and times per token.
func TestContextPhase(t *testing.T) {
	tok := loadTokenizer(t)
	info := inference.ModelInfo{Name: "fake", VocabSize: 128256, ContextLen: 256, BOS: 128000, EOS: []int32{128009}}
	lim := inference.BatchLimits{Sequences: 4, Rows: 64, Slots: 1024}
	for _, tc := range []struct {
		shift string
		model inference.Model
	}{
		{"ring", inferencetest.NewRing(info, lim, 0)},
		{"reread", inferencetest.NewPool(info, lim)},
	} {
		rep, err := Run(context.Background(), Options{Quick: true, Phases: []string{"context"},
			Load: func() (Loaded, error) { return Loaded{Model: tc.model, Tokenizer: tok}, nil }})
		if err != nil {
			t.Fatal(err)
		}
		c := rep.Context
		// 1,024 tokens: the first shift at the 256-token window, then one every 64 tokens.
		if c == nil || c.Shift != tc.shift || c.Output != 1024 || c.Window != 256 || c.Sink < 2 || c.Sink >= c.Prompt ||
			c.Shifts != (1024-(256-c.Prompt))/64+1 || c.BeforeMS.N != 256-c.Prompt-1 || c.AfterMS.N != 1024-(256-c.Prompt) {
			t.Fatalf("%s: %+v", tc.shift, c)
		}
		var text bytes.Buffer
		if err := WriteText(&text, rep); err != nil || !strings.Contains(text.String(), "CONTEXT SHIFT ("+"pte, "+tc.shift) {
			t.Errorf("%s: %v\n%s", tc.shift, err, text.String())
		}
	}
	// Not named: not run.
	rep, err := Run(context.Background(), Options{Quick: true, Phases: nil, Load: func() (Loaded, error) {
		return Loaded{Model: inferencetest.NewScripted(inference.ModelInfo{BOS: 128000}, []int32{1, 2, 3}), Tokenizer: tok}, nil
	}})
	if err != nil || rep.Context != nil {
		t.Errorf("the default phases ran the context phase: %v %+v", err, rep.Context)
	}
}

func TestContextGoals(t *testing.T) {
	if g := contextGoals(&Context{Shift: "ring", MedianRatio: 1.08, Ratio: 1.5}); len(g) != 1 || !g[0].Pass {
		t.Errorf("ring within 10%%: %+v", g)
	}
	if g := contextGoals(&Context{Shift: "ring", MedianRatio: 1.2, Ratio: 1}); len(g) != 1 || g[0].Pass {
		t.Errorf("ring 20%% slower: %+v", g)
	}
	if g := contextGoals(&Context{Shift: "reread", MedianRatio: 2, Ratio: 2}); g != nil {
		t.Errorf("reread: %+v, want no goal", g)
	}
}
