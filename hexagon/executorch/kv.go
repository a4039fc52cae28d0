package executorch

// writeMask writes the SmartMask of a call at positions start…: every row
// attends the cache slots [0, start) and, causally, the new block's
// columns CL−AR … CL−AR+i. Padding rows follow the same pattern; their
// outputs are never used. The decode mask is updated incrementally.
func (m *method) writeMask(b []byte, start int) {
	cl, S := m.cl, m.cl-m.ar
	if m.ar == 1 && m.open >= 0 && m.open <= start {
		m.masks.Fill(b, m.open, start, true)
		m.open = start
		return
	}
	for i := range m.ar {
		row := i * cl
		m.masks.Fill(b, row, row+start, true)
		m.masks.Fill(b, row+start, row+S, false)
		m.masks.Fill(b, row+S, row+S+i+1, true)
		m.masks.Fill(b, row+S+i+1, row+cl, false)
	}
	m.open = -1
	if m.ar == 1 {
		m.open = start
	}
}

// copyKV copies the first n new entries of every layer from m's outputs
// into cache slots start… (EXECUTORCH.md §4.4): K is [n_kv·hd rows][S], a
// strided scatter of n elements per row; V is [n_kv][S][hd], one block of
// n·hd per head. The bytes are raw codes (the outputs are quantised like
// the caches).
func (r *Runner) copyKV(m *method, start, n int) {
	for l := range r.layers {
		r.kS.Copy(r.k[l], r.stride, start, m.kOut[l], m.ar, 0, n)
		r.vS.Copy(r.v[l], r.stride, start, m.vOut[l], m.ar, 0, n)
	}
}

// restride changes the caches' row length from r.stride to s slots,
// keeping the valid slots (EXECUTORCH.md §4.5); the rest is stale and
// masked.
func (r *Runner) restride(s int) {
	keep := min(r.valid, s, r.stride)
	for l := range r.layers {
		r.kS.Restride(r.k[l], r.stride, s, keep)
		r.vS.Restride(r.v[l], r.stride, s, keep)
	}
	r.stride = s
}
