//go:build !nomkmodel

package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hexserve/hexserve/hexagon/genie/geniesim"
	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/qhexrt"
	"github.com/hexserve/hexserve/hexagon/qhexrt/bundle"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/inference/inferencetest"
	"github.com/hexserve/hexserve/internal/costtest"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// mkmodelBuilt says whether this build has the mkmodel subcommand.
const mkmodelBuilt = true

// runMk runs `hexserve mkmodel args` and returns its exit code, stdout and
// stderr. Under -race it runs `$HEXSERVE_BIN mkmodel` (make test builds it from the
// same source) when that is set: writing a model is numeric work on one
// goroutine, 5–10× slower under the race detector for nothing it checks; the
// pass without -race runs mkmodel in-process.
func runMk(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if bin := os.Getenv("HEXSERVE_BIN"); costtest.Race && bin != "" {
		cmd := exec.Command(bin, append([]string{"mkmodel"}, args...)...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			return exit.ExitCode(), out.String(), errb.String()
		case err != nil:
			t.Fatalf("%s mkmodel: %v", bin, err)
		}
		return 0, out.String(), errb.String()
	}
	code := mkmodel(args, &out, &errb)
	return code, out.String(), errb.String()
}

// testTmp holds what tests share across the run; TestMain removes it.
var testTmp string

func TestMain(m *testing.M) {
	var err error
	if testTmp, err = os.MkdirTemp("", "hexserve-cmd-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(testTmp)
	os.Exit(code)
}

// mkTiny writes the tiny preset in format to dir with the repository's
// tokenizer and the extra flags, failing t if mkmodel does.
func mkTiny(t *testing.T, format, dir string, extra ...string) {
	t.Helper()
	args := append([]string{"--format", format, "--preset", "tiny", "--out", dir, "--tokenizer", testTokenizer}, extra...)
	if code, _, stderr := runMk(t, args...); code != 0 {
		t.Fatalf("mkmodel %s: %s", format, stderr)
	}
}

// mkFamily writes the tiny preset of family in format (64 positions, AR 8,
// f16 weights) with the tokenizer tok to a new temporary folder and
// returns it, failing t if mkmodel does.
func mkFamily(t *testing.T, family, format, tok string) string {
	t.Helper()
	out := t.TempDir()
	code, stdout, stderr := runMk(t, "--family", family, "--preset", "tiny", "--format", format, "--ctx", "64",
		"--prefill-chunk", "8", "--weights", "f16", "--out", out, "--tokenizer", tok)
	if code != 0 {
		t.Fatalf("%s %s: exit %d: %s%s", family, format, code, stdout, stderr)
	}
	return out
}

// readJSON decodes the JSON file at path into v.
func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		t.Fatal(err)
	}
}

var tiny struct {
	once             sync.Once
	dir, out, errOut string
	code             int
}

// tinyBundle returns the default tiny bundle (mkmodel --preset tiny with the
// repository's tokenizer) and mkmodel's stdout. It is written once per run
// (mkmodel takes seconds under -race) and shared: tests must not modify it.
func tinyBundle(t *testing.T) (dir, stdout string) {
	t.Helper()
	tiny.once.Do(func() {
		tiny.dir = filepath.Join(testTmp, "tiny")
		tiny.code, tiny.out, tiny.errOut = runMk(t, "--preset", "tiny", "--out", tiny.dir, "--tokenizer", testTokenizer)
	})
	if tiny.code != 0 {
		t.Fatalf("mkmodel --preset tiny: exit %d: %s", tiny.code, tiny.errOut)
	}
	return tiny.dir, tiny.out
}

