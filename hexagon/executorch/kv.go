package executorch

import (
	"slices"

	"github.com/hexserve/hexserve/hexagon/slotpool"
)

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

// copyKV submits the copies of layers' first n new entries of method m's
// outputs into slots start… of the current layout (docs/executorch-pte.md
// §4.4: K is [n_kv·hd rows][S], a strided scatter of n elements per row; V
// is [n_kv][S][hd], one block of n·hd per head; the bytes are raw codes,
// the outputs quantised like the caches); they run in the background until
// the next sync.
func (r *Runner) copyKV(m *method, layers []int, start, n int) {
	q := r.queued[:0]
	for _, l := range layers {
		q = append(q, slotpool.Write{Layer: l, Slot: start, N: n, K: m.kOut[l], V: m.vOut[l], Rows: m.ar, Stride: r.kc.Stride})
	}
	r.kc.Submit(q...)
	r.queued = q
}

// sync waits for the queued KV copies, helping with them; the time is the
// copy's share of the critical path (Stats.KVCopy). Every entry point that
// reads or writes the caches or the new-entry outputs calls it first.
func (r *Runner) sync() { r.stats.KVCopy += r.kc.Sync() }

// syncLayers is sync for the copies of some layers only.
func (r *Runner) syncLayers(layers []int) { r.stats.KVCopy += r.kc.SyncLayers(layers) }

// stepLayers lists, per step of l, the layers whose caches or new entries
// the step touches (it must not run while they are copied), and the layers
// no later step touches (final: their copy can start once the step has
// run, as a shard's layers after its delegate call).
func stepLayers(l *layout, layers int) (touched, final [][]int) {
	last := make([]int, layers)
	touched = make([][]int, len(l.steps))
	for i, s := range l.steps {
		touch := map[int32]bool{}
		if s.delegate < 0 {
			touch[s.from], touch[s.to] = true, true
		}
		for _, a := range append(slices.Clip(s.in), s.out...) {
			touch[a.value] = true
		}
		for j := range layers {
			if touch[l.kIn[j]] || touch[l.vIn[j]] || touch[l.kNew[j]] || touch[l.vNew[j]] {
				last[j] = i
				touched[i] = append(touched[i], j)
			}
		}
	}
	final = make([][]int, len(l.steps))
	for j, i := range last {
		final[i] = append(final[i], j)
	}
	return touched, final
}

// startSteps marks the steps after which runSteps starts the queued
// copies: those with at most one delegate call after them (the last-but-one
// and the last shard's calls, and any copy step after the last).
func startSteps(l *layout) []bool {
	start := make([]bool, len(l.steps))
	after := 0
	for i := len(l.steps) - 1; i >= 0; i-- {
		start[i] = after <= 1
		if l.steps[i].delegate >= 0 {
			after++
		}
	}
	return start
}

// restride changes the caches' row length from r.kc.Stride to s slots,
// keeping the valid slots (docs/executorch-pte.md §4.5); the rest is stale and
// masked.
func (r *Runner) restride(s int) {
	r.sync()
	r.kc.Restride(s, min(r.valid, s, r.kc.Stride))
}
