package qnn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/rs/zerolog"
)

// These tests run the real purego path against hostsim's stand-in
// libraries (built by `make hostsim`).

func putF32(b []byte, xs []float32) {
	for i, x := range xs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
}

func getF32(b []byte, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// checkNoLeaks asserts that hostsim holds no live object.
func checkNoLeaks(t testing.TB, h *hostsimLib) {
	t.Helper()
	s := h.Stats(t)
	if s.LiveBackends != 0 || s.LiveDevices != 0 || s.LiveContexts != 0 || s.LiveMems != 0 || s.LiveLogs != 0 || s.LivePowerIDs != 0 {
		t.Errorf("hostsim live objects after Close: %+v", s)
	}
	if n := h.sysLive(); n != 0 {
		t.Errorf("%d live system contexts after Close", n)
	}
	if n := h.rpcLive(); n != 0 {
		t.Errorf("%d live rpcmem allocations after Close", n)
	}
}

func TestHostsimOpenClose(t *testing.T) {
	dir := hostsimDir(t)
	h := openHostsimLib(t, dir)
	var logs bytes.Buffer
	lg := zerolog.New(&logs)
	cfg := hostsimConfig(dir)
	cfg.Logger, cfg.LogLevel, cfg.PerfMode = &lg, LogVerbose, PerfBurst
	r, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := r.Provider()
	if p.Name != "HTP_QTI_AISW" || p.BackendID != 6 || p.Core != (Version{2, 32, 0}) || p.Backend != (Version{5, 43, 0}) || p.System != (Version{1, 7, 0}) {
		t.Errorf("provider %+v", p)
	}
	if !r.SharedMemory() {
		t.Error("rpcmem not loaded")
	}
	s := h.Stats(t)
	if s.LiveBackends != 1 || s.LiveDevices != 1 || s.LiveLogs != 1 || s.LivePowerIDs != 1 {
		t.Errorf("live after Open: %+v", s)
	}
	// The log callback formats hostsim's printf-style message with vsnprintf.
	if !strings.Contains(logs.String(), "hostsim: log created (level 4)") {
		t.Errorf("log callback output %q lacks hostsim's formatted message", logs.String())
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	checkNoLeaks(t, h)
	if _, err := r.LoadContext("x", ContextOptions{}); !errors.Is(err, ErrClosed) {
		t.Errorf("LoadContext after Close: %v", err)
	}
}

func TestHostsimPerfMode(t *testing.T) {
	dir := hostsimDir(t)
	h := openHostsimLib(t, dir)
	for _, tc := range []struct {
		mode                 PerfMode
		corner, sleep, dcvs  uint32
		latency, pollingTime uint32
	}{
		{PerfBurst, 0xA0, 40, 0, 100, 9999},
		{PerfSustained, 0x80, 100, 0, 100, 9999},
		{PerfBalanced, 0x70, 1000, 1, 100, 0},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			cfg := hostsimConfig(dir)
			cfg.PerfMode = tc.mode
			r, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			id := h.lastPower()
			var p hostsimPower
			if rc := h.power(id, &p); rc != 0 {
				t.Fatalf("hostsim_power_config(%d) = %d", id, rc)
			}
			want := hostsimPower{Live: 1, SetCalls: 2, DcvsSet: 1, DcvsEnable: tc.dcvs, PowerMode: 0x10, SleepLatency: tc.sleep,
				BusMin: tc.corner, BusTarget: tc.corner, BusMax: tc.corner, CoreMin: tc.corner, CoreTarget: tc.corner, CoreMax: tc.corner,
				RPCControlLatency: tc.latency, RPCPollingTime: tc.pollingTime}
			if p != want {
				t.Errorf("hostsim recorded %+v\nwant %+v", p, want)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			// Close takes the vote down (ExecuTorch's values), then destroys
			// the id: hostsim refuses setPowerConfig on a destroyed id and
			// records the mode in force when the id was destroyed.
			down := hostsimPower{Live: 0, SetCalls: 3, DcvsSet: 1, DcvsEnable: 1, PowerMode: 0x4, SleepLatency: 2000,
				BusMin: 0x30, BusTarget: 0x30, BusMax: 0x30, CoreMin: 0x30, CoreTarget: 0x30, CoreMax: 0x30,
				RPCControlLatency: tc.latency, RPCPollingTime: tc.pollingTime, DestroyPowerMode: 0x4}
			if rc := h.power(id, &p); rc != 0 || p != down {
				t.Errorf("after Close (rc %d) hostsim recorded %+v\nwant %+v", rc, p, down)
			}
			checkNoLeaks(t, h)
		})
	}
	// No vote: no power config id.
	r, err := Open(hostsimConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	if s := h.Stats(t); s.LivePowerIDs != 0 {
		t.Errorf("PerfNone created %d power ids", s.LivePowerIDs)
	}
	r.Close()
}

func TestHostsimPartialOpen(t *testing.T) {
	dir := hostsimDir(t)
	h := openHostsimLib(t, dir)
	cfg := hostsimConfig(dir)
	cfg.System = "libm.so.6"
	_, err := Open(cfg)
	if err == nil || !strings.Contains(err.Error(), "QnnSystemInterface_getProviders") || !strings.Contains(err.Error(), "libm.so.6") {
		t.Fatalf("err = %v", err)
	}
	cfg = hostsimConfig(dir)
	cfg.System = filepath.Join(dir, "nonexistent.so")
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "nonexistent.so") {
		t.Fatalf("err = %v", err)
	}
	// A missing rpcmem library falls back to client buffers.
	cfg = hostsimConfig(dir)
	cfg.RPCMem = filepath.Join(dir, "nonexistent.so")
	r, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.SharedMemory() {
		t.Error("SharedMemory with a missing libcdsprpc.so")
	}
	r.Close()
	checkNoLeaks(t, h)
}

func TestHostsimBinaryInfo(t *testing.T) {
	dir := hostsimDir(t)
	r := openRuntime(t, hostsimConfig(dir), nil)
	m := newLMHeadModel(8, 32)
	m.XType, m.Scale, m.Off = simfile.UFixed16, 0.001, -32768
	data, err := os.ReadFile(m.write(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	gs, err := r.BinaryInfo(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 1 || gs[0].Name != "lmhead" || len(gs[0].Inputs) != 1 || len(gs[0].Outputs) != 1 {
		t.Fatalf("graphs %+v", gs)
	}
	x, y := gs[0].Inputs[0], gs[0].Outputs[0]
	if x.ID != 1 || x.Name != "x" || x.Type != TensorAppWrite || x.DataType != UFixed16 || len(x.Dims) != 2 || x.Dims[1] != 8 ||
		x.Quant.Encoding != QuantScaleOffset || x.Quant.Scale != 0.001 || x.Quant.Offset != -32768 || x.Bytes() != 16 {
		t.Errorf("x = %+v", x)
	}
	if y.ID != 2 || y.Name != "logits" || y.Type != TensorAppRead || y.DataType != Float32 || y.Dims[1] != 32 ||
		y.Quant.Encoding != QuantUndefined || y.Bytes() != 128 {
		t.Errorf("logits = %+v", y)
	}
	_, err = r.BinaryInfo([]byte("definitely not a context binary"))
	if CodeOf(err) != CodeSystemMalformedBinary {
		t.Errorf("malformed binary: %v", err)
	}
}

func TestHostsimArch(t *testing.T) {
	dir := hostsimDir(t)
	probe := probeLayouts(t)
	for _, l := range htpExtLayouts() {
		if v, ok := probe[l.name]; ok && v != l.got {
			t.Fatalf("hostsim's %s is %d, the public QnnHtpDevice.h layout used here has %d", l.name, v, l.got)
		}
	}
	r := openRuntime(t, hostsimConfig(dir), nil)
	arch, err := r.Arch()
	if err != nil || arch != "v79" {
		t.Fatalf("Arch() = %q, %v", arch, err)
	}
}

// TestHostsimExecute runs the lm-head graph with registered shared memory
// (one buffer per tensor, and both tensors carved out of one allocation)
// and with client buffers, and compares with the Go reference.
func TestHostsimExecute(t *testing.T) {
	dir := hostsimDir(t)
	h := openHostsimLib(t, dir)
	m := newLMHeadModel(16, 64)
	path := m.write(t, t.TempDir())
	x := make([]float32, m.H)
	for i := range x {
		x[i] = float32(i%5) - 2
	}
	want := m.logits(x)
	for _, tc := range []struct {
		name   string
		rpc    bool
		shared bool
	}{
		{"rpcmem per tensor", true, false},
		{"rpcmem one allocation", true, true},
		{"client buffers", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := hostsimConfig(dir)
			if !tc.rpc {
				cfg.RPCMem = ""
			}
			r := openRuntime(t, cfg, h)
			ctx := loadContext(t, r, path)
			gi := ctx.Graphs()[0]
			g := graph(t, ctx, "lmhead")
			xb, yb := gi.Inputs[0].Bytes(), gi.Outputs[0].Bytes()
			var in, out []Binding
			var xbuf, ybuf []byte
			if tc.shared {
				buf, err := r.AllocPool(4096 + yb)
				if err != nil {
					t.Fatal(err)
				}
				in = []Binding{{Name: "x", Buffer: buf, Offset: 0}}
				out = []Binding{{Name: "logits", Buffer: buf, Offset: 4096}}
				xbuf, ybuf = buf.Bytes()[:xb], buf.Bytes()[4096:]
			} else {
				bx, err := r.Alloc(xb)
				if err != nil {
					t.Fatal(err)
				}
				by, err := r.Alloc(yb)
				if err != nil {
					t.Fatal(err)
				}
				in, out = []Binding{{Name: "x", Buffer: bx}}, []Binding{{Name: "logits", Buffer: by}}
				xbuf, ybuf = bx.Bytes(), by.Bytes()
			}
			call, err := g.Bind(in, out)
			if err != nil {
				t.Fatal(err)
			}
			if s := h.Stats(t); tc.rpc && s.LiveMems != 2 {
				t.Errorf("%d registered mems, want 2", s.LiveMems)
			} else if !tc.rpc && s.LiveMems != 0 {
				t.Errorf("%d registered mems with client buffers", s.LiveMems)
			}
			for step := range 3 { // the same Call, new input each time
				xs := make([]float32, len(x))
				for i := range xs {
					xs[i] = x[i] * float32(step+1)
				}
				putF32(xbuf, xs)
				if err := call.Execute(); err != nil {
					t.Fatal(err)
				}
				got := getF32(ybuf, m.V)
				for i, w := range want {
					w *= float32(step + 1)
					if d := math.Abs(float64(got[i] - w)); d > 1e-3*math.Max(1, math.Abs(float64(w))) {
						t.Fatalf("step %d logits[%d] = %g, want %g", step, i, got[i], w)
					}
				}
			}
			// Leave the Call and Context open: Runtime.Close must release them.
		})
	}
}

func TestHostsimBindAndExecuteErrors(t *testing.T) {
	dir := hostsimDir(t)
	h := openHostsimLib(t, dir)
	m := newLMHeadModel(8, 16)
	path := m.write(t, t.TempDir())
	r, err := Open(hostsimConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		r.Close()
		checkNoLeaks(t, h)
	}()
	ctx := loadContext(t, r, path)
	if _, err := ctx.Graph("prefill"); err == nil || !strings.Contains(err.Error(), `"prefill"`) || !strings.Contains(err.Error(), "lmhead") {
		t.Errorf("unknown graph: %v", err)
	}
	g := graph(t, ctx, "lmhead")
	small, _ := r.Alloc(16)
	bx, _ := r.Alloc(32)
	by, _ := r.Alloc(64)
	for _, tc := range []struct {
		name    string
		in, out []Binding
		want    string
	}{
		{"missing output", []Binding{{Name: "x", Buffer: bx}}, nil, `"lmhead": output(s) not bound: logits`},
		{"unknown name", []Binding{{Name: "x", Buffer: bx}, {Name: "z", Buffer: bx}}, []Binding{{Name: "logits", Buffer: by}}, `has no input "z"`},
		{"twice", []Binding{{Name: "x", Buffer: bx}, {Name: "x", Buffer: bx}}, []Binding{{Name: "logits", Buffer: by}}, `"x" bound twice`},
		{"too small", []Binding{{Name: "x", Buffer: small}}, []Binding{{Name: "logits", Buffer: by}}, `input "x" (FLOAT_32 [1 8]) needs 32 bytes at offset 0; buffer has 16`},
		{"offset past end", []Binding{{Name: "x", Buffer: bx}}, []Binding{{Name: "logits", Buffer: by, Offset: 8}}, `output "logits" (FLOAT_32 [1 16]) needs 64 bytes at offset 8; buffer has 64`},
		{"nil buffer", []Binding{{Name: "x"}}, []Binding{{Name: "logits", Buffer: by}}, "nil buffer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := g.Bind(tc.in, tc.out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if s := h.Stats(t); s.LiveMems != 0 {
		t.Errorf("failed Binds left %d registrations", s.LiveMems)
	}

	call, err := g.Bind([]Binding{{Name: "x", Buffer: bx}}, []Binding{{Name: "logits", Buffer: by}})
	if err != nil {
		t.Fatal(err)
	}
	if err := bx.Free(); err == nil {
		t.Error("Free of a bound buffer succeeded")
	}
	// An injected DSP restart surfaces as a typed error with hostsim's message.
	h.reset()
	h.Set(t, "HOSTSIM_FAIL_EXECUTE_AT", "2")
	if err := call.Execute(); err != nil {
		t.Fatalf("first execute: %v", err)
	}
	err = call.Execute()
	var qe *Error
	if !errors.As(err, &qe) || !IsDeviceRestart(err) || qe.Op != "graphExecute(lmhead)" || qe.Message == "" {
		t.Fatalf("injected failure: %#v", err)
	}
	t.Logf("injected: %v", err)
	if s := h.Stats(t); s.ExecInjected != 1 || s.ExecCalls != 2 {
		t.Errorf("stats %+v", s)
	}
	if err := call.Close(); err != nil {
		t.Fatal(err)
	}
	if err := call.Execute(); !errors.Is(err, ErrClosed) {
		t.Errorf("Execute after Close: %v", err)
	}
	if err := bx.Free(); err != nil {
		t.Errorf("Free after Call.Close: %v", err)
	}
	if s := h.Stats(t); s.LiveMems != 0 {
		t.Errorf("%d registrations after Call.Close", s.LiveMems)
	}
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
	if s := h.Stats(t); s.LiveContexts != 0 {
		t.Errorf("%d contexts after Context.Close", s.LiveContexts)
	}
	if _, err := ctx.Graph("lmhead"); !errors.Is(err, ErrClosed) {
		t.Errorf("Graph after Close: %v", err)
	}
}

func TestHostsimLoadContextErrors(t *testing.T) {
	dir := hostsimDir(t)
	r := openRuntime(t, hostsimConfig(dir), nil)
	bad := filepath.Join(t.TempDir(), "bad.bin")
	os.WriteFile(bad, bytes.Repeat([]byte{7}, 256), 0o644)
	_, err := r.LoadContext(bad, ContextOptions{})
	if CodeOf(err) != CodeSystemMalformedBinary || !strings.Contains(err.Error(), "bad.bin") {
		t.Errorf("malformed: %v", err)
	}
	if _, err := r.LoadContext(filepath.Join(t.TempDir(), "missing.bin"), ContextOptions{}); err == nil || !strings.Contains(err.Error(), "missing.bin") {
		t.Errorf("missing file: %v", err)
	}
}

// TestHostsimTinyLlama loads a random two-layer model written by simfile,
// checks the three graphs' metadata, and runs decode and prefill with every
// tensor carved out of one rpcmem allocation (the runner's KV layout: one
// SHARED_BUFFER registration per tensor region).
func TestHostsimTinyLlama(t *testing.T) {
	dir := hostsimDir(t)
	hs := openHostsimLib(t, dir)
	hs.reset()
	path, h := tinyLlama(t, t.TempDir())
	r := openRuntime(t, hostsimConfig(dir), hs)
	ctx := loadContext(t, r, path)
	gs := ctx.Graphs()
	if len(gs) != 3 || gs[0].Name != "prefill" || gs[1].Name != "decode" || gs[2].Name != "lmhead" {
		t.Fatalf("graphs: %v", gs)
	}
	ids := map[uint32]string{}
	for _, g := range gs {
		for _, ti := range append(append([]TensorInfo(nil), g.Inputs...), g.Outputs...) {
			if prev, dup := ids[ti.ID]; dup || ti.ID == 0 {
				t.Errorf("tensor %s/%s id %d (also %s)", g.Name, ti.Name, ti.ID, prev)
			}
			ids[ti.ID] = g.Name + "/" + ti.Name
		}
	}
	dec := gs[1]
	if len(dec.Inputs) != 4+2*h.Layers || len(dec.Outputs) != 1+2*h.Layers {
		t.Fatalf("decode I/O: %v", dec)
	}
	if pk, ok := dec.Input("past_k_1"); !ok || pk.DataType != Float16 || pk.Dims[0] != uint32(h.Ctx) || pk.Dims[1] != uint32(h.KVDim()) {
		t.Errorf("past_k_1 = %v", pk)
	}
	if socm, arch := ctx.SocModel(), ctx.Arch(); socm != 69 || arch != "v79" {
		t.Errorf("SocModel = %d, Arch = %q; want 69, v79", socm, arch)
	}

	// One allocation, every tensor at a 64-byte-aligned offset.
	run := func(name string, fill func(ti TensorInfo, b []byte)) map[string][]byte {
		t.Helper()
		g, err := ctx.Graph(name)
		if err != nil {
			t.Fatal(err)
		}
		gi := g.Info()
		total := 0
		for _, ti := range append(append([]TensorInfo(nil), gi.Inputs...), gi.Outputs...) {
			total += (ti.Bytes() + 63) &^ 63
		}
		buf, err := r.AllocPool(total)
		if err != nil {
			t.Fatal(err)
		}
		off := 0
		bind := func(ts []TensorInfo) []Binding {
			var bs []Binding
			for _, ti := range ts {
				bs = append(bs, Binding{Name: ti.Name, Buffer: buf, Offset: off})
				fill(ti, buf.Bytes()[off:off+ti.Bytes()])
				off += (ti.Bytes() + 63) &^ 63
			}
			return bs
		}
		in := bind(gi.Inputs)
		outOff := off
		out := bind(gi.Outputs)
		call, err := g.Bind(in, out)
		if err != nil {
			t.Fatal(err)
		}
		if err := call.Execute(); err != nil {
			t.Fatal(err)
		}
		first := append([]byte(nil), buf.Bytes()[outOff:]...)
		if err := call.Execute(); err != nil {
			t.Fatal(err)
		}
		if string(first) != string(buf.Bytes()[outOff:]) {
			t.Errorf("%s: two executes of the same inputs differ", name)
		}
		res := map[string][]byte{}
		o := outOff
		for _, ti := range gi.Outputs {
			res[ti.Name] = append([]byte(nil), buf.Bytes()[o:o+ti.Bytes()]...)
			o += (ti.Bytes() + 63) &^ 63
		}
		return res
	}
	one := f16(1)
	fill := func(ti TensorInfo, b []byte) {
		switch ti.Name {
		case "x":
			for i := 0; i+1 < len(b); i += 2 {
				v := f16(float32(i%7-3) / 4)
				b[i], b[i+1] = byte(v), byte(v>>8)
			}
		case "cos":
			for i := 0; i+1 < len(b); i += 2 {
				b[i], b[i+1] = byte(one), byte(one>>8)
			}
		}
		// sin 0, cmask 0 (attend), past K/V 0.
	}
	for _, name := range []string{"decode", "prefill"} {
		outs := run(name, fill)
		y := outs["y"]
		nonzero := false
		for i := 0; i+1 < len(y); i += 2 {
			v := uint16(y[i]) | uint16(y[i+1])<<8
			if v&0x7C00 == 0x7C00 {
				t.Fatalf("%s: y[%d] is inf/NaN (%#04x)", name, i/2, v)
			}
			nonzero = nonzero || v&0x7FFF != 0
		}
		if !nonzero {
			t.Errorf("%s: y is all zero", name)
		}
	}
	if s := hs.Stats(t); s.ExecDecode != 2 || s.ExecPrefill != 2 || s.LiveMems != int64(4+2*h.Layers+1+2*h.Layers+4+1+2*h.Layers) {
		t.Errorf("stats %+v", s)
	}
}

// TestHostsimSetenvReachesC checks that os.Setenv is visible to C getenv
// (hostsim reads HOSTSIM_FAIL_EXECUTE_AT at every execute), which is what
// Config.ADSPLibraryPath relies on, with and without cgo.
func TestHostsimSetenvReachesC(t *testing.T) {
	dir := hostsimDir(t)
	hs := openHostsimLib(t, dir)
	r := openRuntime(t, hostsimConfig(dir), nil)
	call, _, _ := lmheadCall(t, r, newLMHeadModel(8, 16))
	hs.reset()
	t.Setenv("HOSTSIM_FAIL_CODE", "1011")
	t.Setenv("HOSTSIM_FAIL_EXECUTE_AT", "1")
	if err := call.Execute(); CodeOf(err) != CodeSystemCommunicationFatal {
		t.Fatalf("execute with HOSTSIM_FAIL_EXECUTE_AT=1 set by os.Setenv: %v", err)
	}
}

// TestHostsimTensorRoles: hostsim finds a graph's tensors by the role stored
// in the file, so any names load (and are reported as written), while a
// file whose roles are missing, repeated or out of range is refused.
func TestHostsimTensorRoles(t *testing.T) {
	dir := hostsimDir(t)
	r := openRuntime(t, hostsimConfig(dir), nil)
	h := simfile.Hyper{Hidden: 16, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 8, FFN: 32, Vocab: 64, Ctx: 16, RMSEps: 1e-5}
	ws := simfile.WeightSpecs(h, true, false)
	for i := range ws {
		ws[i].F16 = make([]uint16, ws[i].Rows*ws[i].Cols)
	}
	for _, c := range []struct {
		name string
		edit func(g *simfile.Graph)
		ok   bool
	}{
		{"renamed", func(g *simfile.Graph) {
			for i := range g.Inputs {
				g.Inputs[i].Name = fmt.Sprintf("in%d", i)
			}
			for i := range g.Outputs {
				g.Outputs[i].Name = fmt.Sprintf("out%d", i)
			}
		}, true},
		{"reordered", func(g *simfile.Graph) { slices.Reverse(g.Inputs) }, true},
		{"repeated role", func(g *simfile.Graph) { g.Inputs[1].Role = simfile.RoleX }, false},
		{"unknown role", func(g *simfile.Graph) { g.Inputs[1].Role = 42 }, false},
		{"layer out of range", func(g *simfile.Graph) { g.Inputs[4].Layer = 2 }, false},
		{"layer on a global role", func(g *simfile.Graph) { g.Inputs[0].Layer = 1 }, false},
		{"repeated name", func(g *simfile.Graph) { g.Outputs[1].Name = g.Inputs[0].Name }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, dec, _ := simfile.DefaultGraphs(h, simfile.QHexRT, 4, simfile.F32, simfile.F32, simfile.MaskAdditive)
			c.edit(&dec)
			data, err := os.ReadFile(writeModel(t, t.TempDir(), "decode.bin", h, []simfile.Graph{dec}, ws, simfile.WeightF16))
			if err != nil {
				t.Fatal(err)
			}
			gs, err := r.BinaryInfo(data)
			if !c.ok {
				if CodeOf(err) != CodeSystemMalformedBinary {
					t.Fatalf("BinaryInfo: %v, want %v", err, CodeSystemMalformedBinary)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, ti := range gs[0].Inputs {
				if ti.Name != dec.Inputs[i].Name {
					t.Errorf("input %d named %q, want %q", i, ti.Name, dec.Inputs[i].Name)
				}
			}
		})
	}
}
