package qhexrt

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/hexagon/qhexrt/bundle"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/internal/testerr"
)

// copyLogits converts l to float32.
func copyLogits(l sample.Logits) []float32 {
	out := make([]float32, l.Len())
	for i := range out {
		out[i] = l.At(i)
	}
	return out
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// TestPrefixReuse: evaluating from a later start after an earlier call gives
// the logits of a fresh full evaluation, in both contracts and for reuse
// below, at and beyond the prefill window.
func TestPrefixReuse(t *testing.T) {
	seq := loadGolden(t).get(t, "cross128").PromptIDs // 130 tokens
	ctx := context.Background()
	for _, v := range []variant{f32(simfile.QHexRT, 16, simfile.MaskAdditive), f32(simfile.Chunked, 16, simfile.MaskAdditive)} {
		t.Run(v.String(), func(t *testing.T) {
			r := openTiny(t, v)
			for _, n := range []int{5, 16, 40} {
				l, reused, err := evalOn(r).Eval(ctx, seq[:n+3], 0)
				if err != nil {
					t.Fatal(err)
				}
				if reused != 0 {
					t.Fatalf("fresh eval reused %d rows", reused)
				}
				fresh := copyLogits(l)
				if _, _, err := evalOn(r).Eval(ctx, seq[:n], 0); err != nil {
					t.Fatal(err)
				}
				l, reused, err = evalOn(r).Eval(ctx, seq[:n+3], n)
				if err != nil {
					t.Fatal(err)
				}
				if d := maxDiff(copyLogits(l), fresh); d > 1e-4 {
					t.Errorf("prefix %d (reused %d): logits differ from a fresh evaluation by %.3g", n, reused, d)
				}
				// The planner may re-prefill a short prefix, never reuse more than valid.
				if reused != 0 && reused != n {
					t.Errorf("prefix %d: reused %d", n, reused)
				}
				// A full hit re-runs only the last token.
				if _, reused, err = evalOn(r).Eval(ctx, seq[:n+3], n+3); err != nil || reused > n+2 {
					t.Errorf("full hit: reused %d, err %v", reused, err)
				}
			}
		})
	}
}

// TestReuseContinuesWithDecode: on a QHexRT-contract bundle a reused
// prefix of a prompt longer than the window continues with decode steps (its
// prefill graph starts at 0 only).
func TestReuseContinuesWithDecode(t *testing.T) {
	cfg := hostsimConfig(t)
	dir := tinyBundle(t, f32(simfile.QHexRT, 16, simfile.MaskAdditive))
	r, err := Open(Config{Bundle: dir, QNN: cfg, Logger: zerolog.Nop(), Costs: plan.Costs{Prefill: 1e9, Decode: 1e6, LMHead: 1e5}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	seq := loadGolden(t).get(t, "cross128").PromptIDs[:20] // longer than the window
	ctx := context.Background()
	if _, _, err := evalOn(r).Eval(ctx, seq[:18], 0); err != nil {
		t.Fatal(err)
	}
	before := r.Stats()
	if _, reused, err := evalOn(r).Eval(ctx, seq, 18); err != nil || reused != 18 {
		t.Fatalf("reused %d, err %v", reused, err)
	}
	after := r.Stats()
	if p, d := after.Graphs[r.GraphKey("prefill")].Calls-before.Graphs[r.GraphKey("prefill")].Calls, after.Graphs[r.GraphKey("decode")].Calls-before.Graphs[r.GraphKey("decode")].Calls; p != 0 || d != 2 {
		t.Errorf("%d prefill and %d decode calls, want 0 and 2", p, d)
	}
}

func TestOpenErrors(t *testing.T) {
	cfg := hostsimConfig(t)
	dir := tinyBundle(t, f32(simfile.QHexRT, 16, simfile.MaskAdditive))
	name := "nope"
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"missing library", Config{Bundle: dir, QNN: qnn.Config{Backend: "/nonexistent/libQnnHtp.so", System: cfg.System}},
			[]string{"/nonexistent/libQnnHtp.so"}},
		{"missing symbol", Config{Bundle: dir, QNN: qnn.Config{Backend: cfg.RPCMem, System: cfg.System}},
			[]string{"QnnInterface_getProviders"}},
		{"missing bundle", Config{Bundle: filepath.Join(dir, "nothing"), QNN: cfg}, []string{"nothing"}},
		{"tensor not in the binary", Config{Bundle: dir, QNN: cfg, Overrides: &bundle.Hexserve{Tensors: &bundle.Tensors{X: "xx", NewV: "v_{i}"}}},
			[]string{`model.bin graph "prefill": no input "xx"`, `model.bin graph "decode": no input "xx"`, `model.bin graph "decode": no output "v_1"`}},
		{"wrong window", Config{Bundle: dir, QNN: cfg, Overrides: &bundle.Hexserve{PrefillWindow: ptr(32)}},
			[]string{`model.bin graph "prefill": input "x" has dims [16 64]`}},
		{"wrong mask encoding", Config{Bundle: dir, QNN: cfg, Overrides: &bundle.Hexserve{Mask: &name}}, []string{"nope"}},
		{"graph not in the binary", Config{Bundle: withGraphName(t, dir, "decoder"), QNN: cfg},
			[]string{`model.bin: no decode graph "decoder" (the binary has prefill, decode)`}},
		{"overrides that match", Config{Bundle: dir, QNN: cfg, Overrides: &bundle.Hexserve{PrefillWindow: ptr(16), Tensors: &bundle.Tensors{X: "x"}}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Open(tt.cfg)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				r.Close()
				return
			}
			if err == nil {
				r.Close()
				t.Fatal("Open succeeded")
			}
			testerr.Mentions(t, err, tt.want...)
		})
	}
}

