package genie

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/hexagon/slotpool"
	"github.com/hexserve/hexserve/inference"
)

// The Runner as an inference.Batcher. The cache is a pool of CL − 1 slots (the AR-1 graphs' past;
// generally CL − the smallest AR): a graph of AR A sees the first CL − A of them, so a step whose
// sequences have rows from CL − A on runs through the AR-1 graphs (row by row). A sequence owns one contiguous range of slots
// and, when forked, reads its parent's shared ones. A Step is one call of one AR's graphs (all
// parts in turn): its rows carry their own input ids, cos/sin rows (their positions) and mask
// rows opening only their sequence's slots and their run's earlier rows in the call (Genie's
// SMART_MASK: new entries at columns CL − AR…). Padding rows are fully masked. After the call each
// run's new K/V rows are copied into its slots.

// BatchLimits: slotpool.Limits of the largest AR's rows per step and CL − 1 slots.
func (r *Runner) BatchLimits() inference.BatchLimits {
	return slotpool.Limits(r.ars[len(r.ars)-1].ar, r.slots)
}

// candidates are the ARs whose one call holds rows rows and sees every slot the step needs,
// smallest first, in r.cands, with their options for the policy (all parts, and a re-striding
// when the cache is in another AR's layout) in r.opts; none when no AR does.
func (r *Runner) candidates(rows int, runs []inference.Run) {
	r.cands, r.opts = r.cands[:0], r.opts[:0]
	var restride time.Duration
	if r.stats.Restrides > 0 {
		restride = r.stats.Restride / time.Duration(r.stats.Restrides)
	}
	for _, g := range r.ars {
		if g.ar < rows || !r.sees(g, runs) {
			continue
		}
		o := plan.Option{Graphs: g.names}
		if r.kc.Stride != g.p {
			o.Extra = restride
		}
		r.cands, r.opts = append(r.cands, g), append(r.opts, o)
	}
}

// pick chooses the graphs for a step of rows rows among the candidates, by the runners' one
// policy (plan.Policy: unmeasured and idle ARs get a call, else the cheapest by measured cost);
// nil when no AR holds them and sees the slots.
func (r *Runner) pick(rows int, runs []inference.Run) *arGraph {
	if r.candidates(rows, runs); len(r.cands) == 0 {
		return nil
	}
	return r.cands[r.policy.Choose(&r.stats, r.opts)]
}

// sees reports whether g's past slots (CL − AR) hold every committed row and the runs' rows.
func (r *Runner) sees(g *arGraph, runs []inference.Run) bool {
	if r.Pool.Beyond(g.p) {
		return false
	}
	for _, run := range runs {
		if r.Pool.Seq(run.Seq).Top(run.Start+len(run.Tokens)) >= g.p {
			return false
		}
	}
	return true
}

// StepCost is the measured cost of the cheapest call a step of rows would make (1 ms per part
// until measured).
func (r *Runner) StepCost(rows int) time.Duration {
	if r.candidates(max(rows, 1), nil); len(r.opts) > 0 {
		if c, ok := r.stats.Cost(r.opts[r.policy.Best(&r.stats, r.opts)]); ok {
			return c
		}
	}
	return time.Duration(len(r.parts)) * time.Millisecond
}