// tinyGenie writes the tiny model as a three-part Genie bundle (AR 8, 64
// positions) of precision and weights, with an empty tokenizer.json, to a
// new temporary folder and returns it.
func tinyGenie(t *testing.T, precision string, weights simfile.WeightFormat) string {
	t.Helper()
	dir := t.TempDir()
	err := geniesim.Write(dir, geniesim.Options{Config: tinyllama.Tiny(), Name: "tiny", Precision: precision,
		Weights: weights, Parts: 3, PromptAR: 8, Ctx: 64})
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte("{}"), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func readSim(t *testing.T, path string) *simfile.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sf, err := simfile.Read(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	st, _ := f.Stat()
	if st.Size() != sf.Size {
		t.Errorf("%s: %d bytes, header says %d", path, st.Size(), sf.Size)
	}
	return sf
}

func findTensor(g simfile.Graph, name string) (simfile.Tensor, bool) {
	for _, ts := range [][]simfile.Tensor{g.Inputs, g.Outputs} {
		for _, t := range ts {
			if t.Name == name {
				return t, true
			}
		}
	}
	return simfile.Tensor{}, false
}

func TestMkmodelTinyDefaults(t *testing.T) {
	out, stdout := tinyBundle(t)
	if !strings.Contains(stdout, "wrote ") {
		t.Errorf("stdout %q", stdout)
	}
	b, err := bundle.Read(out, "v79")
	if err != nil {
		t.Fatal(err)
	}
	cfg := tinyllama.Tiny()
	m := b.Manifest
	if m.Model.Name != "tinyllama-public" || m.Params.Hidden != 64 || m.Params.Vocab != 128256 || m.Params.NLayers != 2 ||
		m.Params.MaxCtx != 512 || m.Params.KVDim != 32 || m.Params.HeadDim != 16 || m.Params.RopeTheta != 500000 ||
		!reflect.DeepEqual(m.Params.EOSTokenID, bundle.IDs{128009}) || *m.Chat.BOS != 128000 {
		t.Errorf("manifest: %+v", m)
	}
	s := b.Settings
	if s.Contract != "qhexrt" || s.Mask != "additive" || s.NHeads != 4 || s.NKVHeads != 2 || s.PrefillWindow != 128 ||
		s.RMSEps != 1e-5 || !reflect.DeepEqual(s.RopeScaling, bundle.DefaultRopeScaling()) || !reflect.DeepEqual(s.EOSTokenIDs, []int{128001, 128008, 128009}) {
		t.Errorf("settings: %+v", s)
	}
	for _, f := range []string{"LICENSE", "NOTICE", "tokenizer.json"} {
		want, _ := os.ReadFile(filepath.Join(filepath.Dir(testTokenizer), f))
		got, err := os.ReadFile(filepath.Join(b.Dir, f))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s not copied (%v)", f, err)
		}
	}

	// Context binaries: one graph each, shapes per FORMAT.md, int8 weights.
	h := simfile.Hyper{Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 256, Vocab: 128256, Ctx: 512, RMSEps: 1e-5, TiedLMHead: true}
	for _, c := range []struct {
		path, graph string
		kind        simfile.Kind
		weights     int
	}{{b.PrefillBin, "prefill", simfile.Prefill, 19}, {b.DecodeBin, "decode", simfile.Decode, 19}, {b.LMHeadBin, "lmhead", simfile.LMHead, 1}} {
		sf := readSim(t, c.path)
		if sf.Hyper != h {
			t.Errorf("%s: hyper %+v, want %+v", c.path, sf.Hyper, h)
		}
		if len(sf.Graphs) != 1 || sf.Graphs[0].Name != c.graph || sf.Graphs[0].Kind != c.kind {
			t.Fatalf("%s: graphs %+v", c.path, sf.Graphs)
		}
		if len(sf.Weights) != c.weights {
			t.Errorf("%s: %d weights, want %d", c.path, len(sf.Weights), c.weights)
		}
		for _, w := range sf.Weights {
			want := simfile.WeightInt8
			if w.Rows == 1 {
				want = simfile.WeightF16
			}
			if w.Format != want {
				t.Errorf("%s: %s stored as %d, want %d", c.path, w.Name, w.Format, want)
			}
		}
	}
	pre := readSim(t, b.PrefillBin).Graphs[0]
	for name, dims := range map[string][]int{"x": {128, 64}, "cos": {128, 16}, "cmask": {128, 128}, "y": {128, 64}, "new_k_1": {128, 32}} {
		tt, ok := findTensor(pre, name)
		if !ok || !reflect.DeepEqual(tt.Dims, dims) || (name != "new_k_1" && tt.DType != simfile.F16) {
			t.Errorf("prefill %s: %+v (found %v), want dims %v", name, tt, ok, dims)
		}
	}
	if _, ok := findTensor(pre, "past_k_0"); ok {
		t.Error("qhexrt prefill has past_k_0")
	}
	dec := readSim(t, b.DecodeBin).Graphs[0]
	if tt, _ := findTensor(dec, "past_v_1"); !reflect.DeepEqual(tt.Dims, []int{512, 32}) || tt.DType != simfile.F16 {
		t.Errorf("decode past_v_1: %+v", tt)
	}

	// The lm-head's int8 rows dequantise to the generated embedding within half a step.
	lm := readSim(t, b.LMHeadBin)
	checkInt8Rows(t, b.LMHeadBin, lm.Weights[0], cfg, []int{0, 1, 128000, 128255})

	// Embedding table: size and rows.
	checkEmbed(t, b.Embed, cfg)
}

