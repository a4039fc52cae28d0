package genie

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/hexagon/genie/geniesim"
	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/internal/testjson"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// writeFamily writes family's tiny model as a Genie bundle of the given precision (3 parts,
// AR 8, CL 64) and returns its folder.
func writeFamily(t testing.TB, family, precision string) (string, tinyllama.Config) {
	t.Helper()
	c, err := tinyllama.FamilyPreset(family, "tiny")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	err = geniesim.Write(dir, geniesim.Options{Config: c, Name: family, Precision: precision, Weights: simfile.WeightF16,
		Parts: 3, PromptAR: testAR, Ctx: testCtx})
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte("{}"), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir, c
}

// TestFamilies: each family's tiny model, f32, gives the float64 reference's logits (q/k norms,
// biases, head_dim ≠ hidden/heads, Granite's multipliers, Falcon3's head_dim 256, the RoPE tables
// computed by the runner from config.json or, for Falcon3, genie_config's QnnHtp rope-theta)
// through a prompt chunk and decode rows, and its greedy continuation equals the reference's.
func TestFamilies(t *testing.T) {
	rt := openRuntime(t)
	for _, tc := range []struct {
		family, served string
		theta          float64
	}{{"qwen3", "qwen3", 1e6}, {"qwen2", "qwen2", 1e6}, {"granite", "granite", 1e7}, {"falcon3", "llama", 1000042}} {
		family := tc.family
		t.Run(family, func(t *testing.T) {
			dir, c := writeFamily(t, family, "f32")
			r := openRunner(t, rt, dir)
			if r.bc.Family != tc.served || r.bc.Rope.Theta != tc.theta || r.bc.Rope.Factor != 0 {
				t.Fatalf("family %q rope %+v, want %s with plain θ %g", r.bc.Family, r.bc.Rope, tc.served, tc.theta)
			}
			if want := "multipliers: embedding 1.25, attention 0.125"; (family == "granite") != strings.Contains(r.bc.FamilySettings(), want) {
				t.Errorf("inspect's family settings %q (want %q for granite only)", r.bc.FamilySettings(), want)
			}
			m, err := tinyllama.NewModel(c)
			if err != nil {
				t.Fatal(err)
			}
			toks := []int32{151643, 9707, 11, 1879, 0, 576, 3974, 13876, 38835, 34208, 916}
			for i := range toks {
				toks[i] %= int32(c.VocabSize)
			}
			s := m.NewSession()
			id, err := r.Open(testCtx - 1)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Release(id)
			got := step(t, r, inference.Run{Seq: id, Start: 0, Tokens: toks[:7]})[0]
			for i := 7; i < len(toks); i++ {
				got = append(got, step(t, r, inference.Run{Seq: id, Start: i, Tokens: toks[i : i+1]})[0]...)
			}
			var ref []float64
			for i, l := range got {
				h, err := s.Append(int(toks[i]))
				if err != nil {
					t.Fatal(err)
				}
				ref = m.Logits(h)
				if d := maxDiff(t, l, ref); d > 1e-3 {
					t.Errorf("row %d: max |Δlogit| %g against the reference", i, d)
				}
			}
			for pos := len(toks); pos < len(toks)+20; pos++ { // greedy decode against the reference
				want := tinyllama.Argmax(ref)
				l := step(t, r, inference.Run{Seq: id, Start: pos, Tokens: []int32{int32(want)}})[0][0]
				h, err := s.Append(want)
				if err != nil {
					t.Fatal(err)
				}
				ref = m.Logits(h)
				if d := maxDiff(t, l, ref); d > 1e-3 || argmax(l) != tinyllama.Argmax(ref) {
					t.Fatalf("greedy step %d: max |Δlogit| %g, argmax %d, reference %d", pos, d, argmax(l), tinyllama.Argmax(ref))
				}
			}
		})
	}
}

// TestFamilyRefused: a config.json of an unsupported family, or one whose sizes disagree with the
// binaries, is refused at load naming both sides.
func TestFamilyRefused(t *testing.T) {
	rt := openRuntime(t)
	for _, tc := range []struct {
		name string
		edit map[string]any
		want string
	}{
		{"gemma3", map[string]any{"model_type": "gemma3"}, "Gemma 3's interleaved sliding-window attention is not supported"},
		{"baichuan", map[string]any{"model_type": "baichuan"}, "Baichuan"},
		{"jais", map[string]any{"model_type": "jais"}, "JAIS"},
		{"head_dim", map[string]any{"head_dim": 16}, "head_dim is 16 but the binaries' KV tensors have head dim 32"},
		{"kv heads", map[string]any{"num_key_value_heads": 4}, "num_key_value_heads is 4 but the binaries' KV tensors have 2 heads"},
		{"vocab", map[string]any{"vocab_size": 1000}, "vocab_size is 1000 but the logits have 151936 entries"},
		{"longrope", map[string]any{"rope_scaling": map[string]any{"rope_type": "longrope"}}, `rope_type "longrope" is not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := writeFamily(t, "qwen3", "f32")
			testjson.Edit(t, filepath.Join(dir, "config.json"), func(m map[string]any) {
				for k, v := range tc.edit {
					m[k] = v
				}
			})
			_, err := Open(Config{Dir: dir, Runtime: rt})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestGraniteHeaderRefused: a Granite part whose header's multipliers flag and size disagree, or
// whose multiplier is not positive, is refused at load as a malformed binary (QnnSystem gives the
// code; hostsim's reason, in FORMAT.md, stays in its log), naming the part.
func TestGraniteHeaderRefused(t *testing.T) {
	rt := openRuntime(t)
	for _, tc := range []struct {
		name string
		off  int
		val  uint32
		want string
	}{
		{"flag off, 144-byte header", 52, 1, "granite_part_2_of_3.bin: qnn: systemContextGetMetaData: error 30010"},
		{"negative residual multiplier", 136, math.Float32bits(-0.22), "granite_part_2_of_3.bin: qnn: systemContextGetMetaData: error 30010"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := writeFamily(t, "granite", "f32")
			part := filepath.Join(dir, geniesim.PartFile("granite", 2, 3))
			b, err := os.ReadFile(part)
			if err != nil {
				t.Fatal(err)
			}
			binary.LittleEndian.PutUint32(b[tc.off:], tc.val)
			if err := os.WriteFile(part, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(Config{Dir: dir, Runtime: rt}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
