package tinyllama

import (
	"math"
	"testing"
)

type goldenCase struct {
	Name      string `json:"name"`
	PromptIDs []int  `json:"prompt_ids"`
	Checks    []struct {
		Pos          int         `json:"pos"`
		Top          [][]float64 `json:"top"`
		LogSumExp    float64     `json:"logsumexp"`
		HiddenFirst8 []float64   `json:"hidden_first8"`
	} `json:"checks"`
	Greedy []int `json:"greedy"`
}

// TestReferenceMatchesGolden checks the float64 forward pass against the
// public goldens: top-20 logits, logsumexp and the first hidden values at
// every checked position, and every greedy token.
func TestReferenceMatchesGolden(t *testing.T) {
	var g struct {
		Cases []goldenCase `json:"cases"`
	}
	readJSON(t, goldenPath, &g)
	m, err := NewModel(Tiny())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range g.Cases {
		// -short (make test's -race run, where the float64 lm-head is slow):
		// the short case only; make test runs every case without -race.
		if testing.Short() && c.Name != "short" {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			checks := map[int]int{}
			for i, ch := range c.Checks {
				checks[ch.Pos] = i
			}
			s := m.NewSession()
			var worst, worstH, worstLSE float64
			var h []float64
			for pos, tok := range c.PromptIDs {
				if h, err = s.Append(tok); err != nil {
					t.Fatal(err)
				}
				i, ok := checks[pos]
				if !ok {
					continue
				}
				ch := c.Checks[i]
				l := m.Logits(h)
				for _, e := range ch.Top {
					worst = max(worst, math.Abs(l[int(e[0])]-e[1]))
				}
				if got := Argmax(l); got != int(ch.Top[0][0]) {
					t.Errorf("pos %d: argmax %d, golden %v", pos, got, ch.Top[0][0])
				}
				worstLSE = max(worstLSE, math.Abs(logSumExp(l)-ch.LogSumExp))
				for j, v := range ch.HiddenFirst8 {
					worstH = max(worstH, math.Abs(h[j]-v))
				}
			}
			t.Logf("top-20 logit error %.3g, logsumexp %.3g, hidden %.3g", worst, worstLSE, worstH)
			if worst > 1e-9 || worstLSE > 1e-9 || worstH > 1e-9 {
				t.Errorf("errors above 1e-9: logits %.3g, logsumexp %.3g, hidden %.3g", worst, worstLSE, worstH)
			}
			got, err := m.Greedy(c.PromptIDs, len(c.Greedy))
			if err != nil {
				t.Fatal(err)
			}
			for i := range c.Greedy {
				if got[i] != c.Greedy[i] {
					t.Fatalf("greedy step %d: %d, golden %d\ngot  %v\nwant %v", i, got[i], c.Greedy[i], got, c.Greedy)
				}
			}
		})
	}
}

func logSumExp(v []float64) float64 {
	m := v[Argmax(v)]
	var s float64
	for _, x := range v {
		s += math.Exp(x - m)
	}
	return m + math.Log(s)
}

// TestReferenceShapes runs the reference on shapes other than the public
// one (no GQA, head_dim ≠ hidden/heads, untied lm-head) and checks that a
// KV-cached greedy run agrees with full forward passes.
func TestReferenceShapes(t *testing.T) {
	for _, c := range []Config{shape(96, 160, 3, 6, 2, 16, true), shape(64, 100, 1, 2, 1, 48, true), shape(128, 256, 1, 4, 4, 32, false)} {
		c.VocabSize = 512
		m, err := NewModel(c)
		if err != nil {
			t.Fatal(err)
		}
		prompt := Draws(7, 6)
		for i := range prompt {
			prompt[i] %= c.VocabSize
		}
		got, err := m.Greedy(prompt, 5)
		if err != nil {
			t.Fatal(err)
		}
		seq := append([]int(nil), prompt...)
		for i := range got {
			ls, err := m.Forward(seq)
			if err != nil {
				t.Fatal(err)
			}
			want := Argmax(ls[len(ls)-1])
			if got[i] != want {
				t.Fatalf("%+v step %d: cached %d, full %d", c, i, got[i], want)
			}
			seq = append(seq, want)
		}
	}
}

func shape(hidden, ffn, layers, heads, kv, headDim int, tied bool) Config {
	c := Tiny()
	c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = hidden, ffn, layers
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.TieWordEmbeddings = heads, kv, headDim, tied
	c.InitSeed = uint64(hidden*1000 + headDim)
	return c
}

// TestSessionEvict: evicted rows are not attended and positions keep counting. RoPE scores
// depend on relative positions only, so a token attending only itself at position 3 (after
// evicting the three before it) gives what it gives alone at position 0, up to rounding; evicting
// nothing changes nothing; rows outside the kept ones are refused.
func TestSessionEvict(t *testing.T) {
	m, err := NewModel(Tiny())
	if err != nil {
		t.Fatal(err)
	}
	alone, err := m.NewSession().Append(1917)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name       string
		from, n    int
		rows       int // kept before the next token
		sameAsOnly bool
		bad        bool
	}{
		{"all three", 0, 3, 0, true, false},
		{"none", 1, 0, 3, false, false},
		{"the middle", 1, 1, 2, false, false},
		{"past the end", 2, 2, 3, false, true},
		{"negative", -1, 1, 3, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := m.NewSession()
			for _, tok := range []int{128000, 9906, 11} {
				if _, err := s.Append(tok); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Evict(tt.from, tt.n); (err != nil) != tt.bad {
				t.Fatalf("Evict(%d, %d): %v", tt.from, tt.n, err)
			}
			if s.Rows() != tt.rows || s.Len() != 3 {
				t.Fatalf("%d rows, length %d; want %d, 3", s.Rows(), s.Len(), tt.rows)
			}
			h, err := s.Append(1917)
			if err != nil {
				t.Fatal(err)
			}
			d := 0.0
			for i := range h {
				d = max(d, math.Abs(h[i]-alone[i]))
			}
			if (d < 1e-9) != tt.sameAsOnly {
				t.Errorf("max |Δ| %g from the token alone at position 0 (want equal: %v)", d, tt.sameAsOnly)
			}
		})
	}
}