func checkEmbed(t *testing.T, path string, cfg tinyllama.Config) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	if want := int64(cfg.VocabSize * cfg.HiddenSize * 2); st.Size() != want {
		t.Fatalf("embed: %d bytes, want %d", st.Size(), want)
	}
	H := cfg.HiddenSize
	for _, row := range []int{0, 1, cfg.VocabSize / 3, cfg.VocabSize - 1} {
		buf := make([]byte, 2*H)
		if _, err := f.ReadAt(buf, int64(row*H*2)); err != nil {
			t.Fatal(err)
		}
		want := make([]uint16, H)
		if err := tinyllama.Fill(cfg, "model.embed_tokens.weight", row*H, want); err != nil {
			t.Fatal(err)
		}
		for i := range H {
			if got := binary.LittleEndian.Uint16(buf[2*i:]); got != want[i] {
				t.Fatalf("embed row %d col %d: %#04x, want %#04x", row, i, got, want[i])
			}
		}
	}
}

func checkInt8Rows(t *testing.T, path string, w simfile.WeightInfo, cfg tinyllama.Config, rows []int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if w.Format != simfile.WeightInt8 || w.Name != "model.embed_tokens.weight" {
		t.Fatalf("weight %+v", w)
	}
	for _, r := range rows {
		q := make([]byte, w.Cols)
		sb := make([]byte, 4)
		f.ReadAt(q, w.Offset+int64(r*w.Cols))
		f.ReadAt(sb, w.ScalesOffset+int64(4*r))
		scale := math.Float32frombits(binary.LittleEndian.Uint32(sb))
		want := make([]float32, w.Cols)
		if err := tinyllama.FillFloat32(cfg, w.Name, r*w.Cols, want); err != nil {
			t.Fatal(err)
		}
		for c := range w.Cols {
			got := float32(int8(q[c])) * scale
			if d := math.Abs(float64(got - want[c])); d > float64(scale)/2*1.0001 {
				t.Fatalf("row %d col %d: %v, want %v (scale %v)", r, c, got, want[c], scale)
			}
		}
	}
}

