// Package executorch serves ExecuTorch Qualcomm "static llama" .pte exports
// (hybrid mode: prefill_forward over AR tokens and kv_forward over one, both
// on the KV cache) on QNN, the way ExecuTorch's own runner drives them
// (docs/executorch-pte.md §4–§5), without ExecuTorch's runtime. Runner implements
// inference.Model (a Batcher) and inference.SeqKVSnapshotter.
package executorch

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/hexagon/pte"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/hexagon/slotpool"
	"github.com/hexserve/hexserve/hexagon/writeback"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/sample"
)

// Config configures Open.
type Config struct {
	Path    string       // the .pte file
	Runtime *qnn.Runtime // opened QNN runtime; Close closes it only with OwnRuntime
	// OwnRuntime hands Runtime to the Runner: its Close closes it too.
	OwnRuntime bool
	// BOS and EOS come from the tokenizer and chat template
	// (<|begin_of_text|>; <|eot_id|>, <|eom_id|>, <|end_of_text|>), not from
	// the export's get_bos_id/get_eos_id, which are hard-coded constants.
	BOS    int32
	EOS    []int32
	Logger zerolog.Logger
	// Memory, when > 0, is the most the .pte may hold (engine.model_memory): the file, its KV
	// cache and graph I/O are counted against it before the cache is allocated.
	Memory int64
}

// Runner runs a .pte's graphs. It is not safe for concurrent use.
type Runner struct {
	cfg  Config
	log  zerolog.Logger
	file *pte.File
	rt   *qnn.Runtime
	name string

	bins  [][]byte       // distinct context binaries in delegate order
	group *qnn.Group     // spill-fill group when the compile spec asks
	ctxs  []*qnn.Context // per bins entry
	pre   *method
	dec   *method

	layers, nkv, hd, vocab, cl int
	es                         int // cache element bytes
	maxS                       int // slots per cache row at the widest stride (CL − min AR)
	kv                         []*qnn.Buffer
	kc                         *slotpool.Cache  // the caches over kv: K [n_kv·hd][S][1], V [n_kv][S][hd]
	valid                      int              // cache slots [0, valid) hold the last sequence
	queued                     []slotpool.Write // copyRuns' scratch
	batchToks                  []int32          // runBatch's scratch
	policy                     plan.Policy      // chooses each Step's calls
	opts                       []plan.Option    // its candidates' scratch
	names                      [2][]string      // their graphs: kv_forward, prefill_forward

	stats plan.Stats        // updated by the worker without locking
	board plan.Board        // a copy for Stats, published after each call
	life  graphio.Lifecycle // check, execute, reload, close

	slotpool.Batcher // the caches as a slot pool: Open, Fork, Grow, Release, SaveSeqKV, RestoreSeqKV
}

var (
	_ inference.Model            = (*Runner)(nil)
	_ inference.SeqKVSnapshotter = (*Runner)(nil)
)

// method is one graph family (prefill or decode) with its buffers and calls.
type method struct {
	*layout
	vals   map[int32]*qnn.Buffer
	calls  []*qnn.Call // per delegate step, nil for copies
	masks  *graphio.Mask
	logits sample.Logits
	vocab  int // entries per logits row
	shards int // delegate calls per evaluation
	tokE   graphio.Elem
	posE   graphio.Elem
	posBuf []int32 // AR positions
	// Per step: the layers whose caches or new entries it touches, and the
	// layers whose copy can start after it.
	touched, final [][]int
	// Per step: whether the copies queued so far start after it (see
	// runSteps).
	start []bool

	kOut, vOut [][]byte // per layer views of the new-entry outputs
}

