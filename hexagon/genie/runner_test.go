package genie

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hexserve/hexserve/hexagon/genie/geniesim"
	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/internal/costtest"
	"github.com/hexserve/hexserve/internal/hostsimtest"
	"github.com/hexserve/hexserve/internal/testerr"
	"github.com/hexserve/hexserve/internal/testjson"
	"github.com/hexserve/hexserve/internal/tinyllama"
	"github.com/rs/zerolog"
)

// The tiny public model (testdata/tinyllama) as Genie bundles on hostsim.

const (
	testCtx = 64
	testAR  = 8
)

func openRuntime(t testing.TB) *qnn.Runtime {
	t.Helper()
	dir := hostsimtest.Dir(t)
	rt, err := qnn.Open(qnn.Config{Backend: filepath.Join(dir, "libQnnHtp.so"), System: filepath.Join(dir, "libQnnSystem.so"),
		RPCMem: filepath.Join(dir, "libcdsprpc.so")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

var (
	bundleMu sync.Mutex
	bundles  = map[string]string{}
)

// writeBundle writes (once per precision and parts) the tiny model's bundle and returns a copy's
// folder the test may edit.
func writeBundle(t testing.TB, precision string, parts int) string {
	t.Helper()
	bundleMu.Lock()
	key := precision + "/" + string(rune('0'+parts))
	src, ok := bundles[key]
	if !ok {
		var err error
		src, err = os.MkdirTemp("", "genie-test-")
		if err == nil {
			err = geniesim.Write(src, geniesim.Options{Config: tinyllama.Tiny(), Name: "tiny", Precision: precision,
				Weights: simfile.WeightF16, Parts: parts, PromptAR: testAR, Ctx: testCtx})
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(src, "tokenizer.json"), []byte("{}"), 0o644)
		}
		if err != nil {
			bundleMu.Unlock()
			t.Fatal(err)
		}
		bundles[key] = src
	}
	bundleMu.Unlock()
	dst := t.TempDir()
	ents, _ := os.ReadDir(src)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err == nil {
			err = os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range bundles {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

func openRunner(t testing.TB, rt *qnn.Runtime, dir string) *Runner {
	t.Helper()
	r, err := Open(Config{Dir: dir, Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// reference returns the float64 logits after each token of toks.
func reference(t testing.TB, toks []int32) [][]float64 {
	t.Helper()
	m, err := tinyllama.NewModel(tinyllama.Tiny())
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int, len(toks))
	for i, tok := range toks {
		ids[i] = int(tok)
	}
	out, err := m.Forward(ids)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func maxDiff(t testing.TB, l sample.Logits, ref []float64) float64 {
	t.Helper()
	if l.Len() != len(ref) {
		t.Fatalf("logits of %d entries, want %d", l.Len(), len(ref))
	}
	d := 0.0
	for i, v := range ref {
		d = max(d, math.Abs(float64(l.At(i))-v))
	}
	return d
}

func argmax(l sample.Logits) int {
	best := 0
	for i := range l.Len() {
		if l.At(i) > l.At(best) {
			best = i
		}
	}
	return best
}

var prompt = []int32{128000, 9906, 11, 1917, 0, 578, 4062, 14198, 39935, 35308, 927}

// step runs one Step and returns every row's logits, copied.
func step(t testing.TB, r *Runner, runs ...inference.Run) [][]sample.Logits {
	t.Helper()
	rows, err := r.Step(context.Background(), runs)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]sample.Logits
	for _, rs := range rows {
		var ls []sample.Logits
		for i := range rs.Len() {
			l, err := rs.Logits(context.Background(), i)
			if err != nil {
				t.Fatal(err)
			}
			c := l
			c.F32, c.Raw16 = slices.Clone(l.F32), slices.Clone(l.Raw16)
			ls = append(ls, c)
		}
		out = append(out, ls)
	}
	return out
}

// TestForwardExact: with float32 I/O, every row's logits equal the float64 reference within
// float32 rounding, through a prompt chunk (AR-8 graphs) and then decode rows (AR-1 graphs):
// the two graphs read one cache (re-strided between them).
func TestForwardExact(t *testing.T) {
	for _, parts := range []int{3, 4} {
		rt := openRuntime(t)
		r := openRunner(t, rt, writeBundle(t, "f32", parts))
		ref := reference(t, prompt)
		id, err := r.Open(len(prompt))
		if err != nil {
			t.Fatal(err)
		}
		// The policy may try AR-8 again for a decode row (an idle graph is re-measured), so
		// each step notes which AR ran: every change of AR costs one re-striding, no more.
		var ars []int
		stepAR := func(run inference.Run) []sample.Logits {
			calls := r.Stats().Graphs[r.ars[0].names[0]].Calls
			rows := step(t, r, run)[0]
			ar := r.ars[1].ar
			if r.Stats().Graphs[r.ars[0].names[0]].Calls > calls {
				ar = r.ars[0].ar
			}
			ars = append(ars, ar)
			return rows
		}
		got := stepAR(inference.Run{Seq: id, Start: 0, Tokens: prompt[:7]})
		for i := 7; i < len(prompt); i++ {
			got = append(got, stepAR(inference.Run{Seq: id, Start: i, Tokens: prompt[i : i+1]})...)
		}
		for i, l := range got {
			if d := maxDiff(t, l, ref[i]); d > 1e-3 {
				t.Errorf("parts %d: row %d: max |Δlogit| %g against the reference", parts, i, d)
			}
		}
		switches := 0
		for i := 1; i < len(ars); i++ {
			if ars[i] != ars[i-1] {
				switches++
			}
		}
		st := r.Stats()
		if switches == 0 || st.Restrides != int64(switches) {
			t.Errorf("parts %d: %d re-stridings over the ARs %v, want one per change of AR (AR-8 → AR-1)", parts, st.Restrides, ars)
		}
		for _, n := range append(slices.Clone(r.ars[0].names), r.ars[1].names...) {
			if st.Graphs[n].Calls == 0 {
				t.Errorf("parts %d: graph %s never ran", parts, n)
			}
		}
	}
}

// TestBatchIsolation: two sequences' rows in one AR-8 call give the logits each gives alone
// (bit for bit on float32), and a padding-only tail stays masked.
func TestBatchIsolation(t *testing.T) {
	rt := openRuntime(t)
	r := openRunner(t, rt, writeBundle(t, "f32", 3))
	a, b := prompt[:5], prompt[5:8]
	ida, _ := r.Open(16)
	alone := step(t, r, inference.Run{Seq: ida, Tokens: a})[0]
	r.Release(ida)
	idb, _ := r.Open(16)
	aloneB := step(t, r, inference.Run{Seq: idb, Tokens: b})[0]
	r.Release(idb)
	ida, _ = r.Open(16)
	idb, _ = r.Open(16)
	both := step(t, r, inference.Run{Seq: ida, Tokens: a}, inference.Run{Seq: idb, Tokens: b})
	for i := range alone {
		if !slices.Equal(alone[i].F32, both[0][i].F32) {
			t.Errorf("sequence A row %d differs beside B", i)
		}
	}
	for i := range aloneB {
		if !slices.Equal(aloneB[i].F32, both[1][i].F32) {
			t.Errorf("sequence B row %d differs beside A", i)
		}
	}
	// A 3-row call leaves 5 padding rows, which hostsim does not compute and poisons: NaN logits.
	idc, _ := r.Open(16)
	step(t, r, inference.Run{Seq: idc, Tokens: prompt[:3]})
	g := r.ars[1]
	for row := 3; row < g.ar; row++ {
		if v := graphio.Row(g.logits, row, r.bc.NVocab).At(0); !math.IsNaN(float64(v)) {
			t.Errorf("padding row %d's logits %g are not poisoned", row, v)
		}
	}
}

// TestMaskRows: each row opens its own sequence's slots of earlier rows and its run's earlier
// rows in the new block (columns CL − AR …), nothing else; padding rows open nothing.
func TestMaskRows(t *testing.T) {
	rt := openRuntime(t)
	r := openRunner(t, rt, writeBundle(t, "w4a16", 3))
	ida, _ := r.Open(16)
	step(t, r, inference.Run{Seq: ida, Tokens: prompt[:3]})
	idb, _ := r.Open(16)
	step(t, r, inference.Run{Seq: idb, Tokens: prompt[:2]})
	step(t, r, inference.Run{Seq: ida, Start: 3, Tokens: prompt[3:5]}, inference.Run{Seq: idb, Start: 2, Tokens: prompt[2:3]})
	g := r.ars[1]
	m := graphio.U16(g.bufs["attention_mask"].Bytes())
	sa, sb := r.Pool.Seq(ida), r.Pool.Seq(idb)
	want := func(row int) []int { // open columns
		var cols []int
		switch row {
		case 0, 1:
			for i := range 3 {
				cols = append(cols, sa.Slot(i))
			}
			for c := 0; c <= row; c++ {
				cols = append(cols, g.p+c)
			}
		case 2:
			cols = append(cols, sb.Slot(0), sb.Slot(1), g.p+2)
		}
		slices.Sort(cols)
		return cols
	}
	for row := range g.ar {
		var open []int
		for c := range r.cl {
			switch m[row*r.cl+c] {
			case 65535:
				open = append(open, c)
			case 0:
			default:
				t.Fatalf("row %d column %d: code %d, want 65535 or 0", row, c, m[row*r.cl+c])
			}
		}
		if !slices.Equal(open, want(row)) {
			t.Errorf("row %d opens %v, want %v", row, open, want(row))
		}
	}
}

// TestQuantized: w4a16 (uint16 activations and logits, uint8 KV): the cache starts at the zero
// point's code, greedy agrees with the reference over the prompt, the logit error is bounded.
func TestQuantized(t *testing.T) {
	rt := openRuntime(t)
	r := openRunner(t, rt, writeBundle(t, "w4a16", 3))
	if r.kvE.Type != qnn.UFixed8 || r.kvE.Offset != -128 {
		t.Fatalf("KV element %s, want ufixed8 with offset -128", r.kvE)
	}
	for l := range r.layers {
		if i := slices.IndexFunc(r.kc.K[l], func(b byte) bool { return b != 128 }); i >= 0 {
			t.Fatalf("layer %d K cache byte %d is %d before any call, want the zero point 128", l, i, r.kc.K[l][i])
		}
	}
	ref := reference(t, prompt)
	id, _ := r.Open(len(prompt))
	got := step(t, r, inference.Run{Seq: id, Tokens: prompt[:8]})[0]
	for i := 8; i < len(prompt); i++ {
		got = append(got, step(t, r, inference.Run{Seq: id, Start: i, Tokens: prompt[i : i+1]})[0]...)
	}
	worst := 0.0
	for i, l := range got {
		if l.Type != sample.U16 {
			t.Fatalf("logits type %d, want U16", l.Type)
		}
		worst = max(worst, maxDiff(t, l, ref[i]))
		want := 0
		for j, v := range ref[i] {
			if v > ref[i][want] {
				want = j
			}
		}
		if argmax(l) != want {
			t.Logf("row %d: argmax %d, reference %d", i, argmax(l), want)
		}
	}
	t.Logf("w4a16: max |Δlogit| %.3f over %d rows", worst, len(got))
	if worst > 1.5 {
		t.Errorf("w4a16 logits off the reference by %g (bound 1.5)", worst)
	}
}

// TestSnapshot: a sequence's saved rows restored into another sequence continue identically.
func TestSnapshot(t *testing.T) {
	rt := openRuntime(t)
	r := openRunner(t, rt, writeBundle(t, "f32", 3))
	id, _ := r.Open(16)
	step(t, r, inference.Run{Seq: id, Tokens: prompt[:6]})
	want := step(t, r, inference.Run{Seq: id, Start: 6, Tokens: prompt[6:7]})[0][0]
	buf := make([]byte, 6*r.KVLayout().RowBytes)
	if err := r.SaveSeqKV(id, 0, 6, buf); err != nil {
		t.Fatal(err)
	}
	r.Release(id)
	id2, _ := r.Open(16)
	if err := r.RestoreSeqKV(id2, 0, buf); err != nil {
		t.Fatal(err)
	}
	got := step(t, r, inference.Run{Seq: id2, Start: 6, Tokens: prompt[6:7]})[0][0]
	if !slices.Equal(got.F32, want.F32) {
		t.Error("the restored sequence's next logits differ")
	}
}

// TestStrict: hostsim refuses what the real runtime's contract forbids.
func TestStrict(t *testing.T) {
	rt := openRuntime(t)
	for _, tc := range []struct {
		name, precision, want string
		spoil                 func(r *Runner, g *arGraph)
	}{
		{"mask code", "w4a16", "attention_mask element", func(r *Runner, g *arGraph) {
			graphio.U16(g.bufs["attention_mask"].Bytes())[5] = 1234
		}},
		{"float mask value", "f32", "attention_mask element", func(r *Runner, g *arGraph) {
			graphio.F32(g.bufs["attention_mask"].Bytes())[3] = -4
		}},
		{"cos out of range", "f32", "outside [-1, 1]", func(r *Runner, g *arGraph) {
			graphio.F32(g.bufs["position_ids_cos"].Bytes())[0] = 2
		}},
		{"not a rotation", "f32", "not a rotation", func(r *Runner, g *arGraph) {
			clear(graphio.F32(g.bufs["position_ids_cos"].Bytes())[:r.half])
			clear(graphio.F32(g.bufs["position_ids_sin"].Bytes())[:r.half])
		}},
		{"input id", "f32", "outside the vocabulary", func(r *Runner, g *arGraph) {
			graphio.U32(g.bufs["input_ids"].Bytes())[0] = 1 << 20
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := openRunner(t, rt, writeBundle(t, tc.precision, 3))
			id, _ := r.Open(8)
			step(t, r, inference.Run{Seq: id, Tokens: prompt[:2]})
			g := r.ars[1]
			tc.spoil(r, g)
			var err error
			for _, c := range g.calls {
				if err = c.Execute(); err != nil {
					break
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("spoiled call: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// editConfig changes genie_config.json at a dotted path (nil deletes).
func editConfig(t testing.TB, dir, path string, v any) {
	t.Helper()
	testjson.Edit(t, filepath.Join(dir, ConfigFile), func(m map[string]any) {
		keys := strings.Split(path, ".")
		cur := m
		for _, k := range keys[:len(keys)-1] {
			cur = cur[k].(map[string]any)
		}
		if v == nil {
			delete(cur, keys[len(keys)-1])
		} else {
			cur[keys[len(keys)-1]] = v
		}
	})
}

// TestBadBundles: every bad bundle is refused with an error naming the file and the field.
func TestBadBundles(t *testing.T) {
	costtest.SkipNumericUnderRace(t, "writes a bundle per bad case")
	rt := openRuntime(t)
	bins := func(dir string) []any {
		var out []any
		for k := 1; k <= 3; k++ {
			out = append(out, geniesim.PartFile("tiny", k, 3))
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		precision string
		edit      func(t *testing.T, dir string)
		want      []string
	}{
		{"missing part", "f32", func(t *testing.T, dir string) {
			editConfig(t, dir, "dialog.engine.model.binary.ctx-bins", bins(dir)[:2])
		}, []string{"tiny_part_1_of_3.bin", "part 1 of 3", "ctx-bins[0] of 2"}},
		{"extra part", "f32", func(t *testing.T, dir string) {
			editConfig(t, dir, "dialog.engine.model.binary.ctx-bins", append(bins(dir), geniesim.PartFile("tiny", 3, 3)))
		}, []string{"dialog.engine.model.binary.ctx-bins[3]", "is ctx-bins[2] too"}},
		{"parts out of order", "f32", func(t *testing.T, dir string) {
			b := bins(dir)
			editConfig(t, dir, "dialog.engine.model.binary.ctx-bins", []any{b[1], b[0], b[2]})
		}, []string{"tiny_part_2_of_3.bin", "ctx-bins[0]"}},
		{"missing part file", "f32", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, geniesim.PartFile("tiny", 2, 3)))
		}, []string{ConfigFile, "dialog.engine.model.binary.ctx-bins[1]", "no such file"}},
		{"kv-dim", "f32", func(t *testing.T, dir string) {
			editConfig(t, dir, "dialog.engine.backend.QnnHtp.kv-dim", 64)
		}, []string{ConfigFile, "kv-dim is 64", "head dim is 16"}},
		{"context size", "f32", func(t *testing.T, dir string) {
			editConfig(t, dir, "dialog.context.size", 4096)
		}, []string{ConfigFile, "dialog.context.size is 4096", "context length is 64"}},
		{"missing tokenizer", "f32", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "tokenizer.json"))
		}, []string{ConfigFile, "dialog.tokenizer.path", "tokenizer.json"}},
		{"unknown version", "f32", func(t *testing.T, dir string) {
			editConfig(t, dir, "dialog.version", 2)
		}, []string{ConfigFile, "dialog.version", "unknown config version 2"}},
		{"dialog type ssd", "f32", func(t *testing.T, dir string) {
			editConfig(t, dir, "dialog.type", "ssd")
		}, []string{ConfigFile, "dialog.type", `"ssd"`, "self-speculative"}},
		{"dialog type lade", "f32", func(t *testing.T, dir string) {
			editConfig(t, dir, "dialog.type", "lade")
		}, []string{"dialog.type", `"lade"`, "lookahead"}},
		{"other family", "f32", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type":"gemma3","architectures":["Gemma3ForCausalLM"]}`), 0o644)
		}, []string{"config.json", "model_type", `"gemma3"`, "sliding-window attention is not supported"}},
		{"unknown family", "f32", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"architectures":["PlamoForCausalLM"]}`), 0o644)
		}, []string{"config.json", `"plamo"`, "llama, phi3, qwen2, qwen3"}},
		{"truncated binary", "f32", func(t *testing.T, dir string) {
			p := filepath.Join(dir, geniesim.PartFile("tiny", 3, 3))
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()/2)
		}, []string{"tiny_part_3_of_3.bin", "ctx-bins[2]"}},
		{"corrupted binary", "f32", func(t *testing.T, dir string) {
			p := filepath.Join(dir, geniesim.PartFile("tiny", 2, 3))
			b, _ := os.ReadFile(p)
			copy(b, "NOTABIN!")
			os.WriteFile(p, b, 0o644)
		}, []string{"tiny_part_2_of_3.bin", "ctx-bins[1]"}},
		{"parts of different C", "f32", func(t *testing.T, dir string) {
			writePart(t, dir, 2, func(h *simfile.Hyper, s *simfile.GenieSpec) { h.Ctx = 128 }, nil)
		}, []string{"different context lengths"}},
		{"ctx-bin without the token graph", "f32", func(t *testing.T, dir string) {
			writePart(t, dir, 2, nil, func(gs []simfile.Graph) []simfile.Graph { return gs[:1] })
		}, []string{"tiny_part_3_of_3.bin", "no graph of AR 1"}},
		{"mismatched KV quantisation", "w4a16", func(t *testing.T, dir string) {
			writePart(t, dir, 1, nil, func(gs []simfile.Graph) []simfile.Graph {
				for i, o := range gs[1].Outputs {
					if o.Name == "past_key_0_out" {
						gs[1].Outputs[i].Scale *= 2
					}
				}
				return gs
			})
		}, []string{"tiny_part_2_of_3.bin", "past_key_0_in", "past_key_0_out", "share their quantisation"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeBundle(t, tc.precision, 3)
			tc.edit(t, dir)
			r, err := Open(Config{Dir: dir, Runtime: rt})
			if err == nil {
				r.Close()
				t.Fatal("opened")
			}
			testerr.Mentions(t, err, tc.want...)
		})
	}
}

// TestNVocabFromLogits: as in Genie, the logits' width is the vocabulary whatever
// dialog.context.n-vocab says (AI Hub's Qwen2.5-7B config: 131072, below its end tokens
// 151643–151645), and end tokens past the logits load, never sampled; both are noted at load.
func TestNVocabFromLogits(t *testing.T) {
	rt := openRuntime(t)
	for _, tc := range []struct {
		name   string
		nVocab int
		eos    []any
		notes  []string
	}{
		{"smaller, end tokens past it", 1000, []any{128001, 128009}, []string{"n-vocab is 1000 but the logits have 128256 entries"}},
		{"larger", 128300, nil, []string{"n-vocab is 128300 but the logits have 128256 entries"}},
		{"end token past the logits", 131072, []any{128009, 130000}, []string{"n-vocab is 131072", "end token 130000 is past the logits' 128256 entries"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeBundle(t, "f32", 3)
			editConfig(t, dir, "dialog.context.n-vocab", tc.nVocab)
			if tc.eos != nil {
				editConfig(t, dir, "dialog.context.eos-token", tc.eos)
			}
			var log strings.Builder
			r, err := Open(Config{Dir: dir, Runtime: rt, Logger: zerolog.New(&log)})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if v := r.Info().VocabSize; v != 128256 {
				t.Errorf("vocabulary %d, want the logits' 128256", v)
			}
			for _, n := range tc.notes {
				if !strings.Contains(log.String(), n) {
					t.Errorf("the load does not note %q:\n%s", n, log.String())
				}
			}
		})
	}
}

// writePart rewrites part k (0-based) of a tiny bundle with edited hyper-parameters or graphs.
func writePart(t testing.TB, dir string, k int, hyper func(*simfile.Hyper, *simfile.GenieSpec), graphs func([]simfile.Graph) []simfile.Graph) {
	t.Helper()
	c := tinyllama.Tiny()
	o := geniesim.Options{Config: c, Name: "tiny", Precision: "f32", Weights: simfile.WeightF16, Parts: 3, PromptAR: testAR, Ctx: testCtx}
	if graphs != nil {
		o.Precision = "w4a16"
	}
	s, err := geniesim.Spec(o)
	if err != nil {
		t.Fatal(err)
	}
	h := geniesim.Hyper(c, testCtx)
	if hyper != nil {
		hyper(&h, &s)
	}
	sh, gs, err := simfile.GeniePart(h, s, k)
	if err != nil {
		t.Fatal(err)
	}
	if graphs != nil {
		gs = graphs(gs)
	}
	ws, names := simfile.ETWeightSpecs(sh, k == 2)
	f, err := os.Create(filepath.Join(dir, geniesim.PartFile("tiny", k+1, 3)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = simfile.WriteWith(f, sh, gs, ws, simfile.Options{Format: simfile.WeightF16, SourceRows: func(j int, w simfile.Weight, row0 int, dst []uint16) error {
		return tinyllama.Fill(c, names[j], row0*w.Cols, dst)
	}})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTail: rows in slots from CL − AR on (beyond the AR-8 graphs' past) go through the AR-1
// graphs row by row, and still equal the reference; the context is CL − 1.
func TestTail(t *testing.T) {
	rt := openRuntime(t)
	r := openRunner(t, rt, writeBundle(t, "f32", 3))
	if r.Info().ContextLen != testCtx-1 {
		t.Fatalf("context %d, want %d", r.Info().ContextLen, testCtx-1)
	}
	toks := make([]int32, testCtx-1)
	for i, d := range tinyllama.Draws(3, len(toks)) {
		toks[i] = int32(d % 128000)
	}
	toks[0] = 128000
	ref := reference(t, toks)
	id, _ := r.Open(len(toks))
	var got []sample.Logits
	for s := 0; s < len(toks); {
		n := min(testAR, len(toks)-s)
		got = append(got, step(t, r, inference.Run{Seq: id, Start: s, Tokens: toks[s : s+n]})[0]...)
		s += n
	}
	for i, l := range got {
		if d := maxDiff(t, l, ref[i]); d > 1e-3 {
			t.Errorf("row %d: max |Δlogit| %g", i, d)
		}
	}
	if c := r.Stats().Graphs[r.ars[0].names[2]].Calls; c < int64(testCtx-1-(testCtx-testAR)) {
		t.Errorf("the AR-1 graphs ran %d times; the last %d rows need them", c, testCtx-1-(testCtx-testAR))
	}
}

// TestSlowFirstCallDoesNotStick: an AR-8 call whose first execute was slow (600 ms: cold caches
// after a build) gets a call again within plan.IdleStepsWarming one-row Steps, and once its real
// cost is measured it is chosen and StepCost prices several rows as one call, not as rows one by
// one (the first Genie concurrency run after a build once stayed on one-row AR-1 steps: its
// StepCost made the engine split the rows, and Genie's choice never re-measured AR-8).
func TestSlowFirstCallDoesNotStick(t *testing.T) {
	rt := openRuntime(t)
	r := openRunner(t, rt, writeBundle(t, "f32", 3))
	t.Setenv("HOSTSIM_LATENCY_US_PREFILL", "600000")
	t.Setenv("HOSTSIM_LATENCY_US_DECODE", "20000")
	id, _ := r.Open(32)
	step(t, r, inference.Run{Seq: id, Tokens: prompt[:2]})            // AR-8 measured once, at 600 ms
	step(t, r, inference.Run{Seq: id, Start: 2, Tokens: prompt[2:3]}) // AR-1 measured
	if one, four := r.StepCost(1), r.StepCost(4); four < 4*one*19/20 {
		t.Fatalf("before: StepCost(4) %v below 4 × StepCost(1) %v: AR-8 not priced at its slow call", four, one)
	}
	t.Setenv("HOSTSIM_LATENCY_US_PREFILL", "5000") // AR-8's real cost: below one AR-1 call
	wide := func() int64 { return r.Stats().Graphs[r.ars[1].names[0]].Calls }
	before := wide()
	const steps = plan.IdleStepsWarming + 8
	for i := range steps {
		step(t, r, inference.Run{Seq: id, Start: 3 + i, Tokens: []int32{prompt[i%len(prompt)]}})
	}
	if got := wide() - before; got < 6 {
		t.Fatalf("the AR-8 graphs ran %d times in %d one-row Steps after a slow first call, want a re-measure within %d Steps and them chosen after",
			got, steps, plan.IdleStepsWarming)
	}
	if one, four := r.StepCost(1), r.StepCost(4); four >= 4*one*19/20 {
		t.Errorf("after: StepCost(4) %v, 4 × StepCost(1) %v: the engine would still split the rows", four, one)
	}
}

// TestLoadOptions: a bundle whose QnnHtp backend sets spill-fill-bufsize and mmap-budget loads
// its parts as Genie does: one multi-context group sharing a spill-fill buffer of that size (the
// first part starts it, the others join it) and that read budget; it answers as before.
func TestLoadOptions(t *testing.T) {
	dir := writeBundle(t, "f32", 3)
	editConfig(t, dir, "dialog.engine.backend.QnnHtp.spill-fill-bufsize", 1<<20)
	editConfig(t, dir, "dialog.engine.backend.QnnHtp.mmap-budget", 25)
	var logs bytes.Buffer
	log := zerolog.New(&logs)
	hs := hostsimtest.Dir(t)
	rt, err := qnn.Open(qnn.Config{Backend: filepath.Join(hs, "libQnnHtp.so"), System: filepath.Join(hs, "libQnnSystem.so"),
		RPCMem: filepath.Join(hs, "libcdsprpc.so"), Logger: &log, LogLevel: qnn.LogInfo})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	r := openRunner(t, rt, dir)
	created := regexp.MustCompile(`context created: .*spill-fill group (\w+) \((\d+) B\), read budget (\d+) MB`).FindAllStringSubmatch(logs.String(), -1)
	if len(created) != 3 {
		t.Fatalf("%d contexts created, want 3; log:\n%s", len(created), logs.String())
	}
	for i, m := range created {
		want := "joined"
		if i == 0 {
			want = "started"
		}
		if m[1] != want || m[2] != "1048576" || m[3] != "25" {
			t.Errorf("part %d: group %s (%s B), read budget %s MB; want %s (1048576 B), 25 MB", i, m[1], m[2], m[3], want)
		}
	}
	ref := reference(t, prompt)
	id, err := r.Open(len(prompt))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range step(t, r, inference.Run{Seq: id, Start: 0, Tokens: prompt[:7]})[0] {
		if d := maxDiff(t, l, ref[i]); d > 1e-3 {
			t.Errorf("row %d: max |Δlogit| %g against the reference", i, d)
		}
	}
}

// BenchmarkDecodeStep: one sequence's one-row Steps (the decode loop) on the tiny float32
// bundle in 3 parts, graphs and all; allocs/op is the runner's per-step garbage.
func BenchmarkDecodeStep(b *testing.B) {
	r := openRunner(b, openRuntime(b), writeBundle(b, "f32", 3))
	ctx := context.Background()
	var id inference.SeqID
	pos := testCtx
	b.ReportAllocs()
	for b.Loop() {
		if pos == testCtx-testAR {
			b.StopTimer()
			r.Release(id)
			pos = testCtx
		}
		if pos == testCtx {
			b.StopTimer()
			var err error
			if id, err = r.Open(testCtx - testAR); err != nil {
				b.Fatal(err)
			}
			if _, err = r.Step(ctx, []inference.Run{{Seq: id, Tokens: prompt[:testAR]}}); err != nil {
				b.Fatal(err)
			}
			pos = testAR
			b.StartTimer()
		}
		if _, err := r.Step(ctx, []inference.Run{{Seq: id, Start: pos, Tokens: prompt[pos%len(prompt) : pos%len(prompt)+1]}}); err != nil {
			b.Fatal(err)
		}
		pos++
	}
}
