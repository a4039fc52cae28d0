package executorch

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/slotpool"
	"github.com/hexserve/hexserve/hexagon/writeback"
	"github.com/hexserve/hexserve/inference"
)

// TestCopierMatchesSerial: a run's copies queued per shard (copyRuns) and finished by sync,
// with any number of workers, leave the caches byte for byte as direct
// copies do (run with -race: the workers write Go memory the test reads).
func TestCopierMatchesSerial(t *testing.T) {
	const layers, nkv, hd, cl = 5, 2, 8, 40
	for _, tc := range []struct{ workers, es, ar, n, start int }{
		{0, 1, 1, 1, 17}, {1, 1, 1, 1, 17}, {3, 1, 1, 1, 38},
		{1, 2, 4, 3, 0}, {3, 4, 4, 4, 20}, {2, 1, 8, 5, 9},
	} {
		t.Run(fmt.Sprintf("workers%d-es%d-ar%d", tc.workers, tc.es, tc.ar), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.workers), uint64(tc.es)))
			fill := func(n int) []byte {
				b := make([]byte, n)
				for i := range b {
					b[i] = byte(rng.Uint32())
				}
				return b
			}
			st := cl - tc.ar
			m := &method{layout: &layout{ar: tc.ar}}
			var k, v, wantK, wantV [][]byte
			for range layers {
				k, v = append(k, fill(nkv*hd*st*tc.es)), append(v, fill(nkv*hd*st*tc.es))
				m.kOut, m.vOut = append(m.kOut, fill(nkv*hd*tc.ar*tc.es)), append(m.vOut, fill(nkv*hd*tc.ar*tc.es))
			}
			r := &Runner{layers: layers, es: tc.es, kc: slotpool.NewCache(k, v, nkv, hd, tc.es, st, tc.workers)}
			defer r.kc.Close()
			for l := range layers {
				k, v := slices.Clone(r.kc.K[l]), slices.Clone(r.kc.V[l])
				r.kc.KS.Copy(k, st, tc.start, m.kOut[l], tc.ar, 0, tc.n)
				r.kc.VS.Copy(v, st, tc.start, m.vOut[l], tc.ar, 0, tc.n)
				wantK, wantV = append(wantK, k), append(wantV, v)
			}
			r.Batcher = slotpool.NewBatcher(&r.life, st, 2, r.cache)
			if tc.start > 0 {
				if _, err := r.Open(tc.start); err != nil { // slots [0, start)
					t.Fatal(err)
				}
			}
			id, err := r.Open(tc.n) // slots start…
			if err != nil {
				t.Fatal(err)
			}
			runs := []inference.Run{{Seq: id, Tokens: make([]int32, tc.n)}}
			r.copyRuns(m, []int{0, 1, 2}, runs) // shard 0
			r.copyRuns(m, []int{3, 4}, runs)    // shard 1, queued before shard 0's is done
			r.kc.Start()
			r.sync()
			for l := range layers {
				if !bytes.Equal(r.kc.K[l], wantK[l]) || !bytes.Equal(r.kc.V[l], wantV[l]) {
					t.Fatalf("layer %d: caches differ from a direct copy", l)
				}
			}
			if tc.workers == 0 && r.kc.OffPath() != 0 {
				t.Errorf("no workers, yet %v of background copying", r.kc.OffPath())
			}
		})
	}
}