// Open loads a .pte: the container, each distinct context binary once (as
// one multi-context group when the compile spec asks), both methods' graphs,
// and checks every binding against the binaries' own tensor metadata.
func Open(cfg Config) (_ *Runner, err error) {
	if cfg.Runtime == nil {
		return nil, errors.New("executorch: no QNN runtime")
	}
	r := &Runner{cfg: cfg, log: cfg.Logger, rt: cfg.Runtime}
	r.life = graphio.Lifecycle{Prefix: "executorch", ErrClosed: ErrClosed, Log: cfg.Logger, Stats: &r.stats,
		Reload: r.reload, Invalidate: func() { r.valid = 0 }}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if r.file, err = pte.Open(cfg.Path); err != nil {
		return nil, err
	}
	r.name = strings.TrimSuffix(filepath.Base(cfg.Path), filepath.Ext(cfg.Path))
	if err := r.loadContexts(); err != nil {
		return nil, err
	}
	graphs := func(m *pte.Method) func(int) (qnn.GraphInfo, error) {
		return func(d int) (qnn.GraphInfo, error) {
			if d < 0 || d >= len(m.Delegates) {
				return qnn.GraphInfo{}, fmt.Errorf("no delegate %d", d)
			}
			c := r.ctxs[r.binIndex(m.Delegates[d].Binary)]
			for _, g := range c.Graphs() {
				if g.Name == m.Name {
					return g, nil
				}
			}
			return qnn.GraphInfo{}, fmt.Errorf("context binary %d has no graph %q", r.binIndex(m.Delegates[d].Binary), m.Name)
		}
	}
	if r.layers, err = r.layerCount(); err != nil {
		return nil, r.errf("%v", err)
	}
	pl, err := resolveMethod(r.file.Method(pte.MethodPrefill), r.layers, graphs(r.file.Method(pte.MethodPrefill)))
	if err != nil {
		return nil, r.errf("%v", err)
	}
	dl, err := resolveMethod(r.file.Method(pte.MethodDecode), r.layers, graphs(r.file.Method(pte.MethodDecode)))
	if err != nil {
		return nil, r.errf("%v", err)
	}
	if err := r.setup(pl, dl); err != nil {
		return nil, err
	}
	if err := r.bind(); err != nil {
		return nil, err
	}
	r.log.Info().Str("model", r.name).Int("layers", r.layers).Int("ctx", r.cl).Int("prefill_ar", r.pre.ar).
		Int("shards", len(r.bins)).Str("kv", r.pre.kT.DataType.String()).Str("logits", r.pre.logitsT.DataType.String()).
		Bool("shared_memory", r.rt.SharedMemory()).Bool("spill_fill_group", r.group != nil).Msg("executorch: .pte loaded")
	return r, nil
}

func (r *Runner) errf(format string, a ...any) error {
	return fmt.Errorf("executorch: %s: %s", r.cfg.Path, fmt.Sprintf(format, a...))
}

// layerCount is get_n_layers (or get_n_self_layers), else half the
// prefill plan's cache inputs.
func (r *Runner) layerCount() (int, error) {
	for _, k := range []string{"get_n_self_layers", "get_n_layers"} {
		if v := r.file.Metadata[k]; len(v) == 1 && v[0].Kind == pte.KindInt && v[0].Int > 0 {
			return int(v[0].Int), nil
		}
	}
	m := r.file.Method(pte.MethodPrefill)
	if n := len(m.Inputs) - 3; n > 0 && n%2 == 0 {
		return n / 2, nil
	}
	return 0, errors.New("no get_n_layers metadata and the plan inputs do not make whole layers")
}

// binIndex finds a delegate's binary among the distinct ones.
func (r *Runner) binIndex(b []byte) int {
	for i, x := range r.bins {
		if len(x) == len(b) && &x[0] == &b[0] {
			return i
		}
	}
	return -1
}

