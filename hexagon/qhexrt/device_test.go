package qhexrt

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// TestDevice runs the golden-style checks against real QNN libraries on a
// phone. It never ran here (no phone); docs/device.md says how to run it.
func TestDevice(t *testing.T) {
	if os.Getenv("HEXSERVE_DEVICE_TEST") != "1" {
		t.Skip("device test: set HEXSERVE_DEVICE_TEST=1 and HEXSERVE_DEVICE_BUNDLE (see docs/device.md)")
	}
	bundlePath := os.Getenv("HEXSERVE_DEVICE_BUNDLE")
	if bundlePath == "" {
		t.Fatal("HEXSERVE_DEVICE_BUNDLE is not set")
	}
	env := func(k, def string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return def
	}
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	r, err := Open(Config{
		Bundle: bundlePath,
		QNN: qnn.Config{Backend: env("HEXSERVE_DEVICE_BACKEND", "libQnnHtp.so"), System: env("HEXSERVE_DEVICE_SYSTEM", "libQnnSystem.so"),
			RPCMem: env("HEXSERVE_DEVICE_RPCMEM", "libcdsprpc.so"), ADSPLibraryPath: os.Getenv("ADSP_LIBRARY_PATH"),
			PerfMode: qnn.PerfBurst, Logger: &log},
		Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	}()
	info := r.Info()
	t.Logf("model %s: vocab %d, ctx %d, window %d, contract %s", info.Name, info.VocabSize, info.ContextLen, info.PrefillWindow, r.Contract())

	// A prompt: the golden case's when given, else BOS and a fixed stream.
	var c goldenCase
	if path := os.Getenv("HEXSERVE_DEVICE_GOLDEN"); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var g golden
		if err := json.Unmarshal(b, &g); err != nil {
			t.Fatal(err)
		}
		c = g.get(t, "short")
		worst, misses := checkPositions(t, r, c, true)
		t.Logf("golden %s (prefill): worst top-20 error %.4g, top-1 misses %d", c.Name, worst, misses)
		if misses > 0 {
			t.Errorf("top-1 differs from the golden at %d positions", misses)
		}
	} else {
		c.PromptIDs = []int32{info.BOS}
		for i := range 12 {
			c.PromptIDs = append(c.PromptIDs, int32((i*7919+101)%min(info.VocabSize, 128000)))
		}
	}

	ctx := context.Background()
	n := len(c.PromptIDs)
	last := func(pos int) bool { return pos == n-1 }
	viaPrefill := make([]float32, info.VocabSize)
	if err := evalRows(ctx, r, c.PromptIDs, true, last, func(pos int, l sample.Logits) {
		if pos == n-1 {
			for i := range viaPrefill {
				viaPrefill[i] = l.At(i)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	var worst float64
	var top1 int32
	if err := evalRows(ctx, r, c.PromptIDs, false, last, func(pos int, l sample.Logits) {
		if pos != n-1 {
			return
		}
		for i := range viaPrefill {
			v := float64(l.At(i))
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("logit %d is %v", i, v)
			}
			worst = max(worst, math.Abs(v-float64(viaPrefill[i])))
		}
		top1 = argmax(l)
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("prefill vs decode-only: max logit difference %.4g", worst)
	if top1 != int32(tinyllama.Argmax(viaPrefill)) {
		t.Errorf("next token: prefill path %d, decode path %d", int32(tinyllama.Argmax(viaPrefill)), top1)
	}

	// Prefix reuse: Eval over a cached prefix matches the fresh evaluation.
	if _, _, err := evalOn(r).Eval(ctx, c.PromptIDs[:n-3], 0); err != nil {
		t.Fatal(err)
	}
	l, reused, err := evalOn(r).Eval(ctx, c.PromptIDs, n-3)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("prefix reuse: reused %d rows, top-1 %d", reused, argmax(l))
	if argmax(l) != int32(tinyllama.Argmax(viaPrefill)) {
		t.Errorf("after prefix reuse the next token is %d, want %d", argmax(l), int32(tinyllama.Argmax(viaPrefill)))
	}
	st := r.Stats()
	t.Logf("per call: prefill %v (%d), decode %v (%d), lm-head %v (%d); host %v",
		st.Graphs[r.GraphKey("prefill")].Mean(), st.Graphs[r.GraphKey("prefill")].Calls, st.Graphs[r.GraphKey("decode")].Mean(), st.Graphs[r.GraphKey("decode")].Calls,
		st.Graphs[r.GraphKey("lmhead")].Mean(), st.Graphs[r.GraphKey("lmhead")].Calls, st.Host())
}
