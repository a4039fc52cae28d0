//go:build !nomkmodel

package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/bench"
	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/server"
)

// TestProbeMatchesLoad: for each kind, the context length probed from the
// files alone equals the loaded model's inference.ModelInfo.ContextLen on
// hostsim.
func TestProbeMatchesLoad(t *testing.T) {
	libs := hostsimLibDir(t)
	bundleDir, _ := tinyBundle(t)
	pteDir := filepath.Join(testTmp, "probe-pte")
	mkTiny(t, "pte", pteDir, "--ctx", "96", "--prefill-chunk", "16")
	for _, tc := range []struct{ name, path string }{{"bundle", bundleDir}, {"pte", pteDir}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Model.SetLocation(tc.path)
			cfg.Model.Libraries = librariesIn(libs)
			pr, err := probeModel(cfg.Model)
			if err != nil {
				t.Fatal(err)
			}
			model, _, _, err := loadModel(cfg, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			defer model.Close()
			t.Logf("probed context %d", pr.ContextLen)
			if got, want := pr.ContextLen, model.Info().ContextLen; got != want || got == 0 {
				t.Errorf("probed context %d, the loaded model's %d", got, want)
			}
		})
	}
}

// TestProbeFails: what cannot be probed is an error, never a guess.
func TestProbeFails(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pte")
	if err := os.WriteFile(junk, []byte("\x10\x00\x00\x00ET12garbage-garbage-garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path, want string }{
		{"missing", filepath.Join(dir, "nope"), "no such file"},
		{"corrupt pte", junk, "pte:"},
		{"empty folder", dir + "/empty", "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m config.Model
			m.SetLocation(tc.path)
			pr, err := probeModel(m)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("probe %s: %+v, %v; want an error with %q", tc.path, pr, err, tc.want)
			}
		})
	}
}

// TestProbeShape: each kind's files give the shape /api/show reports, the
// parameter count where the config gives every size (mkmodel's tiny preset:
// hidden 64, 2 blocks, 4 heads, 2 KV heads, feed-forward 256, tied).
func TestProbeShape(t *testing.T) {
	bundleDir, _ := tinyBundle(t)
	genieDir := filepath.Join(testTmp, "shape-genie")
	mkTiny(t, "genie", genieDir)
	pteDir := filepath.Join(testTmp, "shape-pte")
	mkTiny(t, "pte", pteDir, "--ctx", "96", "--prefill-chunk", "16")
	tiny := server.ModelArch{Params: 128256*64 + 2*(64*64*2+2*64*32+3*64*256+2*64) + 64, Hidden: 64, Layers: 2, FFN: 256, Heads: 4, KVHeads: 2}
	for _, tc := range []struct {
		name, path string
		want       server.ModelArch
	}{
		{"bundle", bundleDir, tiny},
		{"genie", genieDir, tiny},
		// A static-llama export's metadata has no feed-forward length.
		{"pte", pteDir, server.ModelArch{Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m config.Model
			m.SetLocation(tc.path)
			pr, err := probeModel(m)
			if err != nil {
				t.Fatal(err)
			}
			if got := pr.Shape.arch(); got != tc.want {
				t.Errorf("shape %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestPTEFamily: a .pte's family comes from the config.json beside it; a family not served is
// refused with its reason, and a .pte without one stays Llama's export.
func TestPTEFamily(t *testing.T) {
	for _, tc := range []struct {
		name, config, want, err string
	}{
		{"none", "", "", ""},
		{"qwen3", `{"model_type":"qwen3"}`, "qwen3", ""},
		{"qwen2 by architecture", `{"architectures":["Qwen2ForCausalLM"]}`, "qwen2", ""},
		{"gemma3", `{"model_type":"gemma3"}`, "", "Gemma 3's interleaved sliding-window attention is not supported"},
		{"jais", `{"model_type":"jais"}`, "", "JAIS"},
		{"bad json", `{`, "", "config.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.config != "" {
				if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(tc.config), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := pteFamily(filepath.Join(dir, "m.pte"))
			if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("pteFamily = %q, %v; want %q and an error containing %q", got, err, tc.want, tc.err)
			}
		})
	}
}

// TestFormatsOwnRuntime: each format's open hands the QNN runtime to its runner, so closing
// the model closes the runtime (no wrapper owns it), and the end-token rule's ids replace the
// model's own in Info; bench --emulate-v79 takes the format row's latency (Genie's AI Hub
// figures), else plan.V79Costs'.
func TestFormatsOwnRuntime(t *testing.T) {
	libs := hostsimLibDir(t)
	bundleDir, _ := tinyBundle(t)
	genieDir := filepath.Join(testTmp, "own-genie")
	mkTiny(t, "genie", genieDir)
	pteDir := filepath.Join(testTmp, "own-pte")
	mkTiny(t, "pte", pteDir, "--ctx", "96", "--prefill-chunk", "16")
	for _, tc := range []struct{ name, path string }{{"bundle", bundleDir}, {"genie", genieDir}, {"pte", pteDir}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Model.SetLocation(tc.path)
			kind, file, err := locateModel(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			var rt *qnn.Runtime
			o, err := kind.open(openArgs{cfg: cfg, file: file, log: zerolog.Nop(), runtime: func() (*qnn.Runtime, error) {
				rt, err = qnn.Open(qnn.Config{Backend: filepath.Join(libs, "libQnnHtp.so"), System: filepath.Join(libs, "libQnnSystem.so"),
					RPCMem: filepath.Join(libs, "libcdsprpc.so")})
				return rt, err
			}})
			if err != nil {
				t.Fatal(err)
			}
			wantEmu := bench.Latency{PrefillUS: int(plan.V79Costs.Prefill.Microseconds()), DecodeUS: int(plan.V79Costs.Decode.Microseconds()),
				LMHeadUS: int(plan.V79Costs.LMHead.Microseconds())}
			if tc.name == "genie" {
				wantEmu = genieV79
			}
			if got := emulation(tc.path); got != wantEmu {
				t.Errorf("emulation %+v, want %+v", got, wantEmu)
			}
			o.model.SetEndTokens([]int32{7, 9})
			if got := o.model.Info().EOS; !slices.Equal(got, []int32{7, 9}) {
				t.Errorf("end tokens %v after SetEndTokens([7 9])", got)
			}
			if b, err := rt.Alloc(16); err != nil {
				t.Fatalf("the runtime before Close: %v", err)
			} else {
				b.Free()
			}
			if err := o.model.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := rt.Alloc(16); !errors.Is(err, qnn.ErrClosed) {
				t.Errorf("the runtime after the model's Close: Alloc error %v, want qnn.ErrClosed", err)
			}
		})
	}
}
