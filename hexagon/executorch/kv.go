package executorch

import "slices"

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
