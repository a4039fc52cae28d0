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
			dir := hostsimDir(b)
			cfg := hostsimConfig(dir)
			if !tc.rpc {
				cfg.RPCMem = ""
			}
			r, err := Open(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			m := newLMHeadModel(16, 64)
			ctx, err := r.LoadContext(m.write(b, b.TempDir()), ContextOptions{})
			if err != nil {
				b.Fatal(err)
			}
			g, err := ctx.Graph("lmhead")
			if err != nil {
				b.Fatal(err)
			}
			x, _ := r.Alloc(g.Info().Inputs[0].Bytes())
			y, _ := r.Alloc(g.Info().Outputs[0].Bytes())
			call, err := g.Bind([]Binding{{Name: "x", Buffer: x}}, []Binding{{Name: "logits", Buffer: y}})
			if err != nil {
				b.Fatal(err)
			}
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
	dir := hostsimDir(t)
	r, err := Open(hostsimConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m := newLMHeadModel(16, 64)
	ctx, err := r.LoadContext(m.write(t, t.TempDir()), ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := ctx.Graph("lmhead")
	if err != nil {
		t.Fatal(err)
	}
	x, _ := r.Alloc(g.Info().Inputs[0].Bytes())
	y, _ := r.Alloc(g.Info().Outputs[0].Bytes())
	call, err := g.Bind([]Binding{{Name: "x", Buffer: x}}, []Binding{{Name: "logits", Buffer: y}})
	if err != nil {
		t.Fatal(err)
	}
	var execErr error
	if n := testing.AllocsPerRun(100, func() { execErr = call.Execute() }); n > 1 || execErr != nil {
		t.Fatalf("Execute: %v allocations per call (want ≤ 1), error %v", n, execErr)
	}
}
