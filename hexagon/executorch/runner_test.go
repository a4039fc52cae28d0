package executorch

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/pte/ptesim"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/internal/hostsimtest"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

func openRuntime(t testing.TB) *qnn.Runtime {
	t.Helper()
	return openRuntimeLogged(t, nil)
}

// openRuntimeLogged opens hostsim with rpcmem, the QNN log going to lg.
func openRuntimeLogged(t testing.TB, lg *zerolog.Logger) *qnn.Runtime {
	t.Helper()
	dir := hostsimtest.Dir(t)
	rt, err := qnn.Open(qnn.Config{Backend: filepath.Join(dir, "libQnnHtp.so"), System: filepath.Join(dir, "libQnnSystem.so"),
		RPCMem: filepath.Join(dir, "libcdsprpc.so"), Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// ptesOpts are a test .pte's knobs (as mkmodel's flags).
type pteOpts struct {
	ctx, ar, shards int
	kv, logits      simfile.DType
	cfg             *tinyllama.Config // nil: the public tiny Llama
}

// Written .pte files by their options, shared by the package's tests: each
// test gets its own copy (writing one is a float64 calibration pass and the
// whole model's weights). TestMain removes them.
var (
	pteMu    sync.Mutex
	pteFiles = map[string]string{}
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, p := range pteFiles {
		os.RemoveAll(filepath.Dir(p))
	}
	os.Exit(code)
}

// writePTE gives the test its own copy of the public tiny model (or o.cfg)
// as a .pte (float16 weights).
func writePTE(t testing.TB, o pteOpts) string {
	t.Helper()
	cfg := tinyllama.Tiny()
	if o.cfg != nil {
		cfg = *o.cfg
	}
	key := fmt.Sprintf("%d/%d/%d/%v/%v/%+v", o.ctx, o.ar, o.shards, o.kv, o.logits, cfg)
	src := func() string {
		pteMu.Lock()
		defer pteMu.Unlock()
		if p, ok := pteFiles[key]; ok {
			return p
		}
		dir, err := os.MkdirTemp("", "pte-test-")
		if err != nil {
			t.Fatal(err)
		}
		p := newPTE(t, o, dir)
		pteFiles[key] = p
		return p
	}()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// newPTE writes the public tiny model (or o.cfg) as a .pte in dir.
func newPTE(t testing.TB, o pteOpts, dir string) string {
	t.Helper()
	c := tinyllama.Tiny()
	if o.cfg != nil {
		c = *o.cfg
	}
	s := simfile.ETSpec{PrefillAR: o.ar, KV: o.kv, Logits: o.logits, Mask: simfile.UFixed16, Shards: o.shards}
	if s.CrossDType() == simfile.F32 {
		s.Mask = simfile.F32
	}
	m, err := tinyllama.NewModel(c)
	if err != nil {
		t.Fatal(err)
	}
	toks := []int{c.BOSTokenID}
	for _, d := range tinyllama.Draws(7, 63) {
		toks = append(toks, d%c.VocabSize)
	}
	r, err := m.Calibrate(toks)
	if err != nil {
		t.Fatal(err)
	}
	for l := range r.K {
		s.KRange, s.VRange = append(s.KRange, float32(1.25*r.K[l])), append(s.VRange, float32(1.25*r.V[l]))
	}
	s.LogitsRange, s.HiddenRange = float32(1.25*r.Logits), float32(1.25*r.Hidden)
	var scales simfile.Scales // Granite's multipliers (a runner imports no sibling runner's writer)
	if c.Granite() {
		scales = simfile.Scales{Embedding: float32(c.EmbeddingMultiplier), Attention: float32(c.AttentionMultiplier),
			Residual: float32(c.ResidualMultiplier), Logits: float32(c.LogitsScaling)}
	}
	h := simfile.Hyper{Hidden: c.HiddenSize, Layers: c.NumHiddenLayers, Heads: c.NumAttentionHeads,
		KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim, FFN: c.IntermediateSize, Vocab: c.VocabSize, Ctx: o.ctx,
		RMSEps: float32(c.RMSNormEps), TiedLMHead: c.TieWordEmbeddings, QKNorm: c.QKNorm(), QKVBias: c.QKVBias(),
		Scales: scales, Rope: simfile.Rope{Theta: float32(c.RopeTheta), Scaling: c.Rope()}}
	p := filepath.Join(dir, fmt.Sprintf("tiny-%d-%d-%d.pte", o.ctx, o.ar, o.shards))
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	err = ptesim.Write(f, h, s, simfile.WeightF16, func(name string, start int, dst []uint16) error {
		return tinyllama.Fill(c, name, start, dst)
	}, nil, nil)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type goldenCase struct {
	Name      string  `json:"name"`
	PromptIDs []int32 `json:"prompt_ids"`
	Greedy    []int32 `json:"greedy"`
}

func loadGolden(t testing.TB) []goldenCase { return loadGoldenFile(t, "golden_tiny_public.json") }

// loadGoldenFile reads the cases of testdata/tinyllama/<name>.
func loadGoldenFile(t testing.TB, name string) []goldenCase {
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "tinyllama", name))
	if err != nil {
		t.Fatal(err)
	}
	var g struct{ Cases []goldenCase }
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g.Cases
}

func argmax(l sample.Logits) int32 {
	best, bi := float32(math.Inf(-1)), 0
	for i := range l.Len() {
		if v := l.At(i); v > best {
			best, bi = v, i
		}
	}
	return int32(bi)
}

// greedy runs prompt then n greedy steps the way the engine calls Eval.
func greedy(t testing.TB, m inference.Model, seq []int32, valid, n int) ([]int32, []int32) {
	t.Helper()
	var out []int32
	for range n {
		l, _, err := evalOn(m).Eval(context.Background(), seq, valid)
		if err != nil {
			t.Fatalf("Eval(%d tokens, valid %d): %v", len(seq), valid, err)
		}
		tok := argmax(l)
		out = append(out, tok)
		valid = len(seq)
		seq = append(seq, tok)
	}
	return out, seq
}

// numericPTE skips in -short runs, else opens the runtime and writes a
// float32 .pte (AR 8) of ctx slots over shards contexts: the model the
// numeric batch tests drive.
func numericPTE(t *testing.T, ctx, shards int) (*qnn.Runtime, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("numeric model runs: the full (non-race) pass runs it")
	}
	return openRuntime(t), writePTE(t, pteOpts{ctx: ctx, ar: 8, shards: shards, kv: simfile.F32, logits: simfile.F32})
}

func openRunner(t testing.TB, rt *qnn.Runtime, path string) *Runner {
	t.Helper()
	r, err := Open(Config{Path: path, Runtime: rt, EOS: []int32{128009}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestGolden: float32 KV and logits reproduce the golden greedy tokens of
// every case (the long case crosses CL − AR, so its tail goes through
// kv_forward), and of the shorter cases with AR 16 and with 2 shards (e2e's
// TestPTEGolden runs every case on those too).
func TestGolden(t *testing.T) {
	rt := openRuntime(t)
	cases := loadGolden(t)
	for i, o := range []pteOpts{
		{ctx: 512, ar: 128, shards: 1, kv: simfile.F32, logits: simfile.F32},
		{ctx: 512, ar: 16, shards: 1, kv: simfile.F32, logits: simfile.F32},
		{ctx: 512, ar: 32, shards: 2, kv: simfile.F32, logits: simfile.F32},
	} {
		t.Run(fmt.Sprintf("ar%d-shards%d", o.ar, o.shards), func(t *testing.T) {
			if testing.Short() && i > 0 {
				t.Skip("-short (make test's -race run, arm64 under qemu): the default chunk only")
			}
			r := openRunner(t, rt, writePTE(t, o))
			for _, c := range cases {
				if (i > 0 || testing.Short()) && c.Name == "long" {
					continue
				}
				got, _ := greedy(t, r, append([]int32(nil), c.PromptIDs...), 0, len(c.Greedy))
				for i := range c.Greedy {
					if got[i] != c.Greedy[i] {
						t.Fatalf("%s: token %d = %d, want %d (got %v)", c.Name, i, got[i], c.Greedy[i], got)
					}
				}
			}
			s := r.Stats()
			t.Logf("graphs %v, restrides %d", s.Graphs, s.Restrides)
		})
	}
}

// TestQuantizedTolerance measures |logit − golden| over the golden checks' top-20 logits with
// uint8 KV and uint16 logits, against the tolerance e2e's TestPTEQuantized documents (1.0).
func TestQuantizedTolerance(t *testing.T) {
	rt := openRuntime(t)
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "tinyllama", "golden_tiny_public.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Cases []struct {
			Name      string
			PromptIDs []int32 `json:"prompt_ids"`
			Checks    []struct {
				Pos int
				Top [][]float64
			}
		}
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	for name, kv := range map[string]simfile.DType{"u8": simfile.UFixed8, "u16": simfile.UFixed16} {
		if testing.Short() && name == "u16" {
			continue // -short (make test's -race run, arm64 under qemu): uint8 KV only
		}
		r := openRunner(t, rt, writePTE(t, pteOpts{ctx: 512, ar: 32, shards: 1, kv: kv, logits: simfile.UFixed16}))
		worst := 0.0
		for _, c := range g.Cases {
			valid := 0 // checks are in order: each continues the cache of the last
			for _, ch := range c.Checks {
				l, _, err := evalOn(r).Eval(context.Background(), c.PromptIDs[:ch.Pos+1], valid)
				valid = ch.Pos + 1
				if err != nil {
					t.Fatal(err)
				}
				if l.Type != sample.U16 {
					t.Fatalf("logits type %v, want U16", l.Type)
				}
				for _, e := range ch.Top {
					worst = max(worst, math.Abs(float64(l.At(int(e[0])))-e[1]))
				}
			}
		}
		t.Logf("KV %s: max |logit − golden| over the checks' top-20 = %.3f", name, worst)
		if worst > 1.0 {
			t.Errorf("KV %s: max logit error %.3f > 1.0", name, worst)
		}
	}
}
