package genie

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hexserve/hexserve/hexagon/genie/geniesim"
	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/internal/testjson"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// A 512-token float32 tiny Genie bundle going on past its window as a ring at the original
// positions (inference.ContextShifter).

const (
	shiftCtx  = 512
	shiftSink = 4 // BOS and three prompt tokens
)

// writeShiftBundle writes the tiny model as a float32 Genie bundle of a 512-token context.
func writeShiftBundle(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	err := geniesim.Write(dir, geniesim.Options{Config: tinyllama.Tiny(), Name: "tiny", Precision: "f32",
		Weights: simfile.WeightF16, Parts: 3, PromptAR: testAR, Ctx: shiftCtx})
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte("{}"), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// shiftRun is one greedy generation: its tokens (prompt included), a digest of every row's
// logits bits (row i: the logits after token i), the positions before which it shifted, and
// the logits of the rows asked for.
type shiftRun struct {
	toks    []int32
	digests [][32]byte
	shifts  []int
	kept    map[int][]float32
}

// generate feeds prompt and then total − len(prompt) greedy tokens to one sequence of the whole
// window; with shift, a full window evicts a quarter of it after the sink (none: the run stops
// at the window). keep names rows whose logits it keeps.
func generate(t testing.TB, r *Runner, total int, shift bool, keep func(row int) bool) shiftRun {
	t.Helper()
	ctx := context.Background()
	window := r.Info().ContextLen
	id, err := r.Open(window)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(id)
	run := shiftRun{kept: map[int][]float32{}}
	held, next := 0, int32(0)
	for pos := 0; pos < total; {
		toks := []int32{next}
		if pos < len(prompt) {
			toks = prompt[pos:min(pos+testAR, len(prompt))]
		}
		if held+len(toks) > window {
			if !shift {
				break
			}
			if err := r.Shift(id, shiftSink, window/4); err != nil {
				t.Fatal(err)
			}
			held -= window / 4
			run.shifts = append(run.shifts, pos)
		}
		rows, err := r.Step(ctx, []inference.Run{{Seq: id, Start: pos, Tokens: toks}})
		if err != nil {
			t.Fatalf("position %d: %v", pos, err)
		}
		for i := range toks {
			l, err := rows[0].Logits(ctx, i)
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.New()
			binary.Write(h, binary.LittleEndian, l.F32)
			run.digests = append(run.digests, [32]byte(h.Sum(nil)))
			if keep != nil && keep(pos+i) {
				run.kept[pos+i] = slices.Clone(l.F32)
			}
			next = int32(argmax(l))
		}
		run.toks = append(run.toks, toks...)
		pos += len(toks)
		held += len(toks)
	}
	return run
}

// TestShiftRing: a greedy generation of 4096 tokens (1400 with -short) on the 512-token bundle,
// shifting a quarter of the window at each window-full, keeps going: its rows before the first
// shift equal an unshifted run's bit for bit, two runs are equal, and rows after shifts equal the
// float64 reference fed the same tokens that evicts the same rows (each row attends the sink
// and the kept rows, at their original positions: nothing re-rotated or re-read).
func TestShiftRing(t *testing.T) {
	total := 4096
	if testing.Short() {
		total = 1400
	}
	r := openRunner(t, openRuntime(t), writeShiftBundle(t))
	if r.MaxPositions() != tinyllama.Tiny().MaxPositionEmbeddings {
		t.Fatalf("MaxPositions %d, want config.json's %d", r.MaxPositions(), tinyllama.Tiny().MaxPositionEmbeddings)
	}
	window := r.Info().ContextLen
	// Checked against the reference: the last rows before the first shift and after each of the
	// first shifts, the rows where the ring wraps, the last row.
	checked := func(row int) bool {
		return row == window-1 || row == total-1 || (row >= window && (row-window)%(window/4) < 2)
	}
	plain := generate(t, r, total, false, nil)
	a := generate(t, r, total, true, checked)
	b := generate(t, r, total, true, nil)
	if len(plain.toks) != window || len(a.toks) != total {
		t.Fatalf("%d tokens unshifted (want the window, %d), %d shifted (want %d)", len(plain.toks), window, len(a.toks), total)
	}
	if len(a.shifts) == 0 || a.shifts[0] != window {
		t.Fatalf("shifts at %v, want the first at the window %d", a.shifts, window)
	}
	for i := range window {
		if a.digests[i] != plain.digests[i] {
			t.Fatalf("row %d before the first shift differs from the unshifted run's", i)
		}
	}
	if !slices.Equal(a.toks, b.toks) || !slices.Equal(a.digests, b.digests) || !slices.Equal(a.shifts, b.shifts) {
		t.Fatal("two shifted runs differ")
	}
	m, err := tinyllama.NewModel(tinyllama.Tiny())
	if err != nil {
		t.Fatal(err)
	}
	s := m.NewSession()
	shifts := a.shifts
	worst := 0.0
	for i, tok := range a.toks {
		if len(shifts) > 0 && shifts[0] == i {
			if err := s.Evict(shiftSink, window/4); err != nil {
				t.Fatal(err)
			}
			shifts = shifts[1:]
		}
		h, err := s.Append(int(tok))
		if err != nil {
			t.Fatal(err)
		}
		got, ok := a.kept[i]
		if !ok {
			continue
		}
		ref := m.Logits(h)
		d := 0.0
		for j, v := range ref {
			d = max(d, math.Abs(float64(got[j])-v))
		}
		if worst = max(worst, d); d > 2e-3 || tinyllama.Argmax(got) != tinyllama.Argmax(ref) {
			t.Errorf("row %d (%d rows held): max |Δlogit| %g, argmax %d, the reference's %d", i, s.Rows(), d,
				tinyllama.Argmax(got), tinyllama.Argmax(ref))
		}
	}
	t.Logf("%d tokens, %d shifts, %d rows checked against the reference (worst |Δlogit| %.2g); %d KV moves",
		len(a.toks), len(a.shifts), len(a.kept), worst, r.Stats().KVMoves)
}

// TestShiftRefusals: a snapshot of a shifted sequence, a fork past its sink and a run past the
// trained positions are errors; the runner keeps serving.
func TestShiftRefusals(t *testing.T) {
	dir := writeShiftBundle(t)
	testjson.Edit(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["max_position_embeddings"] = 600 })
	r := openRunner(t, openRuntime(t), dir)
	if r.MaxPositions() != 600 {
		t.Fatalf("MaxPositions %d, want 600", r.MaxPositions())
	}
	run := generate(t, r, 600, true, nil) // to the last trained position
	if len(run.toks) != 600 || len(run.shifts) != 1 {
		t.Fatalf("%d tokens, shifts at %v", len(run.toks), run.shifts)
	}
	id, _ := r.Open(r.Info().ContextLen)
	window := r.Info().ContextLen
	for pos := 0; pos < window; pos += testAR {
		step(t, r, inference.Run{Seq: id, Start: pos, Tokens: slices.Repeat([]int32{9906}, min(testAR, window-pos))})
	}
	if err := r.Shift(id, shiftSink, window/4); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, r.KVLayout().RowBytes)
	for _, c := range []struct {
		name string
		err  error
	}{
		{"save", r.SaveSeqKV(id, 0, 1, buf)},
		{"restore", r.RestoreSeqKV(id, window, buf)},
		{"fork past the sink", func() error { _, err := r.Fork(id, shiftSink+1, 1); return err }()},
		{"sink changes", r.Shift(id, shiftSink+1, 1)},
		{"past the trained positions", func() error {
			p := window
			for ; p < 600; p++ {
				step(t, r, inference.Run{Seq: id, Start: p, Tokens: []int32{9906}})
			}
			_, err := r.Step(context.Background(), []inference.Run{{Seq: id, Start: p, Tokens: []int32{9906}}})
			return err
		}()},
	} {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
		} else if !strings.HasPrefix(c.err.Error(), "genie: ") {
			t.Errorf("%s: %v does not name the runner", c.name, c.err)
		}
	}
	if len(step(t, r, inference.Run{Seq: id, Start: 599, Tokens: []int32{9906}})[0]) != 1 {
		t.Error("the sequence does not go on within its positions after the refusals")
	}
}

