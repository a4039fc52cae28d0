package qhexrt

import (
	"context"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/hexagon/slotpool"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/inferencetest"
	"github.com/hexserve/hexserve/internal/threadcpu"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// devVariant is the dev bundle's configuration (make models: QHexRT
// contract, window 128, context 512, f32 I/O and KV).
var devVariant = f32(simfile.QHexRT, 128, simfile.MaskAdditive)

// TestRingMask: after shifts, the decode mask of a row at pos opens exactly
// the slots of the positions before it that the set holds (the sink and the
// kept rows), each held position has a slot of its own, and the row's own
// slot (where its K/V goes) holds no open row.
func TestRingMask(t *testing.T) {
	const ctx = 8
	tests := []struct {
		name           string
		sink, evicted  int
		pos            int
		wantOpenSlots  []int
		wantWriteSlots int
	}{
		{"unshifted", 0, 0, 5, []int{0, 1, 2, 3, 4}, 5},
		{"first shift, no wrap yet", 2, 2, 8, []int{0, 1, 4, 5, 6, 7}, 2},
		{"wrapped", 2, 2, 9, []int{0, 1, 4, 5, 6, 7, 2}, 3},
		{"second shift", 2, 4, 10, []int{0, 1, 6, 7, 2, 3}, 4},
		{"ring past one turn", 2, 8, 15, []int{0, 1, 4, 5, 6, 7, 2}, 3},
		{"no sink", 0, 3, 10, []int{3, 4, 5, 6, 7, 0, 1}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &kvSet{kv: slotpool.KV{Stride: ctx}, seq: slotpool.Seq{Hi: ctx, N: tt.pos, Keep: tt.sink, Gone: tt.evicted}}
			m, err := graphio.NewMask(graphio.Elem{Type: qnn.Float32}, graphio.MaskAdditive)
			if err != nil {
				t.Fatal(err)
			}
			b := make([]byte, ctx*4)
			s.mask(m, b, tt.pos)
			open := make([]byte, 4)
			m.Fill(open, 0, 1, true)
			var got []int
			for i := range ctx {
				if string(b[i*4:i*4+4]) == string(open) {
					got = append(got, i)
				}
			}
			want := slices.Sorted(slices.Values(tt.wantOpenSlots))
			if !slices.Equal(got, want) {
				t.Errorf("open slots %v, want %v", got, want)
			}
			var held []int
			for p := range tt.pos {
				if s.held(p, p+1) {
					held = append(held, s.seq.Slot(p))
				}
			}
			if !slices.Equal(held, tt.wantOpenSlots) {
				t.Errorf("held positions' slots %v, want %v", held, tt.wantOpenSlots)
			}
			if w := s.seq.Slot(tt.pos); w != tt.wantWriteSlots || slices.Contains(got, w) {
				t.Errorf("the row goes to slot %d (open: %v), want %d, closed", w, slices.Contains(got, w), tt.wantWriteSlots)
			}
		})
	}
}

// shiftResult is one shiftRun: the tokens generated, the logits of the
// rows keep accepts (by position), the positions where it shifted, and the
// thread CPU (and wall) time per token over the last quarter of the context
// before the first shift and over the rows after it.
type shiftResult struct {
	toks            []int32
	kept            map[int][]float32
	shifts          []int
	before, after   time.Duration
	beforeW, afterW time.Duration
}

// shiftRun is one greedy generation of n tokens after prompt on a new
// sequence of r, a decode row per Step; with shift, whenever the sequence
// holds the context it evicts a quarter of it after the prompt (the sink),
// else it stops there.
func shiftRun(t testing.TB, r *Runner, prompt []int32, n int, shift bool, keep func(pos int) bool) shiftResult {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx := context.Background()
	C := r.spec.ctx
	id, err := r.Open(C)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(id)
	res := shiftResult{kept: map[int][]float32{}}
	toks := slices.Clone(prompt)
	run := inference.Run{Seq: id, Tokens: prompt}
	var c0, c1, w0, w1 time.Duration
	var k0, k1 int // tokens timed before and after
	for len(toks) < len(prompt)+n {
		if run.Start-len(res.shifts)*C/4 == C {
			if !shift {
				break
			}
			if err := r.Shift(id, len(prompt), C/4); err != nil {
				t.Fatal(err)
			}
			res.shifts = append(res.shifts, run.Start)
		}
		cpu0, _ := threadcpu.Time()
		wall0 := time.Now()
		out, err := r.Step(ctx, []inference.Run{run})
		if err != nil {
			t.Fatalf("step at %d: %v", run.Start, err)
		}
		l, err := out[0].Logits(ctx, len(run.Tokens)-1)
		if err != nil {
			t.Fatal(err)
		}
		cpu1, _ := threadcpu.Time()
		switch {
		case len(res.shifts) == 0 && run.Start >= 3*C/4:
			c0, w0, k0 = c0+cpu1-cpu0, w0+time.Since(wall0), k0+1
		case len(res.shifts) > 0:
			c1, w1, k1 = c1+cpu1-cpu0, w1+time.Since(wall0), k1+1
		}
		if pos := run.Start + len(run.Tokens) - 1; keep != nil && keep(pos) {
			res.kept[pos] = copyLogits(l)
		}
		next := int32(inferencetest.Argmax(l))
		toks = append(toks, next)
		run = inference.Run{Seq: id, Start: run.Start + len(run.Tokens), Tokens: []int32{next}}
	}
	res.toks = toks[len(prompt):]
	if k0 > 0 {
		res.before, res.beforeW = c0/time.Duration(k0), w0/time.Duration(k0)
	}
	if k1 > 0 {
		res.after, res.afterW = c1/time.Duration(k1), w1/time.Duration(k1)
	}
	return res
}