// Step evaluates runs in one call of one AR's graphs.
func (r *Runner) Step(ctx context.Context, runs []inference.Run) ([]inference.Rows, error) {
	if err := r.life.Check(); err != nil {
		return nil, err
	}
	g := r.ars[len(r.ars)-1]
	if err := r.Pool.Check(runs, g.ar, r.bc.NVocab); err != nil {
		return nil, fmt.Errorf("genie: %w", err)
	}
	for _, run := range runs {
		if m := r.bc.MaxPositions; m > 0 && run.Start+len(run.Tokens) > m {
			return nil, fmt.Errorf("genie: run to position %d of sequence %d: the model was trained for %d (config.json max_position_embeddings)",
				run.Start+len(run.Tokens), run.Seq, m)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	defer r.board.Publish(r.stats)
	rows := 0
	for _, run := range runs {
		rows += len(run.Tokens)
	}
	if g = r.pick(rows, runs); g == nil {
		// One row per call of the smallest AR's graphs (the only ones that see the slots from
		// CL − A on): the next call overwrites the output buffer.
		g = r.ars[0]
		r.policy.Choose(&r.stats, []plan.Option{{Graphs: g.names, Calls: rows}})
		return r.RowByRow(ctx, runs, g.logits, r.bc.NVocab, func(one inference.Run) error {
			return r.run(ctx, g, []inference.Run{one})
		})
	}
	if err := r.run(ctx, g, runs); err != nil {
		return nil, err
	}
	return r.Commit(runs, g.logits, r.bc.NVocab), nil
}

// run makes one call of g's graphs for runs: re-stride the cache if g's stride differs, write
// ids, cos/sin and mask rows, execute the parts in order, copy the new K/V rows to their slots.
func (r *Runner) run(ctx context.Context, g *arGraph, runs []inference.Run) error {
	r.sync()
	st := &r.stats
	t0 := time.Now()
	if g.p != r.kc.Stride {
		r.kc.Restride(g.p, min(r.Pool.High(), r.kc.Stride, g.p))
		st.Restrides++
		st.Restride += time.Since(t0)
		t0 = time.Now()
	}
	ids := g.ids // padding rows: id 0, position 0 (fully masked: not computed)
	clear(ids)
	cos, sin := g.rowsE[:g.ar*r.half], g.rowsE[g.ar*r.half:]
	for i := range g.ar {
		r.ropeRow(0, cos[i*r.half:(i+1)*r.half], sin[i*r.half:(i+1)*r.half])
	}
	o := 0
	for _, run := range runs {
		for i, t := range run.Tokens {
			ids[o+i] = t
			r.ropeRow(run.Start+i, cos[(o+i)*r.half:(o+i+1)*r.half], sin[(o+i)*r.half:(o+i+1)*r.half])
		}
		o += len(run.Tokens)
	}
	if err := g.idsE.PutInts(g.bufs["input_ids"].Bytes(), ids); err != nil {
		return fmt.Errorf("genie: input_ids: %w", err)
	}
	t1 := time.Now()
	g.cosE.Put(g.bufs["position_ids_cos"].Bytes(), cos)
	g.sinE.Put(g.bufs["position_ids_sin"].Bytes(), sin)
	t2 := time.Now()
	r.writeMask(g, runs)
	t3 := time.Now()
	st.Embed += t1.Sub(t0)
	st.Rope += t2.Sub(t1)
	st.Mask += t3.Sub(t2)
	for k, c := range g.calls {
		if k > 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		name, part := g.names[k], filepath.Base(r.parts[k].path)
		if err := r.life.Execute(name, c, name, func() string { return part }); err != nil {
			return err
		}
	}
	// The new K/V rows go into their slots in the background, layer by layer, while the engine
	// samples; the next call on the cache waits for them (sync).
	// A run of a shifted sequence may wrap round its ring: one write per span of slots.
	w := r.writes[:0]
	for l := range r.layers {
		o = 0
		for _, run := range runs {
			r.Pool.Seq(run.Seq).Spans(run.Start, run.Start+len(run.Tokens), func(slot, row, k int) {
				w = append(w, slotpool.Write{Layer: l, Slot: slot, From: o + row - run.Start, N: k,
					K: g.kOut[l], V: g.vOut[l], Rows: g.ar, Stride: r.kc.Stride})
			})
			o += len(run.Tokens)
		}
	}
	r.kc.Submit(w...)
	r.writes = w
	return nil
}

// sync finishes the last call's KV write-back, helping with it; the time it waited is the copy's
// share of the critical path (Stats().KVCopy). Everything that reads or writes the cache or the
// new-row outputs calls it first.
func (r *Runner) sync() {
	if r.kc != nil {
		r.stats.KVCopy += r.kc.Sync()
	}
}

// BackgroundKVCopy is the cumulative time the background copies took off the critical path. Safe
// from any goroutine.
func (r *Runner) BackgroundKVCopy() time.Duration {
	if r.kc == nil {
		return 0
	}
	return r.kc.OffPath()
}

// writeMask writes every row's mask: its sequence's slots of rows [0, Start) and, causally, its
// run's rows in the new block (columns CL − AR + j). Padding rows stay fully masked.
func (r *Runner) writeMask(g *arGraph, runs []inference.Run) {
	r.Pool.WriteMask(g.masks, g.bufs["attention_mask"].Bytes(), runs, g.ar, r.cl, g.p)
}

// KVLayout is one row over all layers, K then V, in the cache's native type; the identity names
// the bundle's binaries, the cache shape and the caches' quantisation.
func (r *Runner) KVLayout() inference.KVLayout {
	h := sha256.New()
	fmt.Fprintf(h, "%s L%d kv%d hd%d cl%d %s", r.name, r.layers, r.nkv, r.hd, r.cl, r.kvE)
	for _, p := range r.parts {
		fmt.Fprintf(h, " %s", filepath.Base(p.path))
	}
	for _, g := range r.ars {
		for _, info := range g.infos {
			for _, t := range info.Inputs {
				if _, _, in, ok := kvName(t.Name); ok && in {
					fmt.Fprintf(h, " %s %g/%d", t.Name, t.Quant.Scale, t.Quant.Offset)
				}
			}
		}
	}
	return inference.KVLayout{Identity: "genie:" + hex.EncodeToString(h.Sum(nil)[:16]), RowBytes: r.rowBytes()}
}

func (r *Runner) rowBytes() int { return r.kc.RowBytes() }

// cache is the cache as the slot pool indexes it, once the write-back in
// flight is done.
func (r *Runner) cache() slotpool.KV {
	r.sync()
	return r.kc.KV
}
