//go:build !nomkmodel

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ebitengine/purego"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/server"
)

// hostsimLive mirrors hostsim_stats_t's live-handle counters (the first six
// of its twelve int64 fields) and adds the rpcmem and system counters.
type hostsimLive struct {
	Backends, Devices, Contexts, Mems, Logs, PowerIDs int64
	_                                                 [6]int64 // the exec counters
	RPCMem, RPCMemBytes, System                       int64
}

// hostsimProbe reads hostsim's registries of live handles.
func hostsimProbe(t *testing.T, libs string) func() hostsimLive {
	t.Helper()
	var stats func(*hostsimLive) int32
	var rpcLive, rpcBytes, sysLive func() int64
	for lib, syms := range map[string]map[string]any{
		"libQnnHtp.so":    {"hostsim_stats": &stats},
		"libcdsprpc.so":   {"hostsim_rpcmem_live": &rpcLive, "hostsim_rpcmem_bytes": &rpcBytes},
		"libQnnSystem.so": {"hostsim_system_live": &sysLive},
	} {
		h, err := purego.Dlopen(filepath.Join(libs, lib), purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			t.Fatal(err)
		}
		for name, fn := range syms {
			p, err := purego.Dlsym(h, name)
			if err != nil {
				t.Fatal(err)
			}
			purego.RegisterFunc(fn, p)
		}
	}
	return func() hostsimLive {
		var s hostsimLive
		stats(&s)
		s.RPCMem, s.RPCMemBytes, s.System = rpcLive(), rpcBytes(), sysLive()
		return s
	}
}

// mappings counts the lines of /proc/self/maps that map a file under dir.
func mappings(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	return strings.Count(string(b), dir)
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// TestCatalogLoadUnloadCycles: a tiny bundle and a tiny .pte with keep_alive
// 0 are loaded, asked for a token and unloaded 10 times each (2 with
// -short); no NPU buffer, context, backend, rpcmem allocation, file mapping
// or descriptor outlives them. The counts are exact, so one cycle that
// leaks one handle fails it; the repeats are for leaks that come and go.
func TestCatalogLoadUnloadCycles(t *testing.T) {
	libs := hostsimLibDir(t)
	bundleDir, _ := tinyBundle(t)
	pteDir := filepath.Join(testTmp, "cycles-pte")
	mkTiny(t, "pte", pteDir, "--ctx", "64", "--prefill-chunk", "16")
	probe := hostsimProbe(t, libs)
	cfg := config.Default()
	cfg.Model.Libraries = librariesIn(libs)
	zero := time.Duration(0)
	cfg.Models = []config.Model{{Path: bundleDir, ID: "bundle", KeepAlive: &zero}, {Path: pteDir, ID: "pte", KeepAlive: &zero}}
	cfg.Engine.KVCache.Memory = 1 << 20
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	c := newCatalog(cfg, loadModel, prometheus.NewRegistry(), zerolog.Nop())
	defer c.reg.Close()

	cycle := func() {
		t.Helper()
		for _, id := range []string{"bundle", "pte"} {
			l, err := c.Acquire(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			ev, err := l.Model.Engine.Submit(context.Background(), inference.Request{Prompt: []int32{128000, 9906}, MaxTokens: 1, N: 1})
			if err == nil {
				_, err = inference.Collect(ev)
			}
			l.Release(nil)
			if err != nil {
				t.Fatalf("%s: %v", id, err)
			}
		}
		waitUnloaded(t, c)
	}
	before := probe()
	cycle() // warms up what the process keeps for good (the libraries, the Go runtime's descriptors)
	fds := openFDs(t)
	n := 10
	if testing.Short() {
		n = 2 // under -race each cycle's two tokenizer parses cost several times more
	}
	for range n {
		cycle()
	}
	after := probe()
	if after != before {
		t.Errorf("hostsim live handles before %+v, after %d cycles %+v", before, n, after)
	}
	for _, dir := range []string{bundleDir, pteDir} {
		if m := mappings(t, dir); m != 0 {
			t.Errorf("%d mappings of %s remain", m, dir)
		}
	}
	if got := openFDs(t); got > fds {
		t.Errorf("open descriptors %d after %d cycles, %d after the first", got, n, fds)
	}
}

func waitUnloaded(t *testing.T, c *catalog) {
	t.Helper()
	for range 500 {
		busy := false
		for _, st := range c.Models() {
			busy = busy || st.Status != server.StatusUnloaded
		}
		if !busy {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("models not unloaded: %v", fmt.Sprint(c.Models()))
}