// loadContexts creates one context per distinct binary, in delegate order
// (shard i of every method shares context i), as one spill-fill group when
// the compile spec sets use_multi_contexts and max_sf_buf_size.
func (r *Runner) loadContexts() error {
	if r.bins == nil {
		for _, name := range []string{pte.MethodPrefill, pte.MethodDecode} {
			for _, d := range r.file.Method(name).Delegates {
				if len(d.Binary) == 0 {
					return r.errf("method %s: delegate %s has no context binary", name, d.ID)
				}
				if r.binIndex(d.Binary) < 0 {
					r.bins = append(r.bins, d.Binary)
				}
				if o := d.QNN; o != nil && o.UseMultiContexts && o.MaxSpillFill > 0 && r.group == nil {
					r.group = &qnn.Group{SpillFill: uint64(o.MaxSpillFill)}
				}
			}
		}
	}
	if r.group != nil {
		r.group.First = nil
	}
	for i, b := range r.bins {
		c, err := r.rt.LoadContextData(fmt.Sprintf("%s#context%d", filepath.Base(r.cfg.Path), i), b, qnn.ContextOptions{Group: r.group})
		if err != nil {
			return fmt.Errorf("executorch: %w", err)
		}
		r.ctxs = append(r.ctxs, c)
	}
	return nil
}

// setup checks that the two methods agree and allocates the buffers: one
// per plan value and method, and one per layer and K/V cache shared by both
// methods (each graph views it with its own row stride).
func (r *Runner) setup(pl, dl *layout) error {
	pkv, phd, pv := pl.shape()
	dkv, dhd, dv := dl.shape()
	switch {
	case pl.cl != dl.cl:
		return r.errf("prefill mask has %d columns, decode %d", pl.cl, dl.cl)
	case pkv != dkv || phd != dhd || pv != dv:
		return r.errf("prefill (n_kv %d, hd %d, vocab %d) and decode (n_kv %d, hd %d, vocab %d) disagree", pkv, phd, pv, dkv, dhd, dv)
	case pl.kT.DataType != dl.kT.DataType:
		return r.errf("prefill caches are %s, decode %s", pl.kT.DataType, dl.kT.DataType)
	case pl.ar < dl.ar:
		return r.errf("prefill_forward takes %d tokens per call, fewer than kv_forward's %d", pl.ar, dl.ar)
	}
	for i := range r.layers {
		for _, p := range [][2]qnn.TensorInfo{{pl.types[pl.kIn[i]], dl.types[dl.kIn[i]]}, {pl.types[pl.vIn[i]], dl.types[dl.vIn[i]]}} {
			if p[0].Quant.Scale != p[1].Quant.Scale || p[0].Quant.Offset != p[1].Quant.Offset {
				return r.errf("layer %d: cache %s is quantised differently in the two methods (scale %g/%g, offset %d/%d)",
					i, p[0].Name, p[0].Quant.Scale, p[1].Quant.Scale, p[0].Quant.Offset, p[1].Quant.Offset)
			}
		}
	}
	r.nkv, r.hd, r.vocab, r.cl = pkv, phd, pv, pl.cl
	r.es = pl.kT.DataType.Size()
	if err := r.checkMemory(r.cl, dl.ar, pl, dl); err != nil {
		return err
	}
	r.maxS = r.cl - dl.ar
	r.Batcher = slotpool.NewBatcher(&r.life, r.maxS, slotpool.MaxSequences, r.cache)
	n := r.nkv * r.hd * r.maxS * r.es
	for range 2 * r.layers {
		// A pool: the two methods view it with different shapes, so each view
		// is registered as a shared buffer of its own (ExecuTorch's pattern).
		b, err := r.rt.AllocPool(n)
		if err != nil {
			return fmt.Errorf("executorch: KV cache: %w", err)
		}
		r.kv = append(r.kv, b)
	}
	k, v := make([][]byte, r.layers), make([][]byte, r.layers)
	for i := range r.layers {
		k[i], v[i] = r.kv[2*i].Bytes(), r.kv[2*i+1].Bytes()
	}
	r.kc = slotpool.NewCache(k, v, r.nkv, r.hd, r.es, r.cl-pl.ar, writeback.Workers())
	var err error
	if r.pre, err = r.newMethod(pl); err != nil {
		return err
	}
	r.dec, err = r.newMethod(dl)
	return err
}

