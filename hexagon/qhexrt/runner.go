package qhexrt

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/hexagon/qhexrt/bundle"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/hexagon/slotpool"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/sample"
)

// Config configures Open.
type Config struct {
	// Bundle is a bundle directory, an arch folder or a manifest file.
	Bundle string
	// Read, when set, is the bundle already read (by the caller, who chose
	// the architecture and overrides): Open does not read the manifest again.
	Read *bundle.Bundle
	// Arch is the DSP architecture folder to use ("v79"). Empty: ask the
	// runtime, else v79.
	Arch string
	// QNN says which QNN libraries to load; ignored when Runtime is set.
	QNN qnn.Config
	// Runtime, when set, is an opened runtime to use; the Runner closes it
	// only with OwnRuntime.
	Runtime *qnn.Runtime
	// OwnRuntime hands Runtime to the Runner: its Close closes it too.
	OwnRuntime bool
	// Overrides supplies hexserve manifest keys (from the server config);
	// they win over the manifest's own.
	Overrides *bundle.Hexserve
	// Costs are the initial per-call cost estimates; zero means
	// plan.V79Costs. Measured execution times replace them as the runner
	// works (StepCost).
	Costs plan.Costs
	// SeqKVBytes is the memory for the per-sequence KV buffer sets of a
	// QHexRT-contract bundle served side by side (inference.Batcher): as
	// many sets as fit (at least one, the resident cache; at most 16),
	// allocated as sequences open. 0: 512 MiB. Chunked bundles share one
	// cache and ignore it.
	SeqKVBytes int64
	Logger     zerolog.Logger
}

// Runner runs a Llama bundle's graphs and implements inference.Model.
// It is not safe for concurrent use.
type Runner struct {
	cfg   Config
	log   zerolog.Logger
	spec  *spec
	arch  string
	rt    *qnn.Runtime
	ownRT bool

	contexts []*qnn.Context
	graphs   [nRoles]*graphIO
	kvK, kvV []*graphio.Tensor // per layer [CTX, kv_dim]
	kvET     graphio.Elem
	kvSlots  graphio.Slots // [1][CTX][kv_dim]
	embed    *embedTable
	window   int

	convScratch []float32
	stats       plan.Stats        // updated by the worker without locking
	board       plan.Board        // a copy for Stats, published after each Step
	life        graphio.Lifecycle // check, execute, reload, close

	seqs  seqKeeper       // the open sequences' KV rows, by contract
	last  inference.SeqID // the newest sequence
	lost  inference.SeqID // sequences up to it lost their rows in a failed graph call
	steps uint64          // Steps run: Rows of an earlier Step refuse reads
	hid   []byte          // hidden rows kept for the lm-head, one Step's
}

var _ inference.Model = (*Runner)(nil)
var _ inference.GraphTimer = (*Runner)(nil)

// graphIO is one graph with its buffers and its pre-bound call.
type graphIO struct {
	role int
	ref  graphRef
	key  string // the graph's name in Stats.Graphs
	info qnn.GraphInfo
	call *qnn.Call

	x, cos, sin, mask, y *graphio.Tensor
	newK, newV           []*graphio.Tensor
	kvNew                slotpool.KV     // newK, newV
	in, out              *graphio.Tensor // lm-head
	rope                 *ropeTable
	masks                *graphio.Mask
	rows                 int // AR for prefill, 1 otherwise
	logits               sample.Logits
}

