package genie

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/hexagon/genie/geniesim"
	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/internal/costtest"
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
// biases, head_dim ≠ hidden/heads, Phi-3's split fused weights and LongRoPE tables with the
// attention factor, Granite's multipliers, Falcon3's head_dim 256, the RoPE tables computed by the
// runner from config.json or, for Falcon3, genie_config's QnnHtp rope-theta) through a prompt
// chunk and decode rows, and its greedy continuation equals the reference's.
func TestFamilies(t *testing.T) {
	costtest.SkipNumericUnderRace(t, "writes and runs each family's tiny bundle")
	rt := openRuntime(t)
	for _, tc := range []struct {
		family, served string
		theta          float64
		scaling        string
	}{{"qwen3", "qwen3", 1e6, ""}, {"qwen2", "qwen2", 1e6, ""}, {"phi3", "phi3", 1e4, "longrope"},
		{"granite", "granite", 1e7, ""}, {"falcon3", "llama", 1000042, ""}} {
		family := tc.family
		t.Run(family, func(t *testing.T) {
			dir, c := writeFamily(t, family, "f32")
			r := openRunner(t, rt, dir)
			if r.bc.Family != tc.served || r.bc.Rope.Theta != tc.theta || r.bc.Rope.Scaling.Kind() != tc.scaling {
				t.Fatalf("family %q rope %v, want %s with θ %g, scaling %q", r.bc.Family, r.bc.Rope, tc.served, tc.theta, tc.scaling)
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
	costtest.SkipNumericUnderRace(t, "writes a bundle per refused family")
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
		{"yarn", map[string]any{"rope_scaling": map[string]any{"rope_type": "yarn"}}, `rope_type "yarn" is not supported`},
		{"longrope", map[string]any{"rope_scaling": map[string]any{"rope_type": "longrope", "short_factor": []float64{1}}},
			"short_factor has 1 values, want head_dim/2 = 16"},
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

// TestPublishedPhiConfig: AI Hub's published Phi-3.5-mini genie_config.json
// (../shared/genie/families: parts named weight_sharing_model_k_of_4.serialized.bin, an eos-token
// list, kv-dim, rope-dim and LongRoPE in rope-scaling with long- and short-factor lists), with the
// tiny Phi-3 model's sizes put in, loads beside that model's four parts and decodes the float64
// reference's greedy tokens.
func TestPublishedPhiConfig(t *testing.T) {
	pub := filepath.Join("..", "..", "..", "shared", "genie", "families", "phi_3_5_mini_instruct.genie_config.json")
	if _, err := os.Stat(pub); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: AI Hub's Phi-3.5 genie_config.json is missing (%v)", err)
		}
		t.Skipf("no ../shared copy of AI Hub's Phi-3.5 genie_config.json (%v)", err)
	}
	c, err := tinyllama.FamilyPreset("phi3", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := geniesim.Write(dir, geniesim.Options{Config: c, Name: "phi", Precision: "f32", Weights: simfile.WeightF16,
		Parts: 4, PromptAR: testAR, Ctx: testCtx}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(pub)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "genie_config.json"), b, 0o644)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte("{}"), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	s := c.Rope()
	testjson.Edit(t, filepath.Join(dir, "genie_config.json"), func(m map[string]any) {
		d := m["dialog"].(map[string]any)
		d["context"].(map[string]any)["size"] = testCtx
		e := d["engine"].(map[string]any)
		e["backend"].(map[string]any)["QnnHtp"].(map[string]any)["kv-dim"] = c.HeadDim
		pe := e["model"].(map[string]any)["positional-encoding"].(map[string]any)
		pe["rope-dim"] = c.HeadDim / 2
		rs := pe["rope-scaling"].(map[string]any)
		rs["long-factor"], rs["short-factor"] = s.LongFactor, s.ShortFactor
	})
	r := openRunner(t, openRuntime(t), dir)
	if got := r.bc.EOS; !slices.Equal(got, []int32{32007, 32001, 32000}) || r.bc.Rope.Scaling.Kind() != "longrope" || r.bc.RopeNote != "" {
		t.Fatalf("eos %v, rope %v (note %q): want the published eos list and LongRoPE, agreeing with config.json", got, r.bc.Rope, r.bc.RopeNote)
	}
	m, err := tinyllama.NewModel(c)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := m.Greedy([]int{1, 32010, 1724, 338, 29871, 29906, 718}, 12)
	if err != nil {
		t.Fatal(err)
	}
	id, err := r.Open(testCtx - 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(id)
	toks := []int32{1, 32010, 1724, 338, 29871, 29906, 718}
	l := step(t, r, inference.Run{Seq: id, Start: 0, Tokens: toks})[0]
	for i, want := range gs {
		got := argmax(l[len(l)-1])
		if got != want {
			t.Fatalf("greedy step %d: %d, reference %d", i, got, want)
		}
		l = step(t, r, inference.Run{Seq: id, Start: len(toks) + i, Tokens: []int32{int32(got)}})[0]
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
