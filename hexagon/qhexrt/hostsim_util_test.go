package qhexrt

import (
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/inference/inferencetest"
	"github.com/hexserve/hexserve/internal/hostsimtest"
)

// hostsimConfig returns a qnn.Config for hostsim, or skips the test when the
// libraries are not built.
func hostsimConfig(t testing.TB) qnn.Config {
	t.Helper()
	dir := hostsimtest.Dir(t)
	return qnn.Config{
		Backend: filepath.Join(dir, "libQnnHtp.so"),
		System:  filepath.Join(dir, "libQnnSystem.so"),
		RPCMem:  filepath.Join(dir, "libcdsprpc.so"),
	}
}

// hostsimStats mirrors hostsim_stats_t.
type hostsimStats struct {
	LiveBackends, LiveDevices, LiveContexts, LiveMems, LiveLogs, LivePowerIDs int64
	ExecCalls                                                                 int64
	ExecPrefill, ExecDecode, ExecLMHead                                       int64
	ExecFailed, ExecInjected                                                  int64
}

// hostsimCtl reaches hostsim's exported test symbols.
type hostsimCtl struct {
	stats   func(*hostsimStats) int32
	reset   func()
	set     func(name, value *byte) int32
	rpcLive func() int64
	sysLive func() int64
}

func openHostsimCtl(t testing.TB, cfg qnn.Config) *hostsimCtl {
	t.Helper()
	c := &hostsimCtl{}
	load := func(path string, syms map[string]any) {
		lib, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			t.Fatalf("dlopen %s: %v", path, err)
		}
		for name, fn := range syms {
			p, err := purego.Dlsym(lib, name)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			purego.RegisterFunc(fn, p)
		}
	}
	load(cfg.Backend, map[string]any{"hostsim_stats": &c.stats, "hostsim_reset": &c.reset, "hostsim_set": &c.set})
	load(cfg.RPCMem, map[string]any{"hostsim_rpcmem_live": &c.rpcLive})
	load(cfg.System, map[string]any{"hostsim_system_live": &c.sysLive})
	return c
}

func (c *hostsimCtl) Stats() hostsimStats {
	var s hostsimStats
	c.stats(&s)
	return s
}

// Set sets a hostsim switch; an empty value clears it.
func (c *hostsimCtl) Set(name, value string) {
	n := append([]byte(name), 0)
	if value == "" {
		c.set(&n[0], nil)
		return
	}
	v := append([]byte(value), 0)
	c.set(&n[0], &v[0])
	runtime.KeepAlive(n)
	runtime.KeepAlive(v)
}

var _ = unsafe.Sizeof(hostsimStats{}) // 96 bytes, as hostsim_stats_t

// sessions are the test sessions of runners: evalOn(r).Eval evaluates a
// token sequence on one sequence of r's pool, as the engine's Steps would.
var sessions sync.Map // *Runner → *inferencetest.Session

func evalOn(r *Runner) *inferencetest.Session {
	s, _ := sessions.LoadOrStore(r, inferencetest.NewSession(r))
	return s.(*inferencetest.Session)
}