// BenchmarkShiftDecode: one sequence's one-row Steps on the 512-token float32 bundle while it
// holds between ¾ of the window and the window: "before" below position 511, "past" far past it
// (positions 1900 on), shifting a quarter of the window at each window-full (the Shift counted).
// The two attend the same numbers of rows, so they differ by what the ring costs; cpu-ns/op is
// the process's CPU time per step (hostsim's graphs included).
func BenchmarkShiftDecode(b *testing.B) {
	r := openRunner(b, openRuntime(b), writeShiftBundle(b))
	window := r.Info().ContextLen
	for _, c := range []struct {
		name string
		from int // the first timed position
	}{{"before", window - window/4}, {"past", 1900}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			var id inference.SeqID
			pos, held := 0, 0
			// fill opens a sequence and steps it to c.from (shifting past the window).
			fill := func() {
				r.Release(id)
				var err error
				if id, err = r.Open(window); err != nil {
					b.Fatal(err)
				}
				for pos, held = 0, 0; pos < c.from; {
					n := min(testAR, c.from-pos)
					if pos >= window-testAR {
						n = 1
					}
					if held+n > window {
						if err := r.Shift(id, shiftSink, window/4); err != nil {
							b.Fatal(err)
						}
						held -= window / 4
					}
					if _, err := r.Step(ctx, []inference.Run{{Seq: id, Start: pos, Tokens: slices.Repeat([]int32{9906}, n)}}); err != nil {
						b.Fatal(err)
					}
					pos, held = pos+n, held+n
				}
			}
			fill()
			cpu0 := cpuTime()
			b.ResetTimer()
			for b.Loop() {
				if held == window {
					if c.from >= window {
						if err := r.Shift(id, shiftSink, window/4); err != nil {
							b.Fatal(err)
						}
						held -= window / 4
					} else {
						b.StopTimer()
						c0 := cpuTime()
						fill()
						cpu0 += cpuTime() - c0
						b.StartTimer()
					}
				}
				if _, err := r.Step(ctx, []inference.Run{{Seq: id, Start: pos, Tokens: []int32{int32(9906 + pos%64)}}}); err != nil {
					b.Fatal(err)
				}
				pos, held = pos+1, held+1
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
