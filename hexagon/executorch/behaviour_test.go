package executorch

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/internal/hostsimtest"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// hostsimSet sets a hostsim switch (hostsim_set; "" clears it) and returns the execute count.
func hostsimSet(t testing.TB) (set func(name, value string), execs func() int64) {
	t.Helper()
	lib, err := purego.Dlopen(filepath.Join(hostsimtest.Dir(t), "libQnnHtp.so"), purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Fatal(err)
	}
	var cset func(name, value *byte) int32
	var cstats func(*[12]int64) int32
	for name, fn := range map[string]any{"hostsim_set": &cset, "hostsim_stats": &cstats} {
		p, err := purego.Dlsym(lib, name)
		if err != nil {
			t.Fatal(err)
		}
		purego.RegisterFunc(fn, p)
	}
	set = func(name, value string) {
		n := append([]byte(name), 0)
		if value == "" {
			cset(&n[0], nil)
			return
		}
		v := append([]byte(value), 0)
		cset(&n[0], &v[0])
		runtime.KeepAlive(n)
		runtime.KeepAlive(v)
	}
	execs = func() int64 {
		var s [12]int64
		cstats(&s)
		return s[6] // exec_calls
	}
	return set, execs
}

func logitsEqual(a, b sample.Logits) bool {
	if a.Type != b.Type || a.Len() != b.Len() {
		return false
	}
	for i := range a.Len() {
		if a.At(i) != b.At(i) {
			return false
		}
	}
	return true
}

func clone(l sample.Logits) sample.Logits {
	l.F32, l.Raw16 = slices.Clone(l.F32), slices.Clone(l.Raw16)
	return l
}

// TestBehaviour covers a float32 .pte with AR 8 and CL 64: turns that switch graphs (re-striding
// both ways), a verify run with rollback, KV snapshots and recovery from QNN errors.
func TestBehaviour(t *testing.T) {
	rt := openRuntime(t)
	r := openRunner(t, rt, writePTE(t, pteOpts{ctx: 64, ar: 8, shards: 2, kv: simfile.F32, logits: simfile.F32}))
	ctx := context.Background()
	c := loadGolden(t)[0] // short: 5 prompt tokens, golden greedy
	// Reference: one greedy run of 20 tokens from a cold cache.
	ref, seq := greedy(t, r, slices.Clone(c.PromptIDs), 0, 20)
	if !slices.Equal(ref, c.Greedy[:20]) {
		t.Fatalf("greedy %v, golden %v", ref, c.Greedy[:20])
	}
	eval := func(s []int32, valid int) sample.Logits {
		t.Helper()
		l, _, err := evalOn(r).Eval(ctx, s, valid)
		if err != nil {
			t.Fatal(err)
		}
		return clone(l)
	}
	cold := eval(seq[:24], 0)

	t.Run("turns", func(t *testing.T) {
		// Second turn after decode: prefill again (127→… shrink), then decode (grow).
		eval(seq[:12], 0)
		eval(seq[:13], 12)
		if l := eval(seq[:24], 13); !logitsEqual(l, cold) {
			t.Error("a second turn over the cache differs from a cold evaluation")
		}
		if r.Stats().Restrides == 0 {
			t.Error("no re-striding counted")
		}
	})

	t.Run("verify", func(t *testing.T) {
		eval(seq[:10], 0)
		// Last accepted token plus a draft whose 3rd token is wrong, in one run.
		draft := slices.Clone(seq[:16])
		draft[12] = (draft[12] + 1) % 1000
		rows, err := evalOn(r).Step(ctx, draft, 9)
		if err != nil {
			t.Fatal(err)
		}
		if rows.Len() != 7 {
			t.Fatalf("%d rows, want 7", rows.Len())
		}
		for i := range 3 { // rows before the wrong token match a plain evaluation
			l, err := rows.Logits(ctx, i)
			if err != nil {
				t.Fatal(err)
			}
			if argmax(l) != seq[10+i] {
				t.Errorf("row %d: argmax %d, want %d", i, argmax(l), seq[10+i])
			}
		}
		// Accept up to the wrong token: valid 12 rolls the rest back.
		if l := eval(seq[:24], 12); !logitsEqual(l, cold) {
			t.Error("after a rolled-back verify the logits differ from a cold evaluation")
		}
	})

	t.Run("snapshot", func(t *testing.T) {
		eval(seq[:24], 0)
		lay := r.KVLayout()
		tc := tinyllama.Tiny()
		if want := 2 * tc.NumHiddenLayers * tc.NumKeyValueHeads * tc.HeadDim * 4; lay.RowBytes != want {
			t.Fatalf("row bytes %d, want %d (float32 K and V of every layer)", lay.RowBytes, want)
		}
		buf := make([]byte, 20*lay.RowBytes)
		if err := evalOn(r).Save(0, 20, buf); err != nil {
			t.Fatal(err)
		}
		eval(seq[:3], 0) // another conversation overwrites the cache
		if err := evalOn(r).Restore(0, buf, seq); err != nil {
			t.Fatal(err)
		}
		l, reused, err := evalOn(r).Eval(ctx, seq[:24], 20)
		if err != nil || reused != 20 {
			t.Fatalf("Eval after restore: reused %d, %v", reused, err)
		}
		if !logitsEqual(l, cold) {
			t.Error("logits after a restored prefix differ from a cold evaluation")
		}
		if err := evalOn(r).Save(0, 30, make([]byte, 30*lay.RowBytes)); err == nil {
			t.Error("a save past the committed rows succeeded")
		}
	})

	t.Run("qnn errors", func(t *testing.T) {
		set, execs := hostsimSet(t)
		eval(seq[:10], 0)
		for _, code := range []string{"1007", "1011", "6004"} {
			set("HOSTSIM_FAIL_CODE", code)
			set("HOSTSIM_FAIL_EXECUTE_AT", strconv.FormatInt(execs()+2, 10))
			_, _, err := evalOn(r).Eval(ctx, seq[:24], 10)
			set("HOSTSIM_FAIL_EXECUTE_AT", "")
			set("HOSTSIM_FAIL_CODE", "")
			var ee *graphio.ExecError
			if !errors.As(err, &ee) {
				t.Fatalf("code %s: error %v is not an *ExecError", code, err)
			}
			if restart := qnn.IsDeviceRestart(err); restart != (code != "6004") {
				t.Errorf("code %s: IsDeviceRestart = %v", code, restart)
			}
			l, reused, err := evalOn(r).Eval(ctx, seq[:24], 10)
			if err != nil || reused != 0 {
				t.Fatalf("code %s: Eval after the failure: reused %d, %v", code, reused, err)
			}
			if !logitsEqual(l, cold) {
				t.Errorf("code %s: logits after recovery differ", code)
			}
		}
		if got := r.Stats().Reloads; got != 2 {
			t.Errorf("%d reloads, want 2", got)
		}
	})

	t.Run("limits", func(t *testing.T) {
		if _, _, err := evalOn(r).Eval(ctx, make([]int32, 64), 0); err == nil {
			t.Error("a sequence of CL tokens was accepted")
		}
		long := make([]int32, 63)
		copy(long, seq)
		if _, _, err := evalOn(r).Eval(ctx, long, 0); err != nil { // prefill to CL−AR, decode to CL−1
			t.Errorf("CL−1 tokens: %v", err)
		}
		if _, _, err := evalOn(r).Eval(ctx, []int32{int32(r.vocab)}, 0); err == nil {
			t.Error("a token outside the vocabulary was accepted")
		}
	})
}