// Open loads a bundle: the manifest, the runtime (unless given), each
// context binary once, the graphs, and checks every tensor binding against
// the binaries' own metadata.
func Open(cfg Config) (_ *Runner, err error) {
	r := &Runner{cfg: cfg, log: cfg.Logger, rt: cfg.Runtime, ownRT: cfg.OwnRuntime}
	r.life = graphio.Lifecycle{Prefix: "qhexrt", ErrClosed: ErrClosed, Log: cfg.Logger, Stats: &r.stats,
		Reload: r.reload, Invalidate: r.invalidate}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if r.rt == nil {
		if r.rt, err = qnn.Open(cfg.QNN); err != nil {
			return nil, fmt.Errorf("qhexrt: %w", err)
		}
		r.ownRT = true
	}
	if r.arch = cfg.Arch; r.arch == "" {
		r.arch = DeviceArch(r.rt, r.log)
	}
	b := cfg.Read
	if b == nil {
		if b, err = bundle.ReadWith(cfg.Bundle, r.arch, cfg.Overrides); err != nil {
			return nil, fmt.Errorf("qhexrt: %w", err)
		}
	}
	if r.spec, err = newSpec(b); err != nil {
		return nil, fmt.Errorf("qhexrt: manifest %s: %w", b.ManifestPath, err)
	}
	for _, step := range []func() error{r.loadGraphs, r.allocate, r.bind} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	if r.embed, err = openEmbed(r.spec.embed, r.spec.vocab, r.spec.hidden); err != nil {
		return nil, fmt.Errorf("qhexrt: %w", err)
	}
	r.convScratch = make([]float32, r.spec.hidden)
	r.seqs = r.newKeeper()
	r.log.Info().Str("model", r.spec.name).Str("arch", r.arch).Str("contract", r.spec.contract).
		Str("mask", string(r.spec.mask)).Int("window", r.window).Int("ctx", r.spec.ctx).
		Bool("shared_memory", r.rt.SharedMemory()).Msg("qhexrt: bundle loaded")
	return r, nil
}

// loadGraphs loads each distinct context binary once and retrieves the graphs.
func (r *Runner) loadGraphs() error {
	loaded := map[string]*qnn.Context{}
	var problems []string
	for role := range nRoles {
		ref := r.spec.graphs[role]
		c, ok := loaded[ref.file]
		if !ok {
			var err error
			if c, err = r.rt.LoadContext(ref.file, qnn.ContextOptions{}); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", ref.file, err))
				loaded[ref.file] = nil
				continue
			}
			loaded[ref.file] = c
			r.contexts = append(r.contexts, c)
		}
		if c == nil {
			continue
		}
		g := &graphIO{role: role, ref: ref, key: r.spec.key(role)}
		found := false
		for _, gi := range c.Graphs() {
			if gi.Name == ref.name {
				g.info, found = gi, true
			}
		}
		if !found {
			var have []string
			for _, gi := range c.Graphs() {
				have = append(have, gi.Name)
			}
			problems = append(problems, fmt.Sprintf("%s: no %s graph %q (the binary has %s)",
				filepath.Base(ref.file), roleNames[role], ref.name, strings.Join(have, ", ")))
			continue
		}
		r.graphs[role] = g
	}
	if len(problems) > 0 {
		return &BindError{Bundle: r.cfg.Bundle, Problems: problems}
	}
	return nil
}

// BindError lists every mismatch between a manifest and its binaries.
type BindError struct {
	Bundle   string
	Problems []string // each names the file, the graph and the tensor
}

func (e *BindError) Error() string {
	return fmt.Sprintf("qhexrt: bundle %s does not match its context binaries:\n  %s",
		e.Bundle, strings.Join(e.Problems, "\n  "))
}

// allocate binds every tensor (bindTensors) and allocates the I/O buffers
// and the KV cache, the RoPE tables, the fixed prefill mask and the logits
// view.
func (r *Runner) allocate() error {
	s := r.spec
	var problems []string
	r.window, r.kvET, problems = bindTensors(s, r.graphs)
	if len(problems) > 0 {
		return &BindError{Bundle: r.cfg.Bundle, Problems: problems}
	}
	pre, dec, lm := r.graphs[rolePrefill], r.graphs[roleDecode], r.graphs[roleLMHead]

	// Buffers: every bound tensor, then the cache.
	for _, g := range r.graphs {
		for _, t := range g.tensors() {
			if err := t.Alloc(r.rt, t.Info.Elements()*t.Elem.Size()); err != nil {
				return fmt.Errorf("qhexrt: %w", err)
			}
		}
	}
	kv, ctxLen := s.kvDim, s.ctx
	r.kvSlots = graphio.Slots{Outer: 1, Inner: kv, ES: r.kvET.Size()}
	for range s.layers {
		k, v := &graphio.Tensor{Elem: r.kvET}, &graphio.Tensor{Elem: r.kvET}
		if err := k.Alloc(r.rt, r.kvSlots.Bytes(ctxLen)); err != nil {
			return fmt.Errorf("qhexrt: %w", err)
		}
		if err := v.Alloc(r.rt, r.kvSlots.Bytes(ctxLen)); err != nil {
			return fmt.Errorf("qhexrt: %w", err)
		}
		r.kvK, r.kvV = append(r.kvK, k), append(r.kvV, v)
	}

	inv := s.scaling.InvFreq(s.headDim, s.theta, s.ctx)
	for _, g := range []*graphIO{pre, dec} {
		if pre.rope != nil && g != pre && pre.cos.Elem.Same(g.cos.Elem) {
			g.rope = pre.rope
			continue
		}
		g.rope = newRopeTable(inv, ctxLen+r.window, g.cos.Elem)
	}
	for _, g := range []*graphIO{pre, dec} {
		g.kvNew = r.kvOf(g.newK, g.newV, g.rows)
	}
	var err error
	lm.logits, err = graphio.Logits(lm.out.Elem, lm.out.B)
	return err
}

