package genie

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/hexserve/hexserve/hexagon/genie/geniesim"
	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/internal/hostsimtest"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// TestW4A16Agreement serves every golden case of testdata/tinyllama with the f32 precision (its
// greedy output must equal the golden tokens) and with w4a16 (uint16 activations and logits, uint8
// KV), teacher-forced on the f32 tokens: it reports, per case, the tokens until w4a16's greedy
// choice first differs and the logit error per step, and checks that w4a16 serves every case to
// its length.
func TestW4A16Agreement(t *testing.T) {
	if testing.Short() {
		t.Skip("two 1024-context bundles and every golden case (-short)")
	}
	var golden struct {
		Cases []struct {
			Name      string  `json:"name"`
			PromptIDs []int32 `json:"prompt_ids"`
			Greedy    []int32 `json:"greedy"`
		} `json:"cases"`
	}
	b, err := os.ReadFile(filepath.Join(hostsimtest.RepoRoot(t), "testdata", "tinyllama", "golden_tiny_public.json"))
	if err == nil {
		err = json.Unmarshal(b, &golden)
	}
	if err != nil {
		t.Fatal(err)
	}
	rt := openRuntime(t)
	open := func(precision string) *Runner {
		dir := t.TempDir()
		err := geniesim.Write(dir, geniesim.Options{Config: tinyllama.Tiny(), Name: "tiny", Precision: precision,
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
			if id == 128001 || id == 128008 || id == 128009 {
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
		agree, worst, sum := -1, 0.0, 0.0
		for i := range want {
			row := p - 1 + i
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
		t.Logf("%s: %d prompt + %d tokens: w4a16 greedy agrees with f32 for %d tokens; max |Δlogit| per step: mean %.3f, worst %.3f",
			c.Name, p, len(want), agree, sum/float64(len(want)), worst)
		if worst > 3 {
			t.Errorf("%s: w4a16 logit error %.3f (bound 3)", c.Name, worst)
		}
	}
}