func TestMkmodelVariants(t *testing.T) {
	out := t.TempDir()
	code, _, stderr := runMk(t, "--config", "../../testdata/tinyllama/golden_tiny_public.json", "--out", out,
		"--tokenizer", testTokenizer, "--weights", "f16", "--io", "u16", "--kv", "f32", "--mask", "u16",
		"--contract", "chunked", "--layout", "shared", "--prefill-chunk", "32", "--ctx", "256", "--name", "t2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := bundle.Read(filepath.Join(out, "v79"), "v79")
	if err != nil {
		t.Fatal(err)
	}
	if b.Settings.Contract != "chunked" || b.Settings.Mask != "u16" || b.Settings.PrefillWindow != 32 || b.Manifest.Model.Name != "t2" {
		t.Errorf("settings %+v", b.Settings)
	}
	if b.PrefillBin != b.DecodeBin || filepath.Base(b.PrefillBin) != "model.bin" || filepath.Base(b.LMHeadBin) != "lmhead.bin" {
		t.Errorf("shared layout: %s %s %s", b.PrefillBin, b.DecodeBin, b.LMHeadBin)
	}
	var info map[string]any
	json.Unmarshal(b.Manifest.Extra["mkmodel"], &info)
	if info["weights"] != "f16" || info["io"] != "u16" || info["kv"] != "f32" || info["layout"] != "shared" {
		t.Errorf("mkmodel info %v", info)
	}

	sf := readSim(t, b.PrefillBin)
	if len(sf.Graphs) != 2 || sf.Hyper.Ctx != 256 {
		t.Fatalf("model.bin: %+v", sf)
	}
	for _, w := range sf.Weights {
		if w.Format != simfile.WeightF16 {
			t.Errorf("%s stored as %d", w.Name, w.Format)
		}
	}
	pre, dec := sf.Graphs[0], sf.Graphs[1]
	if pre.Contract != simfile.Chunked || pre.Window != 32 || dec.Kind != simfile.Decode {
		t.Errorf("graphs %+v %+v", pre, dec)
	}
	tests := []struct {
		g      simfile.Graph
		name   string
		dt     simfile.DType
		dims   []int
		scale  float32
		offset int32
	}{
		{pre, "x", simfile.UFixed16, []int{32, 64}, 2.0 / 65535, -32768},
		{pre, "cos", simfile.UFixed16, []int{32, 16}, 2.0 / 65535, -32768},
		{pre, "cmask", simfile.UFixed16, []int{32, 288}, 1, -65535}, // code 65535 → 0 (attend), 0 → −65535
		{pre, "past_k_0", simfile.F32, []int{256, 32}, 0, 0},
		{pre, "y", simfile.UFixed16, []int{32, 64}, 256.0 / 65535, -32768},
		{pre, "new_v_1", simfile.F32, []int{32, 32}, 0, 0},
		{dec, "cmask", simfile.UFixed16, []int{256}, 1, -65535},
	}
	for _, c := range tests {
		tt, ok := findTensor(c.g, c.name)
		if !ok || tt.DType != c.dt || !reflect.DeepEqual(tt.Dims, c.dims) || tt.Scale != c.scale || tt.Offset != c.offset {
			t.Errorf("%s %s: %+v, want %v %v %v/%v", c.g.Name, c.name, tt, c.dt, c.dims, c.scale, c.offset)
		}
	}
	lm := readSim(t, b.LMHeadBin).Graphs[0]
	if x, y := lm.Inputs[0], lm.Outputs[0]; x.Scale != 256.0/65535 || y.Scale != 256.0/65535 || !reflect.DeepEqual(y.Dims, []int{1, 128256}) {
		t.Errorf("lm-head io %+v %+v", x, y)
	}
	// f16 weights are the generated bits exactly.
	f, _ := os.Open(b.PrefillBin)
	defer f.Close()
	for _, w := range sf.Weights[:3] {
		want, _ := tinyllama.Generate(tinyllama.Tiny(), w.Name)
		buf := make([]byte, w.Size)
		f.ReadAt(buf, w.Offset)
		for i := range want {
			if binary.LittleEndian.Uint16(buf[2*i:]) != want[i] {
				t.Fatalf("%s[%d] differs", w.Name, i)
			}
		}
	}

	// Rewriting the same directory works and replaces the manifest.
	if code, _, stderr := runMk(t, "--preset", "tiny", "--out", out, "--tokenizer", testTokenizer, "--mask", "additive", "--layout", "shared"); code != 0 {
		t.Fatalf("rewrite: %s", stderr)
	}
	if b, err := bundle.Read(out, "v79"); err != nil || b.Settings.Mask != "additive" {
		t.Errorf("after rewrite: %v", err)
	}
}

func TestMkmodelErrors(t *testing.T) {
	out := t.TempDir()
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--help"}, 0, "usage: hexserve mkmodel"},
		{[]string{"--out", out}, 2, "--preset or --config"},
		{[]string{"--preset", "tiny"}, 2, "--out is required"},
		{[]string{"--preset", "tiny", "--config", "x.json", "--out", out}, 2, "not both"},
		{[]string{"--preset", "huge", "--out", out}, 2, "unknown preset"},
		{[]string{"--preset", "tiny", "--out", out, "--weights", "int4"}, 2, "--weights"},
		{[]string{"--preset", "tiny", "--out", out, "--io", "bf16"}, 2, "--io"},
		{[]string{"--preset", "tiny", "--out", out, "--kv", "u16"}, 2, "--kv"},
		{[]string{"--preset", "tiny", "--out", out, "--mask", "bool"}, 2, "--mask"},
		{[]string{"--preset", "tiny", "--out", out, "--contract", "x"}, 2, "--contract"},
		{[]string{"--preset", "tiny", "--out", out, "--layout", "x"}, 2, "--layout"},
		{[]string{"--preset", "tiny", "--out", out, "--tensors", "q=query"}, 2, "--tensors \"q=query\""},
		{[]string{"--preset", "tiny", "--out", out, "--tensors", "x"}, 2, "--tensors \"x\""},
		{[]string{"--preset", "tiny", "--out", out, "--tensors", "past_k=kcache"}, 2, "needs {i}"},
		{[]string{"--preset", "tiny", "--out", out, "--prefill-chunk", "600"}, 2, "--prefill-chunk"},
		{[]string{"--preset", "tiny", "--out", out, "--tokenizer", filepath.Join(out, "none.json")}, 2, "none.json"},
		{[]string{"--config", filepath.Join(out, "missing.json"), "--out", out}, 2, "missing.json"},
		{[]string{"--preset", "tiny", "--out", out, "extra"}, 2, "unexpected argument"},
		{[]string{"--bogus"}, 2, "flag provided but not defined"},
		{[]string{"--family", "gemma3", "--preset", "tiny", "--out", out}, 2, "--family \"gemma3\""},
		{[]string{"--family", "qwen3", "--preset", "tiny", "--out", out, "--tokenizer", "testdata/tokenizer/llama3.2/tokenizer.json"}, 2, "a QHexRT bundle is llama only"},
		{[]string{"--family", "qwen3", "--preset", "llama-3.2-1b", "--format", "genie", "--out", out, "--tokenizer", "testdata/tokenizer/llama3.2/tokenizer.json"}, 2, "unknown preset"},
		{[]string{"--family", "qwen2", "--preset", "tiny", "--format", "pte", "--out", out}, 2, "pass --tokenizer"},
	}
	// Every mistake in the flags is a usage error: exit 2, like a bad flag.
	for _, c := range tests {
		code, stdout, stderr := runMk(t, c.args...)
		if c.code == 0 && (stderr != "" || !strings.Contains(stdout, c.msg)) {
			t.Errorf("%v: --help wrote stdout %q, stderr %q; want the usage on stdout only", c.args, stdout, stderr)
		}
		if code != c.code || !strings.Contains(stdout+stderr, c.msg) {
			t.Errorf("%v: exit %d, output %q; want %d and %q", c.args, code, stdout+stderr, c.code, c.msg)
		}
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("failed runs wrote %d entries", len(entries))
	}
}

