package bench

import (
	"context"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/hexserve/hexserve/grammar"
)

// Structured-output goals.
const (
	GoalMaskMedianUS = 50   // constraint µs per token, median over the bench schemas
	GoalMaskP99US    = 1000 // and p99
	GoalCompileMS    = 10   // schema compile, each bench schema
	structuredTokens = 2000 // tokens per schema (quick: 400)
	restartAfter     = 400  // a fresh matcher at least this often
)

// BenchSchemas are the structured phase's schemas.
var BenchSchemas = []struct{ Name, Schema string }{
	{"person", `{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":20},"age":{"type":"integer","minimum":0,"maximum":150},"email":{"type":"string","maxLength":40},"tags":{"type":"array","items":{"type":"string","maxLength":8},"maxItems":3}},"required":["name","age"],"additionalProperties":false}`},
	{"numbers", `{"type":"array","minItems":1,"maxItems":4,"items":{"type":"number","minimum":-2.5,"exclusiveMaximum":1000}}`},
	{"enum", `{"type":"object","properties":{"color":{"enum":["red","green","blue"]},"ok":{"type":"boolean"},"n":{"type":["integer","null"],"minimum":10,"maximum":99}},"required":["color","ok","n"],"additionalProperties":false}`},
	{"tree", `{"$defs":{"t":{"type":"object","properties":{"v":{"type":"integer","minimum":0,"maximum":9},"kids":{"type":"array","maxItems":2,"items":{"$ref":"#/$defs/t"}}},"required":["v"],"additionalProperties":false}},"$ref":"#/$defs/t"}`},
	{"free_text", `{"type":"object","properties":{"title":{"type":"string","maxLength":12},"body":{"type":"string"}},"required":["title","body"],"additionalProperties":false}`},
}

// Structured reports the structured-output phase.
type Structured struct {
	Vocab      int                `json:"vocab"`
	IndexMS    float64            `json:"index_ms"`    // building the vocabulary index (once per model)
	CompileMS  Dist               `json:"compile_ms"`  // per schema
	MaskUS     Dist               `json:"mask_us"`     // per token, all schemas (wall clock)
	MaskCPUUS  Dist               `json:"mask_cpu_us"` // the same in the thread's CPU time (descheduling excluded; Linux)
	FullMasks  float64            `json:"full_masks"`  // share of tokens that needed the full mask
	Tokens     int                `json:"tokens"`
	MaskP50Per map[string]float64 `json:"mask_us_p50_by_schema"`
}

// structuredPhase times the constraint the way the sampler uses it, with a
// stand-in for the model that proposes uniformly random tokens (as the
// random-weight model does, the worst case: most proposals outside strings
// are rejected): an allowed proposal costs one Allowed check, a rejected one
// the full mask and a draw among the allowed tokens, then Accept.
func (r *runner) structuredPhase(ctx context.Context) error {
	t0 := time.Now()
	v := grammar.VocabOf(r.tok, r.info.EOS)
	st := &Structured{Vocab: v.Size(), IndexMS: ms(time.Since(t0)), MaskP50Per: map[string]float64{}}
	n := structuredTokens
	if r.opt.Quick {
		n /= 5
	}
	mask := make([]uint64, (v.Size()+63)/64)
	runtime.LockOSThread() // for the thread CPU clock
	defer runtime.UnlockOSThread()
	var all, allCPU, compile []float64
	full := 0
	for i, s := range BenchSchemas {
		t0 := time.Now()
		g, err := grammar.Compile([]byte(s.Schema), grammar.Options{Strict: true})
		compile = append(compile, ms(time.Since(t0)))
		if err != nil {
			return fmt.Errorf("bench schema %s: %w", s.Name, err)
		}
		rng := rand.New(rand.NewPCG(uint64(i), 1))
		var m *grammar.Matcher
		var costs []float64
		for k := 0; k < n; k++ {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if m == nil || k%restartAfter == 0 {
				m = g.NewMatcher(v)
			}
			c0, cpuOK := threadCPU()
			t0 := time.Now()
			id := int32(rng.IntN(v.Size()))
			if !m.Allowed(id) {
				full++
				m.Mask(mask)
				id = drawBit(mask, rng)
			}
			if id >= 0 && m.Accept(id) != nil {
				return fmt.Errorf("bench schema %s: Accept(%d) refused an allowed token", s.Name, id)
			}
			costs = append(costs, float64(time.Since(t0).Nanoseconds())/1e3)
			if c1, ok := threadCPU(); ok && cpuOK {
				allCPU = append(allCPU, float64(c1-c0)/1e3)
			}
			if id < 0 || m.Complete() && rng.IntN(4) == 0 {
				m = nil // a finished value: start the next
			}
		}
		st.MaskP50Per[s.Name] = newDist(costs).P50
		all = append(all, costs...)
	}
	st.CompileMS, st.MaskUS, st.MaskCPUUS, st.Tokens = newDist(compile), newDist(all), newDist(allCPU), len(all)
	st.FullMasks = float64(full) / float64(len(all))
	r.rep.Structured = st
	return nil
}

// drawBit returns a uniformly drawn set bit of mask, -1 if none.
func drawBit(mask []uint64, rng *rand.Rand) int32 {
	n := 0
	for _, w := range mask {
		n += bits.OnesCount64(w)
	}
	if n == 0 {
		return -1
	}
	k := rng.IntN(n)
	for i, w := range mask {
		if c := bits.OnesCount64(w); k >= c {
			k -= c
			continue
		}
		for ; k > 0; k-- {
			w &= w - 1
		}
		return int32(i*64 + bits.TrailingZeros64(w))
	}
	return -1
}
