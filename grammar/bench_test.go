package grammar

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// BenchmarkCompile compiles each walk schema.
func BenchmarkCompile(b *testing.B) {
	for name, s := range walkSchemas {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Compile([]byte(s), Options{Strict: true}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMaskPerToken generates with a stand-in for the model that
// proposes uniformly random tokens (as the random-weight model does): a
// proposal the matcher allows is taken (one Allowed call), otherwise the
// full Mask is built and an allowed token drawn from it, as the engine
// does. It reports the median and p99 of the per-token cost.
func BenchmarkMaskPerToken(b *testing.B) {
	_, v := llama(b)
	mask := make([]uint64, (v.Size()+63)/64)
	for name, s := range walkSchemas {
		g := mustCompile(b, s, true)
		b.Run(name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(7, 7))
			var costs []time.Duration
			var m *Matcher
			for b.Loop() {
				if m == nil || len(m.ts) == 0 || len(costs)%400 == 399 {
					m = g.NewMatcher(v)
				}
				t0 := time.Now()
				id := int32(rng.IntN(v.Size()))
				if !m.Allowed(id) {
					m.Mask(mask)
					id = pick(mask, rng)
				}
				costs = append(costs, time.Since(t0))
				if id < 0 {
					m = nil
					continue
				}
				if err := m.Accept(id); err != nil {
					b.Fatal(err)
				}
			}
			slices.Sort(costs)
			b.ReportMetric(float64(costs[len(costs)/2].Nanoseconds())/1e3, "µs-median")
			b.ReportMetric(float64(costs[len(costs)*99/100].Nanoseconds())/1e3, "µs-p99")
		})
	}
}

// pick returns a uniformly drawn set bit, -1 if none.
func pick(mask []uint64, rng *rand.Rand) int32 {
	n := popcount(mask)
	if n == 0 {
		return -1
	}
	k := rng.IntN(n)
	for i, w := range mask {
		for w != 0 {
			if k == 0 {
				return int32(i*64 + trailing(w))
			}
			k--
			w &= w - 1
		}
	}
	return -1
}

// TestMaskCache: masks served from a grammar's cache of structural states
// equal the masks computed afresh, step by step over random walks.
func TestMaskCache(t *testing.T) {
	_, v := llama(t)
	a := make([]uint64, (v.Size()+63)/64)
	b := make([]uint64, len(a))
	for _, name := range []string{"numbers", "tree", "enum"} {
		g := mustCompile(t, walkSchemas[name], true)
		fresh := *g
		fresh.masks = nil
		rng := rand.New(rand.NewPCG(3, 3))
		hits := 0
		for range 6 {
			m, ref := g.NewMatcher(v), fresh.NewMatcher(v)
			for step := 0; step < 60; step++ {
				if structural(m.ts) {
					m.key = stateKey(m.key[:0], m.ts)
					if g.masks.get(v, m.key, a) {
						hits++
					}
				}
				m.Mask(a)
				ref.Mask(b)
				if !slices.Equal(a, b) {
					t.Fatalf("%s step %d: cached mask differs from a fresh one", name, step)
				}
				id := pick(a, rng)
				if id < 0 || v.isEOS(id) {
					break
				}
				if m.Accept(id) != nil || ref.Accept(id) != nil {
					t.Fatal("Accept failed")
				}
			}
		}
		t.Logf("%s: %d masks from the cache", name, hits)
		if hits == 0 {
			t.Errorf("%s: the cache was never used", name)
		}
	}
}