// TestStepLayers: a step waits for the copies of the layers whose caches
// or new entries it touches, and a layer's copy starts after the last such
// step (its shard's call, or a later copy of its new entries).
func TestStepLayers(t *testing.T) {
	// Values: layer j's K in 10+j, V in 20+j, new K 30+j, new V 40+j; hidden states 1, 2.
	call := func(d int, layers ...int32) lstep {
		s := lstep{delegate: d, in: []arg{{value: 1}}, out: []arg{{value: 2}}}
		for _, j := range layers {
			s.in = append(s.in, arg{value: 10 + j}, arg{value: 20 + j})
			s.out = append(s.out, arg{value: 30 + j}, arg{value: 40 + j})
		}
		return s
	}
	l := &layout{kIn: []int32{10, 11, 12, 13}, vIn: []int32{20, 21, 22, 23}, kNew: []int32{30, 31, 32, 33}, vNew: []int32{40, 41, 42, 43}}
	for _, tc := range []struct {
		name                   string
		steps                  []lstep
		wantTouched, wantFinal [][]int
	}{
		{"one shard", []lstep{call(0, 0, 1, 2, 3)}, [][]int{{0, 1, 2, 3}}, [][]int{{0, 1, 2, 3}}},
		{"two shards and a copy", []lstep{call(0, 0, 1), {delegate: -1, from: 2, to: 1}, call(1, 2, 3)},
			[][]int{{0, 1}, nil, {2, 3}}, [][]int{{0, 1}, nil, {2, 3}}},
		{"a later copy of new entries", []lstep{call(0, 0, 1), {delegate: -1, from: 41, to: 5}, call(1, 2, 3)},
			[][]int{{0, 1}, {1}, {2, 3}}, [][]int{{0}, {1}, {2, 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l.steps = tc.steps
			touched, final := stepLayers(l, 4)
			if fmt.Sprint(touched) != fmt.Sprint(tc.wantTouched) || fmt.Sprint(final) != fmt.Sprint(tc.wantFinal) {
				t.Errorf("stepLayers = %v, %v; want %v, %v", touched, final, tc.wantTouched, tc.wantFinal)
			}
		})
	}
}

// TestStartSteps: the queued copies start after the last-but-one and the
// last delegate call (and any step after them), not after every shard.
func TestStartSteps(t *testing.T) {
	call := func(d int) lstep { return lstep{delegate: d} }
	cp := lstep{delegate: -1}
	for _, tc := range []struct {
		name  string
		steps []lstep
		want  []bool
	}{
		{"one shard", []lstep{call(0)}, []bool{true}},
		{"two shards", []lstep{call(0), call(1)}, []bool{true, true}},
		{"three shards", []lstep{call(0), call(1), call(2)}, []bool{false, true, true}},
		{"three shards and copies", []lstep{call(0), cp, call(1), cp, call(2), cp}, []bool{false, false, true, true, true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := startSteps(&layout{steps: tc.steps}); !slices.Equal(got, tc.want) {
				t.Errorf("startSteps = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCopyAfterEval: the entry points right after a Step see its copied
// slots. With no copy workers every copy is still pending when Step
// returns, so an entry point that did not wait would read stale slots or
// have its writes overwritten; with workers the copies race the caller.
func TestCopyAfterEval(t *testing.T) {
	rt := openRuntime(t)
	path := writePTE(t, pteOpts{ctx: 64, ar: 8, shards: 2, kv: simfile.F32, logits: simfile.F32})
	c := loadGolden(t)[0]
	for _, workers := range []int{0, writeback.Workers()} {
		t.Run(fmt.Sprintf("workers%d", workers), func(t *testing.T) {
			r := openRunner(t, rt, path)
			r.kc.Close()
			r.kc = slotpool.NewCache(r.kc.K, r.kc.V, r.nkv, r.hd, r.es, r.kc.Stride, workers)
			ctx := context.Background()
			_, seq := greedy(t, r, slices.Clone(c.PromptIDs), 0, 20) // Eval after Eval: decode reads the last copy
			eval := func(s []int32, valid int) []float32 {
				t.Helper()
				l, _, err := evalOn(r).Eval(ctx, s, valid)
				if err != nil {
					t.Fatal(err)
				}
				return slices.Clone(l.F32)
			}
			rb := r.rowBytes()
			save := func(n int) []byte {
				t.Helper()
				b := make([]byte, n*rb)
				if err := evalOn(r).Save(0, n, b); err != nil {
					t.Fatal(err)
				}
				return b
			}
			cold := eval(seq[:24], 0)
			r.sync()
			want := save(24)

			eval(seq[1:25], 0) // other contents in every slot
			eval(seq[:24], 0)
			if got := save(24); !bytes.Equal(got, want) {
				t.Error("a save right after a Step: the snapshot differs from the settled one")
			}

			eval(seq[1:25], 0)
			if err := evalOn(r).Restore(0, want[:20*rb], seq); err != nil { // the last Step's copies must not land on it later
				t.Fatal(err)
			}
			if l := eval(seq[:24], 20); !slices.Equal(l, cold) {
				t.Error("a Step after a restore right after a Step differs from a cold evaluation")
			}
			eval(seq[:10], 0)
			r.Close() // waits for the copies before freeing the caches
		})
	}
}
