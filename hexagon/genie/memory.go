package genie

import (
	"slices"

	"github.com/hexserve/hexserve/hexagon/graphio"
)

// checkParts refuses, before any part is loaded, parts that alone are more than Config.Memory.
func (r *Runner) checkParts() error {
	return r.fits(r.bc.BinBytes, 0, 0)
}

// checkMemory counts the KV cache and the graphs' other tensors against Config.Memory before
// setup allocates them.
func (r *Runner) checkMemory() error {
	kt, _ := r.ars[0].infos[r.partOf(0)].Input("past_key_0_in")
	e, err := graphio.ElemOf(kt)
	if err != nil {
		return r.errf("%s: %v", kt.Name, err)
	}
	kv := 2 * int64(r.layers) * int64(r.nkv) * int64(r.hd) * int64(r.cl-r.ars[0].ar) * int64(e.Size())
	var io int64
	for _, g := range r.ars {
		seen := map[string]bool{}
		for _, info := range g.infos {
			for _, t := range append(slices.Clip(info.Inputs), info.Outputs...) {
				if _, _, in, ok := kvName(t.Name); (ok && in) || seen[t.Name] {
					continue
				}
				seen[t.Name] = true
				io += int64(t.Bytes())
			}
		}
	}
	return r.fits(r.bc.BinBytes, kv, io)
}

// fits refuses parts, KV cache and I/O bytes that together are more than Config.Memory.
func (r *Runner) fits(parts, kv, io int64) error {
	if m := r.cfg.Memory; m > 0 && parts+kv+io > m {
		return r.errf("the parts (%d bytes), KV cache (%d) and graph I/O (%d) need %d bytes, more than the budget of %d (engine.model_memory)",
			parts, kv, io, parts+kv+io, m)
	}
	return nil
}