// tensors lists a graph's bound tensors.
func (g *graphIO) tensors() []*graphio.Tensor {
	if g.role == roleLMHead {
		return []*graphio.Tensor{g.in, g.out}
	}
	ts := []*graphio.Tensor{g.x, g.cos, g.sin, g.mask, g.y}
	ts = append(ts, g.newK...)
	return append(ts, g.newV...)
}

// bind retrieves the graphs and binds each one's buffers to a call.
func (r *Runner) bind() error {
	s := r.spec
	byFile := map[string]*qnn.Context{}
	for _, c := range r.contexts {
		byFile[c.Path()] = c
	}
	for _, g := range r.graphs {
		c := byFile[g.ref.file]
		gr, err := c.Graph(g.ref.name)
		if err != nil {
			return fmt.Errorf("qhexrt: %s graph %q: %w", filepath.Base(g.ref.file), g.ref.name, err)
		}
		var in, out []qnn.Binding
		switch {
		case g.role == roleLMHead:
			in = []qnn.Binding{{Name: g.in.Info.Name, Buffer: g.in.Buf}}
			out = []qnn.Binding{{Name: g.out.Info.Name, Buffer: g.out.Buf}}
		case g.role == roleDecode || s.contract == ContractChunked:
			in, out = r.ioBindings(g, r.kvK, r.kvV)
		default:
			in, out = r.ioBindings(g, nil, nil)
		}
		if g.call, err = gr.Bind(in, out); err != nil {
			return fmt.Errorf("qhexrt: binding %s graph %q: %w", filepath.Base(g.ref.file), g.ref.name, err)
		}
	}
	return nil
}

// ioBindings are g's bindings with the past inputs bound to ks, vs (nil:
// none, the QHexRT prefill).
func (r *Runner) ioBindings(g *graphIO, ks, vs []*graphio.Tensor) (in, out []qnn.Binding) {
	n := r.spec.names
	in = []qnn.Binding{{Name: n.X, Buffer: g.x.Buf}, {Name: n.Cos, Buffer: g.cos.Buf},
		{Name: n.Sin, Buffer: g.sin.Buf}, {Name: n.CMask, Buffer: g.mask.Buf}}
	out = []qnn.Binding{{Name: n.Y, Buffer: g.y.Buf}}
	for i := range ks {
		in = append(in, qnn.Binding{Name: bundle.Layer(n.PastK, i), Buffer: ks[i].Buf},
			qnn.Binding{Name: bundle.Layer(n.PastV, i), Buffer: vs[i].Buf})
	}
	for i := range r.spec.layers {
		out = append(out, qnn.Binding{Name: g.newK[i].Info.Name, Buffer: g.newK[i].Buf},
			qnn.Binding{Name: g.newV[i].Info.Name, Buffer: g.newV[i].Buf})
	}
	return in, out
}

// Info describes the model to the engine.
func (r *Runner) Info() inference.ModelInfo {
	return inference.ModelInfo{
		Name: r.spec.name, VocabSize: r.spec.vocab, ContextLen: r.spec.ctx, PrefillWindow: r.window,
		BOS: r.spec.bos, EOS: append([]int32(nil), r.spec.eos...),
	}
}

// Contract is the bundle's graph contract (ContractQHexRT or ContractChunked).
func (r *Runner) Contract() string { return r.spec.contract }