func (r *Runner) newMethod(l *layout) (*method, error) {
	m := &method{layout: l, vals: map[int32]*qnn.Buffer{}}
	m.touched, m.final = stepLayers(l, r.layers)
	m.start = startSteps(l)
	for i := range r.layers {
		m.vals[l.kIn[i]], m.vals[l.vIn[i]] = r.kv[2*i], r.kv[2*i+1]
	}
	for v, n := range l.sizes {
		if m.vals[v] != nil {
			continue
		}
		b, err := r.rt.Alloc(n)
		if err != nil {
			return nil, fmt.Errorf("executorch: %s value %d: %w", l.method, v, err)
		}
		m.vals[v] = b
	}
	for i := range r.layers {
		m.kOut = append(m.kOut, m.vals[l.kNew[i]].Bytes()[:l.sizes[l.kNew[i]]])
		m.vOut = append(m.vOut, m.vals[l.vNew[i]].Bytes()[:l.sizes[l.vNew[i]]])
	}
	var err error
	if m.masks, err = maskOf(l.maskT); err != nil {
		return nil, r.errf("%s: mask %s: %v", l.method, l.maskT.Name, err)
	}
	le, err := graphio.ElemOf(l.logitsT)
	if err == nil {
		m.logits, err = graphio.Logits(le, m.vals[l.logits].Bytes())
	}
	if err != nil {
		return nil, r.errf("%s: logits %s: %v", l.method, l.logitsT.Name, err)
	}
	m.vocab = r.vocab
	m.posBuf = make([]int32, l.ar)
	if m.tokE, err = graphio.ElemOf(l.tokensT); err == nil {
		m.posE, err = graphio.ElemOf(l.posT)
	}
	if err != nil {
		return nil, r.errf("%s: %v", l.method, err)
	}
	for _, s := range l.steps {
		if s.delegate >= 0 {
			m.shards++
		}
	}
	return m, nil
}

// maskOf is the SmartMask's codes for mask tensor t: additive for float
// masks, the code of 0.0 to attend and the lowest code to block for fixed
// point (65535 and 0 for ExecuTorch's uint16 mask).
func maskOf(t qnn.TensorInfo) (*graphio.Mask, error) {
	e, err := graphio.ElemOf(t)
	if err != nil {
		return nil, err
	}
	return graphio.NewMask(e, graphio.MaskAdditive)
}

// bind builds each delegate step's call (again after a reload).
func (r *Runner) bind() error {
	for _, m := range []*method{r.pre, r.dec} {
		md := r.file.Method(m.method)
		m.calls = make([]*qnn.Call, len(m.steps))
		for i, s := range m.steps {
			if s.delegate < 0 {
				continue
			}
			ci := r.binIndex(md.Delegates[s.delegate].Binary)
			g, err := r.ctxs[ci].Graph(m.method)
			if err != nil {
				return fmt.Errorf("executorch: %w", err)
			}
			var in, out []qnn.Binding
			for _, a := range s.in {
				in = append(in, qnn.Binding{Name: a.t.Name, Buffer: m.vals[a.value]})
			}
			for _, a := range s.out {
				out = append(out, qnn.Binding{Name: a.t.Name, Buffer: m.vals[a.value]})
			}
			if m.calls[i], err = g.Bind(in, out); err != nil {
				return fmt.Errorf("executorch: binding %s of context %d: %w", m.method, ci, err)
			}
		}
	}
	return nil
}

// Info describes the model. ContextLen is CL − 1: kv_forward writes the
// new entry of position CL − 2 into the last of its CL − 1 cache slots.
func (r *Runner) Info() inference.ModelInfo {
	return inference.ModelInfo{Name: r.name, VocabSize: r.vocab, ContextLen: r.cl - 1, PrefillWindow: r.pre.ar,
		BOS: r.cfg.BOS, EOS: append([]int32(nil), r.cfg.EOS...)}
}