// TestShiftRing: on the dev bundle's configuration (context 512), 4096
// greedy tokens with a Shift at each window-full complete (2048 on a
// chunked f16 bundle, whose ring is the slot pool's); the rows before the
// first shift equal an unshifted run's bit for bit; two runs give the same
// tokens; the rows after each shift equal the float64 reference that
// evicts the same rows, within tol.
func TestShiftRing(t *testing.T) {
	skipNumeric(t)
	chunked := variant{contract: simfile.Chunked, window: 128, io: simfile.F16, kv: simfile.F16, mask: simfile.MaskAdditive}
	for _, c := range []struct {
		v   variant
		n   int
		tol float64 // |Δlogit|: golden_test.go's for f32, sixteen_test.go's for f16
	}{{devVariant, 4096, 1e-4}, {chunked, 2048, 0.05}} {
		t.Run(c.v.String(), func(t *testing.T) { shiftRing(t, openTiny(t, c.v), c.n, c.tol) })
	}
}

func shiftRing(t *testing.T, r *Runner, n int, tol float64) {
	if got := r.MaxPositions(); got != tinyllama.Tiny().MaxPositionEmbeddings || got == 0 {
		t.Errorf("MaxPositions() = %d, want the config's %d", got, tinyllama.Tiny().MaxPositionEmbeddings)
	}
	prompt := testPrompt(50, 6)
	C := r.spec.ctx
	// Checked against the reference: the last row before the first shift,
	// the first rows after each shift, the last row.
	checked := func(pos int) bool {
		return pos == C-1 || pos == len(prompt)+n-2 || pos >= C && (pos-C)%(C/4) < 2
	}
	before := func(pos int) bool { return pos < C }
	plain := shiftRun(t, r, prompt, n, false, before)
	a := shiftRun(t, r, prompt, n, true, func(pos int) bool { return before(pos) || checked(pos) })
	b := shiftRun(t, r, prompt, n, true, nil)
	if len(a.toks) != n || len(a.shifts) == 0 || a.shifts[0] != C {
		t.Fatalf("%d tokens with shifts at %v, want %d tokens, the first shift at %d", len(a.toks), a.shifts, n, C)
	}
	if len(plain.kept) != C-len(prompt)+1 {
		t.Fatalf("%d rows unshifted, want %d", len(plain.kept), C-len(prompt)+1)
	}
	for pos, want := range plain.kept {
		if got := a.kept[pos]; !slices.Equal(got, want) {
			t.Fatalf("row %d before the first shift differs from the unshifted run (max %g)", pos, maxDiff(got, want))
		}
	}
	if !slices.Equal(a.toks, b.toks) || !slices.Equal(a.shifts, b.shifts) {
		t.Fatal("two shifted runs differ")
	}
	ref := map[int][]float32{}
	for pos, l := range a.kept {
		if checked(pos) {
			ref[pos] = l
		}
	}
	worst := checkRingReference(t, append(slices.Clone(prompt), a.toks...), len(prompt), C/4, a.shifts, ref, tol)
	t.Logf("%d tokens, %d shifts, %d rows within %.2g of the float64 reference; per token: before the first shift %v CPU (%v wall), after %v CPU (%v wall)",
		n, len(a.shifts), len(ref), worst, a.before, a.beforeW, a.after, a.afterW)
}

