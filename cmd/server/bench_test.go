package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hexserve/hexserve/bench"
)

// TestBenchPrefixRealBundle runs the prefix-cache phase on the tiny bundle
// through hostsim: turn 2 must find turn 1's rows the way the server finds
// them (the phase once measured a path the server does not take and
// reported cached_tokens 0 on every real model).
func TestBenchPrefixRealBundle(t *testing.T) {
	dir, _ := tinyBundle(t)
	libs := hostsimLibDir(t)
	cfgPath := filepath.Join(t.TempDir(), "bench.yaml")
	yaml := fmt.Sprintf("model:\n  bundle: %s\n  libraries: {backend: %s, system: %s, rpcmem: %s}\n", dir,
		filepath.Join(libs, "libQnnHtp.so"), filepath.Join(libs, "libQnnSystem.so"), filepath.Join(libs, "libcdsprpc.so"))
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := benchMain([]string{"--config", cfgPath, "--phases", "prefix", "--quick", "--emulate-v79=false", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rep bench.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	pc := rep.PrefixCache
	if pc.HistoryTokens < 400 || pc.CachedTokens < pc.HistoryTokens-1 || pc.CachedTokens >= pc.Turn2Tokens {
		t.Errorf("prefix cache %+v: want turn 1's %d prompt tokens cached", pc, pc.HistoryTokens)
	}
}