// SetEndTokens replaces the end tokens Info reports (the server's end-token rule).
func (r *Runner) SetEndTokens(ids []int32) { r.cfg.EOS = slices.Clone(ids) }

// BufferBytes is the runtime's buffer memory (graph I/O and KV).
func (r *Runner) BufferBytes() int64 { return r.rt.BufferBytes() }

// ErrClosed is returned by a closed Runner.
var ErrClosed = errors.New("executorch: runner is closed")

// runSteps executes m's steps in order, each after the copies of its own
// layers, and calls copyFinal, which queues the copies of the layers whose
// last write a step made (timed as KVCopy). The queued copies start (the
// copy workers are woken) after the last-but-one and the last delegate
// call only (startSteps): a wake costs the calling thread a system call,
// and a copy started there is still done long before the next call that
// reads its layer (the next token's same shard).
func (r *Runner) runSteps(m *method, copyFinal func(layers []int)) error {
	for i, s := range m.steps {
		r.syncLayers(m.touched[i])
		if s.delegate < 0 {
			copy(m.vals[s.to].Bytes()[:m.sizes[s.to]], m.vals[s.from].Bytes()[:m.sizes[s.from]])
		} else if err := r.execute(m, i); err != nil {
			return err
		}
		if len(m.final[i]) > 0 {
			t := time.Now()
			copyFinal(m.final[i])
			if m.start[i] {
				r.start(m)
			}
			r.stats.KVCopy += time.Since(t)
		} else if m.start[i] {
			r.start(m) // copies queued by earlier steps
		}
	}
	return nil
}

// start hands the queued copies to the copy workers. On a file of several
// shards a copy is needed only by the next evaluation's call of its shard,
// a graph call or more away, so where wakes are dear polling workers take
// it (writeback.Copier.Hand); one shard's are needed right after sampling.
func (r *Runner) start(m *method) {
	if m.shards > 1 {
		r.kc.Hand()
	} else {
		r.kc.Start()
	}
}

// execute runs step i of m through the shared lifecycle
// (graphio.Lifecycle: timing per graph, the cache invalid after a failure,
// a reload after a device restart).
func (r *Runner) execute(m *method, i int) error {
	return r.life.Execute(m.method, m.calls[i], m.method, func() string {
		return fmt.Sprintf("context %d", r.binIndex(r.file.Method(m.method).Delegates[m.steps[i].delegate].Binary))
	})
}

// reload recreates the contexts and calls; buffers stay, the cache is
// invalid.
func (r *Runner) reload() error {
	r.sync()
	r.closeGraphs()
	r.valid = 0
	if err := r.loadContexts(); err != nil {
		return err
	}
	return r.bind()
}

func (r *Runner) closeGraphs() {
	for _, m := range []*method{r.pre, r.dec} {
		if m == nil {
			continue
		}
		for i, c := range m.calls {
			if c != nil {
				c.Close()
				m.calls[i] = nil
			}
		}
	}
	for i := len(r.ctxs) - 1; i >= 0; i-- {
		r.ctxs[i].Close()
	}
	r.ctxs = nil
}

// Close releases the calls, contexts, buffers and the file.
func (r *Runner) Close() error {
	if !r.life.Close() {
		return nil
	}
	if r.kc != nil {
		r.kc.Close()
	}
	r.closeGraphs()
	for _, m := range []*method{r.dec, r.pre} {
		if m == nil {
			continue
		}
		for _, b := range m.vals {
			b.Free() // the shared caches are freed below; Free twice is a no-op
		}
	}
	for _, b := range r.kv {
		b.Free()
	}
	var err error
	if r.file != nil {
		err = r.file.Close()
	}
	if r.cfg.OwnRuntime {
		err = errors.Join(err, r.rt.Close())
	}
	return err
}
