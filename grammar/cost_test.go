package grammar

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hexserve/hexserve/internal/costtest"
)

// Hostile schemas of issue #32: each costs at most a second of CPU and
// 100 MB of allocation, refused with an Error naming the part or compiled
// cheaply.

// nestedMerge is F3 with properties on both sides of each merge, the
// levels shared through $defs (written out, the document would grow 5× per
// level).
func nestedMerge(levels int) string {
	var b strings.Builder
	b.WriteString(`{"$defs":{"l0":{"type":"string"}`)
	for i := 1; i <= levels; i++ {
		x := fmt.Sprintf(`{"x":{"$ref":"#/$defs/l%d"}}`, i-1)
		fmt.Fprintf(&b, `,"l%d":{"anyOf":[%s],"properties":%s}`, i, costtest.RepeatJoin(`{"type":"object","properties":`+x+`}`, 4), x)
	}
	fmt.Fprintf(&b, `},"$ref":"#/$defs/l%d"}`, levels)
	return b.String()
}

const (
	cpuBound   = time.Second
	allocBound = 100 << 20
)

func TestHostileSchemas(t *testing.T) {
	_, v := llama(t)
	deep := strings.Repeat(`{"items":`, 9000) + `{}` + strings.Repeat(`}`, 9000)
	var chain strings.Builder
	chain.WriteString(`{"$ref":"#/$defs/a0","$defs":{`)
	for i := range 5000 {
		fmt.Fprintf(&chain, `"a%d":{"$ref":"#/$defs/a%d"},`, i, i+1)
	}
	chain.WriteString(`"a5000":{"type":"string","maxLength":3}}}`)
	var distinct []string
	for i := range 1000 {
		distinct = append(distinct, fmt.Sprintf(`{"type":"string","maxLength":%d}`, i+1))
	}
	tests := []struct {
		name     string
		schema   string
		wantPath string // "-": compiles
		wantMsg  string
	}{
		{"F1 odd|even{1000}", `{"type":"string","pattern":"(?:` + costtest.ByteClass(true) + `|` + costtest.ByteClass(false) + `){1000}"}`, "pattern", "costs too much"},
		{"F1 odd{1000}", `{"type":"string","pattern":"` + costtest.ByteClass(true) + `{1000}"}`, "pattern", "costs too much"},
		{"F2 anyOf of 1000 equal strings", `{"anyOf":[` + costtest.RepeatJoin(`{"type":"string"}`, 1000) + `]}`, "-", ""},
		{"F2 anyOf of 1000 overlapping strings", `{"anyOf":[` + strings.Join(distinct, ",") + `]}`, "anyOf", "overlapping branches"},
		{"F2 anyOf of 100 overlapping strings", `{"anyOf":[` + strings.Join(distinct[:100], ",") + `]}`, "anyOf", "overlapping branches"},
		{"F2 nested overlap multiplies", `{"anyOf":[` + costtest.RepeatJoin(`{"type":"array","items":{"anyOf":[`+strings.Join(distinct[:9], ",")+`]}}`, 1) + `,` +
			costtest.RepeatJoin(`{"type":"array","minItems":1,"items":{"anyOf":[`+strings.Join(distinct[10:19], ",")+`]}}`, 1) + `]}`, "-", ""},
		{"F3 nested anyOf+properties ×11", costtest.NestedAnyOf(11), "-", ""},
		{"F3 nested anyOf+properties ×40", costtest.NestedAnyOf(40), "-", ""},
		{"F3 nested merges ×30", nestedMerge(30), "-", ""},
		{"F10 false", `false`, "", "allows no value"},
		{"F10 empty enum", `{"enum":[]}`, "", "allows no value"},
		{"F10 required false", `{"type":"object","properties":{"a":false},"required":["a"]}`, "", "allows no value"},
		{"F11 items 9000 deep", deep, "", "nests deeper than 128"},
		{"$ref chain of 5000", chain.String(), "-", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var g *Grammar
			var err error
			cost := costtest.Measure(func() {
				g, err = Compile([]byte(tc.schema), Options{})
				if err == nil { // and a few tokens' masks
					m := g.NewMatcher(v)
					mask := make([]uint64, (v.Size()+63)/64)
					for range 8 {
						m.Mask(mask)
						id := int32(-1)
						for w, word := range mask {
							if word != 0 {
								id = int32(w*64 + trailing(word))
								break
							}
						}
						if id < 0 || m.Accept(id) != nil {
							break
						}
					}
					if m.Err() != nil {
						t.Errorf("mask: %v", m.Err())
					}
				}
			})
			costtest.Within(t, tc.name, cost, cpuBound, allocBound)
			if tc.wantPath == "-" {
				if err != nil {
					t.Fatalf("Compile: %v", err)
				}
				t.Logf("compiled in %d steps", g.CompileSteps())
				return
			}
			var e *Error
			if !errors.As(err, &e) || !strings.HasSuffix(e.Path, tc.wantPath) || !strings.Contains(e.Message, tc.wantMsg) {
				t.Fatalf("Compile = %v, want an Error at …%s saying %q", err, tc.wantPath, tc.wantMsg)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// TestCompileContext: a client that leaves stops the compile at once, even
// with a budget that would let it run for a minute.
func TestCompileContext(t *testing.T) {
	schema := []byte(`{"type":"string","pattern":"(?:` + costtest.ByteClass(true) + `|` + costtest.ByteClass(false) + `){1000}"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var err error
	cost := costtest.Measure(func() {
		_, err = Compile(schema, Options{Context: ctx, Limits: Limits{Steps: 1 << 60, Memory: 1 << 40}})
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Compile = %v, want the context's error", err)
	}
	costtest.Within(t, "compile cancelled after 50ms", cost, 500*time.Millisecond, allocBound)
	// Wall time is bounded loosely: on a loaded machine (the suite's two lanes)
	// the CPU bound above is the tight one; a compile that ignored its context
	// would run on for a minute.
	if cost.Wall > 5*time.Second {
		t.Errorf("the compile went on %v after its context ended", cost.Wall)
	}
}

// TestMaskBudget: a mask over the budget stops, allows nothing and says why;
// the default budget takes the same mask.
func TestMaskBudget(t *testing.T) {
	tok, v := llama(t)
	var alts []string
	for i := range 16 {
		alts = append(alts, fmt.Sprintf(`{"type":"array","maxItems":%d}`, 100+i))
	}
	schema := []byte(`{"anyOf":[` + strings.Join(alts, ",") + `]}`)
	mask := make([]uint64, (v.Size()+63)/64)
	for _, steps := range []int64{5000, 0} {
		g, err := Compile(schema, Options{Limits: Limits{Steps: steps}, Cache: NewCache(0)})
		if err != nil {
			t.Fatal(err)
		}
		m := g.NewMatcher(v)
		for _, id := range tok.Encode(`[`, false, false) {
			if err := m.Accept(id); err != nil {
				t.Fatal(err)
			}
		}
		cost := costtest.Measure(func() { m.Mask(mask) })
		t.Logf("budget %d: 16 array branches after '[': a mask of %d steps, %v", steps, m.PeakMaskSteps(), cost)
		if steps > 0 {
			if !errors.Is(m.Err(), ErrBudget) || popcount(mask) != 0 || m.Complete() || m.Allowed(0) {
				t.Fatalf("Err = %v, %d tokens allowed; want ErrBudget and none", m.Err(), popcount(mask))
			}
		} else if m.Err() != nil || popcount(mask) == 0 {
			t.Fatalf("Err = %v with the default budget", m.Err())
		}
	}
}

// TestCacheBounded: 500 distinct patterns leave at most the cache's budget
// of compiled tables live (issue #32's F5); unbounded they would hold
// several times more.
func TestCacheBounded(t *testing.T) {
	n := 500
	if testing.Short() {
		n = 150
	}
	const budget = 4 << 20
	c := NewCache(budget)
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	var total int64
	keep := make([]*Grammar, 0, 1) // only the last grammar stays referenced
	for i := range n {
		g, err := Compile([]byte(fmt.Sprintf(`{"type":"string","pattern":"^a{%d}$","maxLength":500}`, i+1)), Options{Cache: c})
		if err != nil {
			t.Fatal(err)
		}
		total += g.root.re.size()
		keep = append(keep[:0], g)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	st := c.Stats()
	live := int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
	t.Logf("%d patterns: %.1f MB of tables compiled, cache holds %.1f MB in %d entries (%d evicted), live heap +%.1f MB",
		n, float64(total)/1e6, float64(st.PatternBytes)/1e6, st.Entries, st.Evictions, float64(live)/1e6)
	if st.PatternBytes+st.MaskBytes > budget {
		t.Errorf("cache holds %d bytes, budget %d", st.PatternBytes+st.MaskBytes, budget)
	}
	if total < 3*budget {
		t.Fatalf("the patterns compiled only %d bytes: the test cannot tell a bounded cache", total)
	}
	if live > 2*budget+8<<20 {
		t.Errorf("live heap grew by %d bytes with a %d-byte cache", live, budget)
	}
	runtime.KeepAlive(keep)
}
