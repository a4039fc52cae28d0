package executorch

import "github.com/hexserve/hexserve/internal/modelfile"

// checkMemory refuses, before the KV cache is allocated, a context longer than hexserve
// supports and a file, KV cache and graph I/O (each method's plan values) that together are
// more than Config.Memory.
func (r *Runner) checkMemory(cl, decodeAR int, methods ...*layout) error {
	if cl > modelfile.MaxContext+1 {
		return r.errf("the graphs' context is %d, more than hexserve supports (%d)", cl, modelfile.MaxContext+1)
	}
	kv := 2 * int64(r.layers) * int64(r.nkv*r.hd) * int64(cl-decodeAR) * int64(r.es)
	var io int64
	for _, m := range methods {
		for _, n := range m.sizes {
			io += int64(n)
		}
	}
	if m := r.cfg.Memory; m > 0 && r.file.Size+kv+io > m {
		return r.errf("the file (%d bytes), KV cache (%d) and graph I/O (%d) need %d bytes, more than the budget of %d (engine.model_memory)",
			r.file.Size, kv, io, r.file.Size+kv+io, m)
	}
	return nil
}