// withGraphName copies dir's manifest with plan.params.decode renamed.
func withGraphName(t *testing.T, dir, decode string) string {
	b, err := bundle.Read(dir, "v79")
	if err != nil {
		t.Fatal(err)
	}
	m := b.Manifest
	out := filepath.Join(t.TempDir(), "v79")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	link := func(rel string) string {
		name, err := linkInto(out, filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		return name
	}
	for k, c := range m.Artifacts.Contexts {
		c.Bin = link(c.Bin)
		m.Artifacts.Contexts[k] = c
	}
	m.Artifacts.Embed, m.Artifacts.Tokenizer = link(m.Artifacts.Embed), link(m.Artifacts.Tokenizer)
	m.Plan.Params.Decode = decode
	if err := bundle.Write(out, m); err != nil {
		t.Fatal(err)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// TestExecuteFailureRecovery injects a device restart (1007) into a graph
// execute: Eval returns a typed error, the runner reloads its contexts, and
// the next Eval re-prefills and gives the golden logits again. Close then
// releases every hostsim object.
func TestExecuteFailureRecovery(t *testing.T) {
	cfg := hostsimConfig(t)
	ctl := openHostsimCtl(t, cfg)
	c := loadGolden(t).get(t, "short")
	dir := tinyBundle(t, f32(simfile.Chunked, 16, simfile.MaskAdditive))
	base := ctl.Stats()
	r, err := Open(Config{Bundle: dir, QNN: cfg, Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := evalOn(r).Eval(ctx, c.PromptIDs[:3], 0); err != nil {
		t.Fatal(err)
	}
	// Fail the 2nd execute from now: the first decode step's lm-head... or
	// whichever graph runs second.
	for _, code := range []string{"1007", "1011", "6004"} {
		ctl.Set("HOSTSIM_FAIL_CODE", code)
		ctl.Set("HOSTSIM_FAIL_EXECUTE_AT", strconv.FormatInt(ctl.Stats().ExecCalls+2, 10))
		_, _, err = evalOn(r).Eval(ctx, c.PromptIDs, 3)
		ctl.Set("HOSTSIM_FAIL_EXECUTE_AT", "")
		var ee *graphio.ExecError
		if !errors.As(err, &ee) {
			t.Fatalf("code %s: error %v is not an *ExecError", code, err)
		}
		restart := qnn.IsDeviceRestart(err)
		if want := code != "6004"; restart != want {
			t.Errorf("code %s: IsDeviceRestart = %v", code, restart)
		}
		t.Logf("code %s: %v", code, err)
		// The next Eval works (after a restart it re-prefills: nothing reused).
		l, reused, err := evalOn(r).Eval(ctx, c.PromptIDs, 3)
		if err != nil {
			t.Fatalf("code %s: Eval after the failure: %v", code, err)
		}
		if restart && reused != 0 {
			t.Errorf("code %s: reused %d rows after a device restart", code, reused)
		}
		if e, ok := topError(l, c.Checks[len(c.Checks)-1].Top); e > 1e-4 || !ok {
			t.Errorf("code %s: logits after recovery off by %.3g", code, e)
		}
	}
	ctl.Set("HOSTSIM_FAIL_CODE", "")
	if got := r.Stats().Reloads; got != 2 {
		t.Errorf("%d reloads, want 2", got)
	}

	// A restart whose reload fails (the binary is gone): Eval keeps failing
	// cleanly until the reload works again.
	bin := filepath.Join(dir, "model.bin")
	if err := os.Rename(bin, bin+".away"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Rename(bin+".away", bin) })
	ctl.Set("HOSTSIM_FAIL_CODE", "1007")
	ctl.Set("HOSTSIM_FAIL_EXECUTE_AT", strconv.FormatInt(ctl.Stats().ExecCalls+1, 10))
	_, _, err = evalOn(r).Eval(ctx, c.PromptIDs, 0)
	ctl.Set("HOSTSIM_FAIL_EXECUTE_AT", "")
	ctl.Set("HOSTSIM_FAIL_CODE", "")
	if err == nil || !strings.Contains(err.Error(), "reloading after a device restart") {
		t.Fatalf("failed reload: %v", err)
	}
	if _, _, err := evalOn(r).Eval(ctx, c.PromptIDs, 0); err == nil || !strings.Contains(err.Error(), "unavailable") {
		t.Fatalf("Eval while the graphs are unavailable: %v", err)
	}
	if err := os.Rename(bin+".away", bin); err != nil {
		t.Fatal(err)
	}
	l, _, err := evalOn(r).Eval(ctx, c.PromptIDs, 0)
	if err != nil {
		t.Fatalf("Eval once the binary is back: %v", err)
	}
	if e, ok := topError(l, c.Checks[len(c.Checks)-1].Top); e > 1e-4 || !ok {
		t.Errorf("logits after the late reload off by %.3g", e)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := evalOn(r).Eval(ctx, c.PromptIDs, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Eval after Close: %v", err)
	}
	s := ctl.Stats()
	if s.LiveBackends != base.LiveBackends || s.LiveDevices != base.LiveDevices || s.LiveContexts != base.LiveContexts ||
		s.LiveMems != base.LiveMems || s.LiveLogs != base.LiveLogs || s.LivePowerIDs != base.LivePowerIDs {
		t.Errorf("live objects after Close: %+v (before Open: %+v)", s, base)
	}
	if n := ctl.rpcLive(); n != 0 {
		t.Errorf("%d rpcmem allocations live after Close", n)
	}
	if n := ctl.sysLive(); n != 0 {
		t.Errorf("%d system contexts live after Close", n)
	}
	if s.ExecInjected-base.ExecInjected != 4 {
		t.Errorf("%d injected failures, want 4", s.ExecInjected-base.ExecInjected)
	}
}

// TestEvalCanceled: a canceled context stops between graph calls.
func TestEvalCanceled(t *testing.T) {
	r := openTiny(t, f32(simfile.QHexRT, 16, simfile.MaskAdditive))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := evalOn(r).Eval(ctx, []int32{1, 2, 3}, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if _, _, err := evalOn(r).Eval(context.Background(), make([]int32, 513), 0); err == nil {
		t.Fatal("513 tokens accepted for a 512-token context")
	}
}

// TestArch: with no Arch configured the runner asks the runtime (hostsim
// reports v79) and falls back to v79 for an implausible answer.
func TestArch(t *testing.T) {
	r := openTiny(t, f32(simfile.QHexRT, 16, simfile.MaskAdditive))
	a, err := r.rt.Arch()
	t.Logf("runtime reports arch %q (err %v)", a, err)
	if r.arch != "v79" {
		t.Errorf("arch %q, want v79", r.arch)
	}
	for _, tt := range []struct {
		in   string
		want bool
	}{{"v79", true}, {"v68", true}, {"v2147483792", false}, {"", false}, {"x79", false}} {
		if got := PlausibleArch(tt.in); got != tt.want {
			t.Errorf("PlausibleArch(%q) = %v", tt.in, got)
		}
	}
}