// TestMkmodelGoldenThroughHostsim serves mkmodel bundles through the hexagon
// runner on hostsim and compares with the golden file: the float32 path
// (f16 weights are exact, f32 I/O and KV) must reproduce every greedy token
// of the `short` case and its checked logits to 1e-3; the default 16-bit
// bundle (int8 weights, f16 I/O and KV) is judged by top-1 agreement up to
// the first greedy step whose golden margin is below its logit error.
func TestMkmodelGoldenThroughHostsim(t *testing.T) {
	if testing.Short() {
		t.Skip("builds bundles and runs hostsim")
	}
	libs := hostsimLibDir(t)
	// One runtime for every bundle: the libraries stay loaded (hostsim's
	// worker threads do not survive an unload and reload of libQnnHtp.so).
	rt, err := qnn.Open(qnn.Config{Backend: filepath.Join(libs, "libQnnHtp.so"), System: filepath.Join(libs, "libQnnSystem.so"), RPCMem: filepath.Join(libs, "libcdsprpc.so")})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()

	data, err := os.ReadFile("../../testdata/tinyllama/golden_tiny_public.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Cases []struct {
			Name      string  `json:"name"`
			PromptIDs []int32 `json:"prompt_ids"`
			Checks    []struct {
				Pos int         `json:"pos"`
				Top [][]float64 `json:"top"`
			} `json:"checks"`
			Greedy        []int32   `json:"greedy"`
			GreedyMargins []float64 `json:"greedy_margins"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	short := g.Cases[0]

	for _, v := range []struct {
		name  string
		args  []string
		exact bool
	}{
		// every role renamed: hostsim takes the names from the file, the runner from the manifest
		{"renamed", []string{"--weights", "f16", "--io", "f32", "--kv", "f32", "--contract", "chunked", "--prefill-chunk", "4", "--tensors",
			"x=h_in,cos=rope.cos,sin=rope.sin,cmask=attn_mask,y=h_out,past_k=L{i}.k_cache,past_v=L{i}.v_cache,new_k=L{i}.k_new,new_v=L{i}.v_new"}, true},
		{"exact", []string{"--weights", "f16", "--io", "f32", "--kv", "f32"}, true},
		{"default", nil, false},
		{"f16-weights", []string{"--weights", "f16"}, false},
		{"u16-io", []string{"--weights", "f16", "--io", "u16", "--mask", "u16"}, false},
		{"chunked-shared", []string{"--weights", "f16", "--io", "f32", "--kv", "f32", "--contract", "chunked", "--layout", "shared", "--prefill-chunk", "2"}, true},
	} {
		t.Run(v.name, func(t *testing.T) {
			var out string
			if v.args == nil {
				out, _ = tinyBundle(t)
			} else {
				out = t.TempDir()
				args := append([]string{"--preset", "tiny", "--out", out, "--tokenizer", testTokenizer}, v.args...)
				if code, _, stderr := runMk(t, args...); code != 0 {
					t.Fatalf("mkmodel: %s", stderr)
				}
			}
			if v.name == "renamed" {
				dec := readSim(t, filepath.Join(out, "v79", "decode.bin")).Graphs[0]
				if _, ok := findTensor(dec, "L1.v_cache"); !ok {
					t.Fatalf("decode graph lacks L1.v_cache: %+v", dec.Inputs)
				}
				if _, ok := findTensor(dec, "x"); ok {
					t.Fatalf("decode graph still has the default name x")
				}
			}
			r, err := qhexrt.Open(qhexrt.Config{Bundle: out, Arch: "v79", Runtime: rt})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ctx := context.Background()

			// Checked positions: logits of the top-20 golden tokens.
			maxErr := 0.0
			sess := inferencetest.NewSession(r)
			for _, c := range short.Checks {
				l, _, err := sess.Eval(ctx, short.PromptIDs[:c.Pos+1], 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, tl := range c.Top {
					maxErr = max(maxErr, math.Abs(float64(l.At(int(tl[0])))-tl[1]))
				}
				if v.exact && inferencetest.Argmax(l) != int(c.Top[0][0]) {
					t.Errorf("pos %d: top-1 %d, golden %d", c.Pos, inferencetest.Argmax(l), int(c.Top[0][0]))
				}
			}
			t.Logf("%s: max |logit error| over the checked top-20 = %.3g", v.name, maxErr)
			if v.exact && maxErr > 1e-3 {
				t.Errorf("logit error %g > 1e-3", maxErr)
			}

			// Greedy continuation, reusing the KV cache.
			seq := append([]int32(nil), short.PromptIDs...)
			for step, want := range short.Greedy {
				if !v.exact && short.GreedyMargins[step] < 2*maxErr {
					t.Logf("%s: stopping at greedy step %d: golden margin %.3g below the error bound", v.name, step, short.GreedyMargins[step])
					break
				}
				l, _, err := sess.Eval(ctx, seq, len(seq)-1)
				if err != nil {
					t.Fatal(err)
				}
				if got := inferencetest.Argmax(l); got != int(want) {
					t.Fatalf("greedy step %d: %d, golden %d (margin %.3g)", step, got, want, short.GreedyMargins[step])
				}
				seq = append(seq, want)
			}
		})
	}
}

func TestMkmodelCustomConfig(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.json")
	os.WriteFile(cfgPath, []byte(`{"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
		"num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 1000, "rope_theta": 10000,
		"tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2, "init_seed": 7}`), 0o644)
	out := filepath.Join(dir, "bundle")
	code, _, stderr := runMk(t, "--config", cfgPath, "--out", out, "--tokenizer", testTokenizer, "--ctx", "64", "--prefill-chunk", "16")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "the tokenizer has 128256 tokens but the model's vocab_size is 1000") {
		t.Errorf("no vocab warning: %q", stderr)
	}
	b, err := bundle.Read(out, "v79")
	if err != nil {
		t.Fatal(err)
	}
	s := b.Settings
	if b.Manifest.Model.Name != "tinyllama-config" || s.NHeads != 2 || s.NKVHeads != 1 || s.BOS != 1 ||
		!reflect.DeepEqual(s.EOSTokenIDs, []int{2}) || s.RopeScaling.Type != "default" || b.Manifest.Params.HeadDim != 16 {
		t.Errorf("manifest %+v settings %+v", b.Manifest, s)
	}
	cfg, err := tinyllama.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	checkEmbed(t, b.Embed, cfg)
	// Untied: the lm-head file carries lm_head.weight.
	lm := readSim(t, b.LMHeadBin)
	if lm.Hyper.TiedLMHead || len(lm.Weights) != 1 || lm.Weights[0].Name != "lm_head.weight" {
		t.Errorf("lm-head %+v", lm)
	}
}

// TestMkmodelFamily: --family qwen3 writes a Genie bundle and a .pte with the family's config.json
// (model_type, head_dim, no rope scaling), generation_config.json (Qwen3's two end tokens), a
// genie_config.json in AI Hub's Qwen form, and the tokenizer's tokenizer_config.json beside it.
func TestMkmodelFamily(t *testing.T) {
	costtest.SkipNumericUnderRace(t, "writes a test model of each family in two formats")
	tokDir := t.TempDir()
	writeFiles(t, tokDir, map[string]string{"tokenizer.json": "{}", "tokenizer_config.json": `{"chat_template":"x"}`, "LICENSE": "l"})
	for _, format := range []string{"genie", "pte"} {
		out := mkFamily(t, "qwen3", format, filepath.Join(tokDir, "tokenizer.json"))
		var hf struct {
			ModelType string  `json:"model_type"`
			HeadDim   int     `json:"head_dim"`
			Hidden    int     `json:"hidden_size"`
			Scaling   any     `json:"rope_scaling"`
			Theta     float64 `json:"rope_theta"`
		}
		var gen struct {
			EOS []int `json:"eos_token_id"`
		}
		readJSON(t, filepath.Join(out, "config.json"), &hf)
		readJSON(t, filepath.Join(out, "generation_config.json"), &gen)
		if hf.ModelType != "qwen3" || hf.HeadDim != 32 || hf.Hidden != 64 || hf.Scaling != nil || hf.Theta != 1e6 {
			t.Errorf("%s: config.json %+v", format, hf)
		}
		if !slices.Equal(gen.EOS, []int{151645, 151643}) {
			t.Errorf("%s: generation_config.json eos_token_id %v", format, gen.EOS)
		}
		if !fileExists(filepath.Join(out, "tokenizer_config.json")) {
			t.Errorf("%s: tokenizer_config.json not copied", format)
		}
	}
}

// TestMkmodelPhi3: --family phi3 writes Phi-3.5's config.json (model_type phi3, LongRoPE short and
// long factors, original_max_position_embeddings), its end tokens, and for Genie AI Hub's
// phi_3_5_mini_instruct form: parts weight_sharing_model_k_of_N.serialized.bin, the eos list and
// LongRoPE in rope-scaling.
func TestMkmodelPhi3(t *testing.T) {
	costtest.SkipNumericUnderRace(t, "writes Phi-3 test models in two formats")
	tokDir := t.TempDir()
	writeFiles(t, tokDir, map[string]string{"tokenizer.json": "{}", "LICENSE": "l"})
	for _, format := range []string{"genie", "pte"} {
		out := mkFamily(t, "phi3", format, filepath.Join(tokDir, "tokenizer.json"))
		var hf struct {
			ModelType string `json:"model_type"`
			Orig      int    `json:"original_max_position_embeddings"`
			KVHeads   int    `json:"num_key_value_heads"`
			Scaling   struct {
				Type  string    `json:"rope_type"`
				Short []float64 `json:"short_factor"`
			} `json:"rope_scaling"`
		}
		var gen struct {
			EOS []int `json:"eos_token_id"`
		}
		readJSON(t, filepath.Join(out, "config.json"), &hf)
		readJSON(t, filepath.Join(out, "generation_config.json"), &gen)
		if hf.ModelType != "phi3" || hf.Orig != 4096 || hf.KVHeads != 4 || hf.Scaling.Type != "longrope" || len(hf.Scaling.Short) != 8 {
			t.Errorf("%s: config.json %+v", format, hf)
		}
		if !slices.Equal(gen.EOS, []int{32007, 32001, 32000}) {
			t.Errorf("%s: generation_config.json eos_token_id %v", format, gen.EOS)
		}
		if format != "genie" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(out, "genie_config.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`"weight_sharing_model_1_of_3.serialized.bin"`, `"eos-token": [`, `"rope-type": "longrope"`,
			`"original-max-position-embeddings": 4096`, `"long-factor": [`, `"short-factor": [`, `"rope-dim": 8`} {
			if !strings.Contains(string(b), want) {
				t.Errorf("genie_config.json lacks %s:\n%s", want, b)
			}
		}
	}
}

// TestMkmodelGraniteFalcon3: --family granite writes config.json with Granite's multipliers and
// genie_config.json in AI Hub's Granite form (pad-token, positional-encoding θ 1e7); --family
// falcon3 writes model_type llama with head_dim 256, 4 KV heads, θ 1000042 and genie_config.json
// in AI Hub's Falcon3 form (RoPE inside QnnHtp, bos = eos = 11); both in genie and pte.
func TestMkmodelGraniteFalcon3(t *testing.T) {
	costtest.SkipNumericUnderRace(t, "writes four test models of two families")
	tok := filepath.Join("..", "..", "testdata", "tokenizer", "llama3.2", "tokenizer.json")
	for _, tc := range []struct {
		family, format string
		check          func(hf map[string]any, genie string) bool
	}{
		{"granite", "genie", func(hf map[string]any, g string) bool {
			return hf["model_type"] == "granite" && hf["embedding_multiplier"] == 1.25 && hf["attention_multiplier"] == 0.125 &&
				hf["residual_multiplier"] == 0.22 && hf["logits_scaling"] == 8.0 && hf["rope_theta"] == 1e7 &&
				strings.Contains(g, `"pad-token": 0`) && strings.Contains(g, `"rope-theta": 10000000`)
		}},
		{"falcon3", "genie", func(hf map[string]any, g string) bool {
			return hf["model_type"] == "llama" && hf["head_dim"] == 256.0 && hf["num_key_value_heads"] == 4.0 &&
				hf["rope_theta"] == 1000042.0 && hf["vocab_size"] == 131072.0 && hf["rope_scaling"] == nil &&
				strings.Contains(g, `"pos-id-dim": 128`) && strings.Contains(g, `"rope-theta": 1000042`) &&
				strings.Contains(g, `"bos-token": 11`) && !strings.Contains(g, "positional-encoding")
		}},
		{"granite", "pte", func(hf map[string]any, _ string) bool {
			return hf["model_type"] == "granite" && hf["logits_scaling"] == 8.0
		}},
		{"falcon3", "pte", func(hf map[string]any, _ string) bool { return hf["model_type"] == "llama" && hf["head_dim"] == 256.0 }},
	} {
		out := mkFamily(t, tc.family, tc.format, tok)
		var hf map[string]any
		readJSON(t, filepath.Join(out, "config.json"), &hf)
		g, _ := os.ReadFile(filepath.Join(out, "genie_config.json"))
		if !tc.check(hf, string(g)) {
			t.Errorf("%s %s: config.json %v\ngenie_config.json %s", tc.family, tc.format, hf, g)
		}
	}
}
