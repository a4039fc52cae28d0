package qnn

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/hexserve/hexserve/internal/hostsimtest"
)

func goEnv(t testing.TB, key string) string {
	t.Helper()
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		t.Skipf("go env %s: %v", key, err)
	}
	return strings.TrimSpace(string(out))
}

// hostsimDir is hostsim's library directory (hostsimtest.Dir).
func hostsimDir(t testing.TB) string {
	t.Helper()
	return hostsimtest.Dir(t)
}

// hostsimConfig is a Config for the hostsim libraries in dir, with rpcmem.
func hostsimConfig(dir string) Config {
	return Config{
		Backend: filepath.Join(dir, "libQnnHtp.so"),
		System:  filepath.Join(dir, "libQnnSystem.so"),
		RPCMem:  filepath.Join(dir, "libcdsprpc.so"),
	}
}

// hostsimStats mirrors hostsim_stats_t (FORMAT.md).
type hostsimStats struct {
	LiveBackends, LiveDevices, LiveContexts, LiveMems, LiveLogs, LivePowerIDs int64
	ExecCalls, ExecPrefill, ExecDecode, ExecLMHead, ExecFailed, ExecInjected  int64
}

// hostsimPower mirrors hostsim_power_t (FORMAT.md).
type hostsimPower struct {
	Live, SetCalls                                             uint32
	DcvsSet, DcvsEnable, PowerMode, SleepLatency, SleepDisable uint32
	BusMin, BusTarget, BusMax, CoreMin, CoreTarget, CoreMax    uint32
	RPCControlLatency, RPCPollingTime, HMXTimeoutUS            uint32
	MemGrowSize, MemConfigCalls                                uint32
	DestroyPowerMode                                           uint32 // power mode in force at destroyPowerConfigId
}

// hostsimLib keeps hostsim's libraries loaded for the test (so their
// counters survive Runtime.Close) and binds the test symbols.
type hostsimLib struct {
	stats     func(out *hostsimStats) int32
	reset     func()
	set       func(name, value *byte) int32
	power     func(id uint32, out *hostsimPower) int32
	lastPower func() uint32
	sysLive   func() int64
	rpcLive   func() int64
}

func openHostsimLib(t testing.TB, dir string) *hostsimLib {
	t.Helper()
	h := &hostsimLib{}
	bind := func(lib string, syms map[string]any) {
		p := filepath.Join(dir, lib)
		handle, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			t.Fatalf("dlopen %s: %v", p, err)
		}
		t.Cleanup(func() { purego.Dlclose(handle) })
		for name, fn := range syms {
			sym, err := purego.Dlsym(handle, name)
			if err != nil {
				t.Fatalf("hostsim test symbol %s: %v", name, err)
			}
			purego.RegisterFunc(fn, sym)
		}
	}
	bind("libQnnHtp.so", map[string]any{
		"hostsim_stats": &h.stats, "hostsim_reset": &h.reset, "hostsim_set": &h.set,
		"hostsim_power_config": &h.power, "hostsim_power_last_id": &h.lastPower,
	})
	bind("libQnnSystem.so", map[string]any{"hostsim_system_live": &h.sysLive})
	bind("libcdsprpc.so", map[string]any{"hostsim_rpcmem_live": &h.rpcLive})
	return h
}

func (h *hostsimLib) Stats(t testing.TB) hostsimStats {
	t.Helper()
	var s hostsimStats
	if rc := h.stats(&s); rc != 0 {
		t.Fatalf("hostsim_stats = %d", rc)
	}
	return s
}

// Set sets a hostsim switch ("" clears it).
func (h *hostsimLib) Set(t testing.TB, name, value string) {
	t.Helper()
	n := append([]byte(name), 0)
	var v *byte
	if value != "" {
		b := append([]byte(value), 0)
		v = &b[0]
	}
	if rc := h.set(&n[0], v); rc != 0 {
		t.Fatalf("hostsim_set(%s) = %d", name, rc)
	}
	t.Cleanup(func() { h.set(&n[0], nil) })
}

// openRuntime opens a runtime on cfg, closed when the test ends; then,
// when h is not nil, hostsim must hold nothing of it.
func openRuntime(t testing.TB, cfg Config, h *hostsimLib) *Runtime {
	t.Helper()
	r, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
		if h != nil {
			checkNoLeaks(t, h)
		}
	})
	return r
}

// loadContext loads the context binary at path into r, failing t on an error.
func loadContext(t testing.TB, r *Runtime, path string) *Context {
	t.Helper()
	ctx, err := r.LoadContext(path, ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ctx
}

// graph returns ctx's graph name, failing t on an error.
func graph(t testing.TB, ctx *Context, name string) *Graph {
	t.Helper()
	g, err := ctx.Graph(name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// lmheadCall writes m, loads it into r and binds its graph to two new
// Alloc buffers, x and y, sized for its input and logits.
func lmheadCall(t testing.TB, r *Runtime, m *lmHeadModel) (call *Call, x, y *Buffer) {
	t.Helper()
	x, err := r.Alloc(m.XType.Size() * m.H)
	if err != nil {
		t.Fatal(err)
	}
	y, err = r.Alloc(4 * m.V)
	if err != nil {
		t.Fatal(err)
	}
	g := graph(t, loadContext(t, r, m.write(t, t.TempDir())), "lmhead")
	call, err = g.Bind([]Binding{{Name: "x", Buffer: x}}, []Binding{{Name: "logits", Buffer: y}})
	if err != nil {
		t.Fatal(err)
	}
	return call, x, y
}
