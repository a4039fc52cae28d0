//go:build !nomkmodel

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/pte"
	"github.com/hexserve/hexserve/internal/costtest"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// mkmodel --format pte writes a .pte that hexagon/pte reads, whose delegates are hostsim
// ExecuTorch contexts; the graphs themselves are checked against the reference in hexagon/qnn.
func TestMkmodelPTE(t *testing.T) {
	costtest.SkipNumericUnderRace(t, "writes a .pte per case")
	cases := []struct {
		name   string
		args   []string
		shards int
		kv     simfile.DType
		bits   int64
	}{
		{"defaults", nil, 1, simfile.UFixed8, 8},
		{"f32 two shards", []string{"--kv", "f32", "--logits", "f32", "--shards", "2", "--weights", "f16"}, 2, simfile.F32, 32},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			args := append([]string{"--format", "pte", "--preset", "tiny", "--out", out, "--tokenizer", testTokenizer,
				"--ctx", "64", "--prefill-chunk", "16"}, tc.args...)
			if code, _, stderr := runMk(t, args...); code != 0 {
				t.Fatalf("mkmodel: %s", stderr)
			}
			for _, f := range []string{"tokenizer.json", "LICENSE", "NOTICE"} {
				if _, err := os.Stat(filepath.Join(out, f)); err != nil {
					t.Error(err)
				}
			}
			f, err := pte.Open(filepath.Join(out, "tinyllama-public.pte"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for k, want := range map[string]any{"get_max_context_len": int64(64), "get_n_layers": int64(2),
				"get_vocab_size": int64(128256), "get_kv_io_bit_width": tc.bits} {
				if v := f.Metadata[k]; len(v) != 1 || v[0].Any() != want {
					t.Errorf("%s = %v, want %v", k, v, want)
				}
			}
			pre := f.Method(pte.MethodPrefill)
			if len(pre.Delegates) != tc.shards {
				t.Fatalf("%d delegates, want %d", len(pre.Delegates), tc.shards)
			}
			if mask := pre.Values[pre.Inputs[1]].Tensor; mask.Sizes[2] != 16 || mask.Sizes[3] != 64 {
				t.Errorf("prefill mask %v, want [1,1,16,64]", mask.Sizes)
			}
			for i, d := range pre.Delegates {
				sf, err := simfile.Read(bytes.NewReader(d.Binary))
				if err != nil {
					t.Fatalf("delegate %d: %v", i, err)
				}
				if sf.Hyper.Shards != tc.shards || sf.Hyper.Layers != 2/tc.shards || len(sf.Graphs) != 2 || sf.Graphs[1].KV != tc.kv {
					t.Errorf("delegate %d: %+v, graphs %d", i, sf.Hyper, len(sf.Graphs))
				}
			}
			// The delegates are exactly the shard contexts hexagon/qnn's ExecuTorch tests run
			// against the float64 reference (same writer, same spec). Writing them again
			// doubles the test's cost: -short (make test's -race run) leaves it to the full run.
			if testing.Short() {
				return
			}
			o := mkmodelOptions{preset: "tiny", out: out, kv: "u8", logits: "u16", shards: tc.shards, prefillChunk: 16, ctx: 64, weights: "int8"}
			for k := 0; k+1 < len(tc.args); k += 2 {
				switch tc.args[k] {
				case "--kv":
					o.kv = tc.args[k+1]
				case "--logits":
					o.logits = tc.args[k+1]
				case "--weights":
					o.weights = tc.args[k+1]
				}
			}
			cfg, _, err := modelConfig(&o)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := pteSpec(o, cfg)
			if err != nil {
				t.Fatal(err)
			}
			wf, _ := weightFormat(o.weights)
			for i, d := range pre.Delegates {
				var want bytes.Buffer
				if err := simfile.WriteETShard(&want, pteHyper(cfg, 64), spec, i, wf, func(name string, start int, dst []uint16) error {
					return tinyllama.Fill(cfg, name, start, dst)
				}); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(d.Binary, want.Bytes()) {
					t.Errorf("delegate %d is not the shard context simfile.WriteETShard writes", i)
				}
			}
		})
	}
}

func TestMkmodelPTEErrors(t *testing.T) {
	out := t.TempDir()
	base := []string{"--format", "pte", "--preset", "tiny", "--out", out, "--tokenizer", testTokenizer}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--format", "onnx", "--preset", "tiny", "--out", out}, 2, `--format "onnx"`},
		{append(base, "--io", "f32"), 2, "--io does not apply to --format pte"},
		{append(base, "--layout", "shared"), 2, "--layout does not apply"},
		{[]string{"--preset", "tiny", "--out", out, "--shards", "2"}, 2, "--shards does not apply to --format bundle"},
		{append(base, "--kv", "f16"), 1, "--kv \"f16\": want u8, u16 or f32"},
		{append(base, "--logits", "u8"), 1, "--logits"},
		{append(base, "--shards", "3"), 1, "--shards 3: want 1 to 2"},
		{append(base, "--ctx", "64", "--prefill-chunk", "64"), 1, "--prefill-chunk (64) < --ctx (64)"},
	} {
		code, stdout, stderr := runMk(t, c.args...)
		if code != c.code || !strings.Contains(stdout+stderr, c.msg) {
			t.Errorf("%v: exit %d, output %q; want %d and %q", c.args, code, stdout+stderr, c.code, c.msg)
		}
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("failed runs wrote %d entries", len(entries))
	}
}
