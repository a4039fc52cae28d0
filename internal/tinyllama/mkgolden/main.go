// Command mkgolden writes a golden file in the layout of
// testdata/tinyllama/golden_tiny_public.json for any config.json, from the
// exact float64 reference forward pass (tinyllama.Model): cases `short`
// (every position checked) and `cross128` (positions around the 16- and
// 128-row window boundaries). Usage:
//
//	go run ./internal/tinyllama/mkgolden -config CONFIG.json -out GOLDEN.json
//	go run ./internal/tinyllama/mkgolden -family qwen3 -out testdata/tinyllama/golden_tiny_qwen3.json
package main

import (
	"encoding/json"
	"flag"
	"log"
	"math"
	"os"
	"sort"

	"github.com/hexserve/hexserve/internal/tinyllama"
)

type check struct {
	Pos          int          `json:"pos"`
	Top          [][2]float64 `json:"top"`
	LogSumExp    float64      `json:"logsumexp"`
	Margin       float64      `json:"margin"`
	HiddenFirst8 []float64    `json:"hidden_first8"`
}

type gcase struct {
	Name            string    `json:"name"`
	PromptIDs       []int     `json:"prompt_ids"`
	Checks          []check   `json:"checks"`
	Greedy          []int     `json:"greedy"`
	GreedyMargins   []float64 `json:"greedy_margins"`
	GreedyMinMargin float64   `json:"greedy_min_margin"`
}

func main() {
	cfgPath := flag.String("config", "", "config.json with init_seed")
	family := flag.String("family", "", "or: the tiny preset of this family (qwen2, qwen3, ...)")
	out := flag.String("out", "", "golden file to write (required)")
	flag.Parse()
	if (*cfgPath == "") == (*family == "") || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	var c tinyllama.Config
	var raw []byte
	var err error
	if *family != "" {
		if c, err = tinyllama.FamilyPreset(*family, "tiny"); err == nil {
			raw, err = json.Marshal(c)
		}
	} else if c, err = tinyllama.LoadConfig(*cfgPath); err == nil {
		raw, err = os.ReadFile(*cfgPath)
	}
	if err != nil {
		log.Fatal(err)
	}
	m, err := tinyllama.NewModel(c)
	if err != nil {
		log.Fatal(err)
	}
	var cases []gcase
	for _, spec := range []struct {
		name    string
		seed    uint64
		n, gen  int
		checked []int // nil: every position
	}{
		{"short", c.InitSeed + 1, 5, 40, nil},
		{"cross128", c.InitSeed + 2, 130, 24, []int{0, 15, 16, 127, 128, 129}},
	} {
		gc, err := runCase(m, spec.name, spec.seed, spec.n, spec.gen, spec.checked)
		if err != nil {
			log.Fatal(err)
		}
		cases = append(cases, gc)
	}
	var cfgJSON json.RawMessage = raw
	var wrapped struct {
		Config json.RawMessage `json:"config"`
	}
	if json.Unmarshal(raw, &wrapped) == nil && len(wrapped.Config) > 0 {
		cfgJSON = wrapped.Config
	}
	doc := map[string]any{
		"config":         cfgJSON,
		"inv_freq":       tinyllama.InvFreq(c),
		"generated_with": map[string]string{"reference": "float64 Go forward pass (internal/tinyllama.Model)"},
		"cases":          cases,
	}
	b, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		log.Fatal(err)
	}
}

func runCase(m *tinyllama.Model, name string, seed uint64, n, gen int, checked []int) (gcase, error) {
	gc := gcase{Name: name}
	for _, id := range tinyllama.Draws(seed, n) {
		gc.PromptIDs = append(gc.PromptIDs, id%m.Config.VocabSize)
	}
	want := map[int]bool{}
	for _, p := range checked {
		want[p] = true
	}
	s := m.NewSession()
	var h []float64
	var err error
	for pos, tok := range gc.PromptIDs {
		if h, err = s.Append(tok); err != nil {
			return gc, err
		}
		if checked == nil || want[pos] {
			gc.Checks = append(gc.Checks, checkOf(pos, m.Logits(h), h))
		}
	}
	gc.GreedyMinMargin = math.Inf(1)
	for i := range gen {
		l := m.Logits(h)
		top := topK(l, 2)
		gc.Greedy = append(gc.Greedy, top[0])
		margin := l[top[0]] - l[top[1]]
		gc.GreedyMargins = append(gc.GreedyMargins, margin)
		gc.GreedyMinMargin = min(gc.GreedyMinMargin, margin)
		if i+1 < gen {
			if h, err = s.Append(top[0]); err != nil {
				return gc, err
			}
		}
	}
	return gc, nil
}

func checkOf(pos int, l, h []float64) check {
	ch := check{Pos: pos, HiddenFirst8: append([]float64(nil), h[:min(8, len(h))]...)}
	for _, id := range topK(l, 20) {
		ch.Top = append(ch.Top, [2]float64{float64(id), l[id]})
	}
	ch.Margin = ch.Top[0][1] - ch.Top[1][1]
	mx := ch.Top[0][1]
	var s float64
	for _, v := range l {
		s += math.Exp(v - mx)
	}
	ch.LogSumExp = mx + math.Log(s)
	return ch
}

func topK(l []float64, k int) []int {
	idx := make([]int, len(l))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return l[idx[a]] > l[idx[b]] })
	return idx[:min(k, len(idx))]
}