// checkRingReference compares kept's logits (by position) with the float64
// reference fed toks that evicts n rows after the sink at each position of
// shifts (tinyllama.Model.RingLogits): |Δlogit| within tol, the same argmax
// where the reference's margin is clear. It returns the worst |Δlogit|.
func checkRingReference(t *testing.T, toks []int32, sink, n int, shifts []int, kept map[int][]float32, tol float64) float64 {
	t.Helper()
	m, err := tinyllama.NewModel(tinyllama.Tiny())
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	want := func(pos int) bool { _, ok := kept[pos]; return ok }
	err = m.RingLogits(toks, sink, n, shifts, want, func(pos, rows int, ref []float64) {
		got := kept[pos]
		d := tinyllama.MaxAbsDiff(got, ref)
		worst = max(worst, d)
		top, margin := tinyllama.Argmax(ref), math.Inf(1)
		for j, v := range ref {
			if j != top {
				margin = min(margin, ref[top]-v)
			}
		}
		if d > tol || margin > 0.1 && tinyllama.Argmax(got) != top {
			t.Errorf("row %d (%d rows held): max |Δlogit| %g, argmax %d, the reference's %d", pos, rows, d, tinyllama.Argmax(got), top)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return worst
}

// TestShiftErrors: Shift refuses an unknown sequence, a keep that changes
// after a shift and more rows than the sequence holds after the sink; a
// shifted QHexRT-contract sequence refuses to save evicted rows, a restore,
// and a fork past its sink; a run past MaxPositions is refused.
func TestShiftErrors(t *testing.T) {
	skipNumeric(t)
	r := openTiny(t, f32(simfile.QHexRT, 16, simfile.MaskAdditive))
	ctx := context.Background()
	id, err := r.Open(r.spec.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Step(ctx, []inference.Run{{Seq: id, Tokens: testPrompt(51, 12)}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		id      inference.SeqID
		keep, n int
	}{{"unknown", id + 1, 2, 1}, {"past the rows", id, 2, 11}, {"nothing", id, 2, 0}} {
		if err := r.Shift(c.id, c.keep, c.n); err == nil {
			t.Errorf("%s: Shift(%d, %d, %d) succeeded", c.name, c.id, c.keep, c.n)
		}
	}
	if err := r.Shift(id, 2, 3); err != nil {
		t.Fatal(err)
	}
	if err := r.Shift(id, 3, 1); err == nil {
		t.Error("a second Shift with another keep succeeded")
	}
	rb := r.KVLayout().RowBytes
	if err := r.SaveSeqKV(id, 0, 4, make([]byte, 4*rb)); err == nil {
		t.Error("saving evicted rows succeeded")
	}
	if err := r.SaveSeqKV(id, 5, 12, make([]byte, 7*rb)); err != nil {
		t.Errorf("saving kept rows: %v", err)
	}
	if err := r.RestoreSeqKV(id, 12, make([]byte, rb)); err == nil {
		t.Error("restoring into a shifted sequence succeeded")
	}
	if _, err := r.Fork(id, 4, 1); err == nil {
		t.Error("a fork past the sink of a shifted sequence succeeded")
	}
	f, err := r.Fork(id, 2, 1)
	if err != nil {
		t.Fatalf("a fork of the sink: %v", err)
	}
	r.Release(f)
	r.Release(id)

	r.spec.maxPositions = 14 // as if the model were trained for 14 positions
	_, err = r.Step(ctx, []inference.Run{{Seq: openFull(t, r), Tokens: testPrompt(52, 15)}})
	if err == nil || !strings.Contains(err.Error(), "trained for 14") {
		t.Errorf("a run past MaxPositions: %v", err)
	}
}

// openFull opens a sequence of the context's rows on r.
func openFull(t *testing.T, r *Runner) inference.SeqID {
	t.Helper()
	id, err := r.Open(r.spec.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// BenchmarkShiftRing is TestShiftRing's 4096-token run on the dev bundle's
// configuration: it reports the thread CPU (and wall) time per token over
// the last quarter of the context before the first shift and past it. Run
// it with HOSTSIM_THREADS=1, so that the thread's CPU is all of hostsim's
// work (its pool's caller otherwise does a share and waits for the rest).
func BenchmarkShiftRing(b *testing.B) {
	r := openTiny(b, devVariant)
	prompt := testPrompt(50, 6)
	for b.Loop() {
		res := shiftRun(b, r, prompt, 4096, true, nil)
		b.ReportMetric(float64(res.before.Microseconds()), "µs-cpu/token-before")
		b.ReportMetric(float64(res.after.Microseconds()), "µs-cpu/token-after")
		b.ReportMetric(float64(res.beforeW.Microseconds()), "µs-wall/token-before")
		b.ReportMetric(float64(res.afterW.Microseconds()), "µs-wall/token-after")
		b.ReportMetric(float64(res.after)/float64(res.before), "after/before-cpu")
	}
}