// SetEndTokens replaces the end tokens Info reports (the server's end-token rule).
func (r *Runner) SetEndTokens(ids []int32) { r.spec.eos = slices.Clone(ids) }

// BufferBytes is the runtime's buffer memory (graph I/O and KV).
func (r *Runner) BufferBytes() int64 { return r.rt.BufferBytes() }

// ErrClosed is returned by a closed Runner.
var ErrClosed = errors.New("qhexrt: runner is closed")

// lmheadOn runs the lm-head on one hidden row y of element type e.
func (r *Runner) lmheadOn(y []byte, e graphio.Elem) error {
	lm := r.graphs[roleLMHead]
	t0 := time.Now()
	if e.Same(lm.in.Elem) {
		copy(lm.in.B, y)
	} else {
		e.Get(r.convScratch, y)
		lm.in.Elem.Put(lm.in.B, r.convScratch)
	}
	r.stats.Convert += time.Since(t0)
	return r.execute(lm)
}

// execute runs one graph call through the shared lifecycle
// (graphio.Lifecycle: timing, the cache invalid after a failure, a reload
// after a device restart).
func (r *Runner) execute(g *graphIO) error {
	return r.life.Execute(g.key, g.call, g.ref.name, func() string { return filepath.Base(g.ref.file) })
}

// reload recreates the contexts, graphs and calls after a device restart.
// The buffers and the caches stay (their rows are invalid: see invalidate).
func (r *Runner) reload() error {
	r.closeGraphs()
	loaded := map[string]bool{}
	for _, ref := range r.spec.graphs {
		if loaded[ref.file] {
			continue
		}
		loaded[ref.file] = true
		c, err := r.rt.LoadContext(ref.file, qnn.ContextOptions{})
		if err != nil {
			return err
		}
		r.contexts = append(r.contexts, c)
	}
	if err := r.bind(); err != nil {
		return err
	}
	return r.seqs.reset()
}

// closeGraphs releases the calls and contexts, newest first.
func (r *Runner) closeGraphs() {
	if r.seqs != nil {
		r.seqs.unbind()
	}
	for _, g := range r.graphs {
		if g != nil && g.call != nil {
			g.call.Close()
			g.call = nil
		}
	}
	for i := len(r.contexts) - 1; i >= 0; i-- {
		r.contexts[i].Close()
	}
	r.contexts = nil
}

// Close releases the calls, contexts, buffers, the embedding table and (if
// the Runner opened it) the runtime, in reverse order of creation.
func (r *Runner) Close() error {
	if !r.life.Close() {
		return nil
	}
	r.closeGraphs()
	var errs []error
	if r.seqs != nil {
		r.seqs.close()
	}
	free := (*graphio.Tensor).Free
	for i := len(r.kvK) - 1; i >= 0; i-- {
		free(r.kvV[i])
		free(r.kvK[i])
	}
	for i := nRoles - 1; i >= 0; i-- {
		if g := r.graphs[i]; g != nil {
			ts := g.tensors()
			for j := len(ts) - 1; j >= 0; j-- {
				free(ts[j])
			}
		}
	}
	if err := r.embed.Close(); err != nil {
		errs = append(errs, err)
	}
	if r.ownRT && r.rt != nil {
		if err := r.rt.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	runtime.KeepAlive(r)
	return errors.Join(errs...)
}

// DeviceArch is the DSP architecture the runtime reports, else bundle.DefaultArch (with a
// warning saying why).
func DeviceArch(rt *qnn.Runtime, log zerolog.Logger) string {
	switch a, err := rt.Arch(); {
	case err != nil:
		log.Warn().Err(err).Msg("qhexrt: cannot read the DSP architecture, assuming " + bundle.DefaultArch)
	case PlausibleArch(a):
		return a
	default:
		log.Warn().Str("reported", a).Msg("qhexrt: implausible DSP architecture, assuming " + bundle.DefaultArch)
	}
	return bundle.DefaultArch
}

// PlausibleArch accepts Hexagon architecture names v60 … v99 (a bundle's arch folders).
func PlausibleArch(a string) bool {
	return len(a) == 3 && a[0] == 'v' && a[1] >= '6' && a[1] <= '9' && a[2] >= '0' && a[2] <= '9'
}
