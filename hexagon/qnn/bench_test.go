package qnn

import "testing"

// BenchmarkExecute measures one graphExecute through purego on a tiny
// hostsim lm-head graph (16×64), i.e. mostly the binding's per-call cost.
func BenchmarkExecute(b *testing.B) {
	for _, tc := range []struct {
		name string
		rpc  bool
	}{{"rpcmem", true}, {"client", false}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := hostsimConfig(hostsimDir(b))
			if !tc.rpc {
				cfg.RPCMem = ""
			}
			call, _, _ := lmheadCall(b, openRuntime(b, cfg, nil), newLMHeadModel(16, 64))
			b.ReportAllocs()
			for b.Loop() {
				if err := call.Execute(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestExecuteAllocs: a graph call allocates at most once (purego.SyscallN's
// arguments), not per argument through reflect as a RegisterFunc function
// does (7 allocations).
func TestExecuteAllocs(t *testing.T) {
	call, _, _ := lmheadCall(t, openRuntime(t, hostsimConfig(hostsimDir(t)), nil), newLMHeadModel(16, 64))
	var execErr error
	if n := testing.AllocsPerRun(100, func() { execErr = call.Execute() }); n > 1 || execErr != nil {
		t.Fatalf("Execute: %v allocations per call (want ≤ 1), error %v", n, execErr)
	}
}
