// Package genie serves Qualcomm AI Hub Genie bundles (docs/genie.md): a folder with
// genie_config.json and the context binaries of an AI Hub export, each holding weight-shared
// graphs prompt_ar{A}_cl{C}_{k}_of_{N} and token_ar1_cl{C}_{k}_of_{N}. Part 1 looks the input ids
// up, the inner parts run layers, the last ends in logits; the hidden state passes between parts by
// tensor name. The runner reads every graph, tensor, shape, data type and quantisation from the
// binaries (QnnSystemContext_getBinaryInfo), keeps one KV cache that every graph reads (re-strided
// between graphs of different AR), and implements the engine's inference.Batcher: several
// sequences' rows in one call of the AR-A graphs, each row with its own mask over its sequence's
// slots and its own position, or one AR-1 call when measured costs say so.
package genie

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/hexagon/slotpool"
	"github.com/hexserve/hexserve/hexagon/writeback"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/internal/modelfile"
)

// Config configures Open.
type Config struct {
	Dir     string       // the bundle folder (genie_config.json)
	Runtime *qnn.Runtime // opened QNN runtime; Close closes it only with OwnRuntime
	// OwnRuntime hands Runtime to the Runner: its Close closes it too.
	OwnRuntime bool
	Logger     zerolog.Logger
	// AllowOutside lets the config name files outside Dir (model.allow_outside_paths).
	AllowOutside bool
	// Memory, when > 0, is the most the bundle may hold (engine.model_memory): its parts, KV
	// cache and graph I/O are counted against it before anything is allocated.
	Memory int64
}

// Runner runs a Genie bundle's graphs. It is not safe for concurrent use.
type Runner struct {
	cfg   Config
	bc    *BundleConfig
	log   zerolog.Logger
	rt    *qnn.Runtime
	name  string
	parts []*part
	ars   []*arGraph // by AR, ascending

	layers, nkv, hd, cl, hidden int
	kvE                         graphio.Elem
	es                          int
	kv                          []*qnn.Buffer // per layer K, V: [nkv·hd][stride], [nkv][stride][hd]
	kc                          *slotpool.Cache
	maxP                        int       // slots at the widest stride (CL − min AR)
	slots                       int       // pool slots: CL − min AR (the AR-1 graphs' past)
	rope                        []float32 // [CL][half] cos then [CL][half] sin
	inv                         []float64 // the half RoPE frequencies
	ropeAF                      float64   // cos and sin times it (LongRoPE's attention factor; else 1)
	half                        int

	writes []slotpool.Write // run's scratch

	stats plan.Stats
	board plan.Board
	// policy chooses each step's AR; cands and opts are its candidates' scratch.
	policy plan.Policy
	cands  []*arGraph
	opts   []plan.Option

	life graphio.Lifecycle

	slotpool.Batcher // the cache as a slot pool: Open, Fork, Grow, Release, SaveSeqKV, RestoreSeqKV
}

// part is one context binary.
type part struct {
	path   string
	ctx    *qnn.Context
	layers []int // global layer indices it holds
	first  bool  // input_ids → hidden
	last   bool  // → logits
}

// arGraph is the graphs of one AR over all parts, with their buffers and calls.
type arGraph struct {
	ar, p  int
	names  []string // per part
	infos  []qnn.GraphInfo
	calls  []*qnn.Call
	bufs   map[string]*qnn.Buffer // non-cache tensors by name (a hidden state's output and input share one)
	idsE   graphio.Elem
	maskE  graphio.Elem
	masks  *graphio.Mask
	cosE   graphio.Elem
	sinE   graphio.Elem
	kOut   [][]byte // per layer
	vOut   [][]byte
	logits sample.Logits
	rowsE  []float32 // the call's cos rows, then its sin rows
	ids    []int32   // the call's input ids
}

var (
	_ inference.Batcher          = (*Runner)(nil)
	_ inference.SeqKVSnapshotter = (*Runner)(nil)
	_ inference.GraphTimer       = (*Runner)(nil)
	_ inference.ContextShifter   = (*Runner)(nil)
)

// ErrClosed is returned by a closed Runner.
var ErrClosed = errors.New("genie: runner is closed")

var partFile = regexp.MustCompile(`^(.+)_part_\d+_of_\d+\.bin$`)

// Open loads a Genie bundle: the config, every ctx-bin (mmap'd), the graphs of each AR across
// the parts, checked against each other and against the config.
func Open(cfg Config) (_ *Runner, err error) {
	if cfg.Runtime == nil {
		return nil, errors.New("genie: no QNN runtime")
	}
	r := &Runner{cfg: cfg, log: cfg.Logger, rt: cfg.Runtime, name: filepath.Base(filepath.Clean(cfg.Dir))}
	r.life = graphio.Lifecycle{Prefix: "genie", ErrClosed: ErrClosed, Log: cfg.Logger, Stats: &r.stats,
		Reload: r.reload, Invalidate: func() {}}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if r.bc, err = LoadConfig(modelfile.Folder{Dir: cfg.Dir, AllowOutside: cfg.AllowOutside}); err != nil {
		return nil, err
	}
	if r.bc.RopeNote != "" {
		r.log.Warn().Str("model", r.name).Msg("genie: " + r.bc.RopeNote)
	}
	if m := partFile.FindStringSubmatch(filepath.Base(r.bc.Bins[0])); m != nil {
		r.name = m[1] // AI Hub's <name>_part_1_of_N.bin
	}
	for _, step := range []func() error{r.checkParts, r.loadContexts, r.resolve, r.checkMemory, r.setup, r.bind} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	var ars []string
	for _, g := range r.ars {
		ars = append(ars, strconv.Itoa(g.ar))
	}
	r.log.Info().Str("model", r.name).Int("parts", len(r.parts)).Int("layers", r.layers).Int("ctx", r.cl).
		Str("ar", strings.Join(ars, ",")).Str("kv", r.kvE.String()).Str("logits", r.ars[0].logitsType()).
		Msg("genie: bundle loaded")
	return r, nil
}

func (g *arGraph) logitsType() string {
	switch g.logits.Type {
	case sample.F32:
		return "float32"
	case sample.F16:
		return "float16"
	}
	return "ufixed16"
}

// errf names the bundle.
func (r *Runner) errf(format string, a ...any) error {
	return fmt.Errorf("genie: %s: %s", r.cfg.Dir, fmt.Sprintf(format, a...))
}

// loadContexts creates one context per ctx-bin, in the config's order (mmap'd: the weights
// never enter the Go heap), with the backend's mmap-budget and, when spill-fill-bufsize is set,
// as one multi-context group sharing a spill-fill buffer of that size, as Genie loads them.
func (r *Runner) loadContexts() error {
	var group *qnn.Group
	if r.bc.SpillFill > 0 {
		group = &qnn.Group{SpillFill: uint64(r.bc.SpillFill)}
	}
	opts := qnn.ContextOptions{Group: group, ReadBudgetMB: uint64(r.bc.MmapMB)}
	for i, path := range r.bc.Bins {
		c, err := r.rt.LoadContext(path, opts)
		if err != nil {
			return fmt.Errorf("genie: %s: dialog.engine.model.binary.ctx-bins[%d]: %w", filepath.Join(r.cfg.Dir, ConfigFile), i, err)
		}
		if i < len(r.parts) {
			r.parts[i].ctx = c
		} else {
			r.parts = append(r.parts, &part{path: path, ctx: c})
		}
	}
	return nil
}

// arOf is a graph's AR from its shapes: input_ids [1, AR] or the hidden state [1, AR, E].
func arOf(g qnn.GraphInfo) (int, error) {
	for _, t := range g.Inputs {
		if t.Name == "input_ids" || !known(t.Name) {
			if len(t.Dims) < 2 {
				return 0, fmt.Errorf("graph %s: input %s has dims %v", g.Name, t.Name, t.Dims)
			}
			return int(t.Dims[1]), nil
		}
	}
	return 0, fmt.Errorf("graph %s has neither input_ids nor a hidden-state input", g.Name)
}

// known reports whether name is one of the contract's fixed tensor names.
func known(name string) bool {
	switch name {
	case "input_ids", "attention_mask", "position_ids_cos", "position_ids_sin", "logits":
		return true
	}
	_, _, _, ok := kvName(name)
	return ok
}

// kvName parses past_{key,value}_<l>_{in,out}.
func kvName(name string) (isK bool, layer int, in bool, ok bool) {
	rest, found := strings.CutPrefix(name, "past_key_")
	if found {
		isK = true
	} else if rest, found = strings.CutPrefix(name, "past_value_"); !found {
		return false, 0, false, false
	}
	num, dir, found := strings.Cut(rest, "_")
	l, err := strconv.Atoi(num)
	if !found || err != nil || l < 0 || (dir != "in" && dir != "out") {
		return false, 0, false, false
	}
	return isK, l, dir == "in", true
}

// resolve groups the graphs by AR over the parts and checks them.
func (r *Runner) resolve() error {
	n := len(r.parts)
	byAR := map[int][]qnn.GraphInfo{}
	for i, p := range r.parts {
		base := filepath.Base(p.path)
		seen := map[int]bool{}
		for _, g := range p.ctx.Graphs() {
			if k, of, ok := GraphPart(g.Name); ok {
				if of != n || k != i+1 {
					return r.errf("%s holds graph %s (part %d of %d) but is ctx-bins[%d] of %d in %s: a part is missing, extra or out of order",
						base, g.Name, k, of, i, n, ConfigFile)
				}
			}
			ar, err := arOf(g)
			if err != nil {
				return r.errf("%s: %v", base, err)
			}
			if seen[ar] {
				return r.errf("%s holds two graphs of AR %d", base, ar)
			}
			seen[ar] = true
			if len(byAR[ar]) != i {
				return r.errf("%s has a graph of AR %d (%s) that earlier parts lack", base, ar, g.Name)
			}
			byAR[ar] = append(byAR[ar], g)
		}
		for ar, gs := range byAR {
			if len(gs) != i+1 {
				return r.errf("%s has no graph of AR %d (part 1 has %s): every ctx-bin holds the prompt and the token graph", base, ar, gs[0].Name)
			}
		}
	}
	if len(byAR) < 1 {
		return r.errf("the context binaries hold no graphs")
	}
	for _, ar := range slices.Sorted(func(yield func(int) bool) {
		for a := range byAR {
			if !yield(a) {
				return
			}
		}
	}) {
		g := &arGraph{ar: ar, infos: byAR[ar], bufs: map[string]*qnn.Buffer{}}
		for _, gi := range g.infos {
			g.names = append(g.names, gi.Name)
		}
		r.ars = append(r.ars, g)
	}
	return r.check()
}

// check validates every graph's tensors against the contract, each other and the config.
func (r *Runner) check() error {
	cfgPath := filepath.Join(r.cfg.Dir, ConfigFile)
	r.cl, r.layers = -1, 0
	gc := graphCheck{cfgPath: cfgPath, layerPart: map[int]int{}, kvQ: map[string]qnn.TensorInfo{}}
	for gi, g := range r.ars {
		for k, info := range g.infos {
			if err := r.checkGraph(&gc, gi, g, k, info); err != nil {
				return err
			}
		}
	}
	r.layers = len(gc.layerPart)
	for l := range r.layers {
		if _, ok := gc.layerPart[l]; !ok {
			return r.errf("no part holds layer %d (the parts hold %d layers)", l, r.layers)
		}
	}
	switch {
	case r.layers == 0:
		return r.errf("no part holds a layer")
	case r.cl < 0:
		return r.errf("no graph has an attention_mask")
	case r.cl != r.bc.Size:
		return r.errf("the binaries' context length is %d but %s: dialog.context.size is %d", r.cl, cfgPath, r.bc.Size)
	case r.hd != r.bc.KVDim:
		return r.errf("the binaries' KV head dim is %d but %s: dialog.engine.backend.QnnHtp.kv-dim is %d", r.hd, cfgPath, r.bc.KVDim)
	case 2*r.half != r.hd:
		return r.errf("cos/sin hold %d frequencies for head dim %d (want half)", r.half, r.hd)
	case r.bc.Rope.Dim != r.half:
		return r.errf("%s: positional-encoding.rope-dim is %d but the binaries' cos/sin hold %d", cfgPath, r.bc.Rope.Dim, r.half)
	case !r.parts[0].first || !r.parts[len(r.parts)-1].last:
		return r.errf("part 1 must take input_ids and the last part output logits")
	}
	r.fitVocab(&gc)
	return r.checkHF()
}

// checkHF checks config.json's sizes, where it gives them, against the binaries'.
func (r *Runner) checkHF() error {
	hfPath := filepath.Join(r.cfg.Dir, "config.json")
	switch bc := r.bc; {
	case bc.HFHeadDim > 0 && bc.HFHeadDim != r.hd:
		return r.errf("%s: head_dim is %d but the binaries' KV tensors have head dim %d", hfPath, bc.HFHeadDim, r.hd)
	case bc.HFKVHeads > 0 && bc.HFKVHeads != r.nkv:
		return r.errf("%s: num_key_value_heads is %d but the binaries' KV tensors have %d heads", hfPath, bc.HFKVHeads, r.nkv)
	case bc.HFVocab > 0 && bc.HFVocab < bc.NVocab:
		return r.errf("%s: vocab_size is %d but the logits have %d entries", hfPath, bc.HFVocab, bc.NVocab)
	}
	for _, g := range r.ars {
		if g.p != r.cl-g.ar {
			return r.errf("graph %s: %d past slots, want CL − AR = %d", g.names[len(g.names)-1], g.p, r.cl-g.ar)
		}
	}
	return nil
}

// graphCheck is check's state across the graphs.
type graphCheck struct {
	cfgPath   string
	layerPart map[int]int               // layer → the part holding it
	kvQ       map[string]qnn.TensorInfo // KV input name → first seen (quantisation shared across graphs)
	nVocab    int                       // the logits' width
}

// checkGraph checks graph info, part k of g (the gi-th AR): the part's role (the first takes
// input_ids, the last outputs logits), each input and output, and the layers it holds.
func (r *Runner) checkGraph(gc *graphCheck, gi int, g *arGraph, k int, info qnn.GraphInfo) error {
	p := r.parts[k]
	base := filepath.Base(p.path)
	where := func(t qnn.TensorInfo) string { return fmt.Sprintf("%s: graph %s: %s", base, info.Name, t.Name) }
	_, hasIDs := info.Input("input_ids")
	_, hasLogits := info.Output("logits")
	if gi == 0 {
		p.first, p.last = hasIDs, hasLogits
	} else if p.first != hasIDs || p.last != hasLogits {
		return r.errf("%s: graphs %s and %s do not play the same part", base, r.ars[0].names[k], info.Name)
	}
	if (k == 0) != hasIDs {
		return r.errf("%s: graph %s: only part 1 takes input_ids", base, info.Name)
	}
	if (k == len(r.parts)-1) != hasLogits {
		return r.errf("%s: graph %s: only the last part outputs logits", base, info.Name)
	}
	var layers []int
	for _, t := range info.Inputs {
		l, isK, err := r.checkInput(gc, gi, g, k, info, t, where(t))
		if err != nil {
			return err
		}
		if isK {
			layers = append(layers, l)
		}
	}
	slices.Sort(layers)
	if gi == 0 {
		p.layers = layers
	} else if !slices.Equal(p.layers, layers) {
		return r.errf("%s: graph %s holds layers %v, graph %s %v", base, info.Name, layers, r.ars[0].names[k], p.layers)
	}
	for _, t := range info.Outputs {
		if err := r.checkOutput(gc, g, t, where(t)); err != nil {
			return err
		}
	}
	return nil
}

// checkInput checks input t (named where) of part k of g, the gi-th AR graph: ids, mask, cos/sin,
// a hidden state or a layer's K or V; for a K cache it returns its layer and isK.
func (r *Runner) checkInput(gc *graphCheck, gi int, g *arGraph, k int, info qnn.GraphInfo, t qnn.TensorInfo, where string) (layer int, isK bool, err error) {
	switch {
	case t.Name == "input_ids":
		if t.DataType != qnn.Int32 || !dimsAre(t, 1, g.ar) {
			return 0, false, r.errf("%s is %s %v, want int32 [1,%d]", where, t.DataType, t.Dims, g.ar)
		}
		return 0, false, nil
	case t.Name == "attention_mask":
		if len(t.Dims) != 4 || t.Dims[0] != 1 || t.Dims[1] != 1 || int(t.Dims[2]) != g.ar {
			return 0, false, r.errf("%s has dims %v, want [1,1,%d,CL]", where, t.Dims, g.ar)
		}
		if cl := int(t.Dims[3]); r.cl < 0 {
			r.cl = cl
		} else if cl != r.cl {
			return 0, false, r.errf("%s has %d columns, other graphs %d: the parts are of different context lengths", where, cl, r.cl)
		}
		return 0, false, nil
	case t.Name == "position_ids_cos" || t.Name == "position_ids_sin":
		if len(t.Dims) != 4 || int(t.Dims[2]) != g.ar {
			return 0, false, r.errf("%s has dims %v, want [1,1,%d,rope-dim]", where, t.Dims, g.ar)
		}
		if r.half == 0 {
			r.half = int(t.Dims[3])
		} else if int(t.Dims[3]) != r.half {
			return 0, false, r.errf("%s has %d frequencies, other graphs %d", where, t.Dims[3], r.half)
		}
		return 0, false, nil
	}
	isK, l, in, ok := kvName(t.Name)
	switch {
	case ok && !in:
		return 0, false, r.errf("%s: an output name among the inputs", where)
	case !ok:
		return 0, false, r.checkHidden(g, k, t, where)
	}
	if err := r.checkKV(gc, g, k, info, t, isK, where); err != nil {
		return 0, false, err
	}
	if part, seen := gc.layerPart[l]; seen && gi == 0 && part != k {
		return 0, false, r.errf("layer %d is in two parts", l)
	}
	if gi == 0 {
		gc.layerPart[l] = k
	}
	return l, isK, nil
}

// checkOutput checks output t (named where) of g: no KV input name, and logits [1, AR, n-vocab].
func (r *Runner) checkOutput(gc *graphCheck, g *arGraph, t qnn.TensorInfo, where string) error {
	if _, _, in, ok := kvName(t.Name); ok && in {
		return r.errf("%s: an input name among the outputs", where)
	}
	if t.Name != "logits" {
		return nil
	}
	if len(t.Dims) != 3 || int(t.Dims[1]) != g.ar {
		return r.errf("%s has dims %v, want [1,%d,n-vocab]", where, t.Dims, g.ar)
	}
	switch v := int(t.Dims[2]); {
	case v < 1 || v > modelfile.MaxVocab:
		return r.errf("%s has %d entries per row (at most %d)", where, v, modelfile.MaxVocab)
	case gc.nVocab == 0:
		gc.nVocab = v
	case v != gc.nVocab:
		return r.errf("%s has %d entries per row but other logits %d", where, v, gc.nVocab)
	}
	return nil
}

// fitVocab makes the logits' width the vocabulary, as Genie does (its HTP engine takes it
// from the binaries' logits and samples over the whole row; dialog.context.n-vocab sizes only
// its all-probabilities output): a different n-vocab, and end tokens past the logits, which no
// sampled token can be, are noted at load.
func (r *Runner) fitVocab(gc *graphCheck) {
	bc := r.bc
	if gc.nVocab != bc.NVocab {
		r.log.Warn().Str("model", r.name).Msgf("genie: %s: dialog.context.n-vocab is %d but the logits have %d entries: the vocabulary is the logits' %d, as Genie reads it",
			gc.cfgPath, bc.NVocab, gc.nVocab, gc.nVocab)
		bc.NVocab = gc.nVocab
	}
	for _, id := range bc.EOS {
		if int(id) >= bc.NVocab {
			r.log.Warn().Str("model", r.name).Msgf("genie: end token %d is past the logits' %d entries: it is never sampled, so it never ends a reply (as in Genie); the tokenizer's other end tokens, a stop string or the length end it", id, bc.NVocab)
		}
	}
}

// checkHidden checks t, a hidden-state input of part k of g (named where): [1, AR, hidden], as
// part k − 1 outputs it under the same name.
func (r *Runner) checkHidden(g *arGraph, k int, t qnn.TensorInfo, where string) error {
	if k == 0 {
		return r.errf("%s: part 1 takes only input_ids", where)
	}
	if !dimsAre(t, 1, g.ar, r.hiddenOf(t)) {
		return r.errf("%s has dims %v, want [1,%d,hidden]", where, t.Dims, g.ar)
	}
	prev, ok := g.infos[k-1].Output(t.Name)
	if !ok {
		return r.errf("%s: part %d outputs no tensor of that name (it outputs %s): the hidden state passes between parts by name",
			where, k, graphio.Names(g.infos[k-1].Outputs))
	}
	if prev.DataType != t.DataType || prev.Quant.Scale != t.Quant.Scale || prev.Quant.Offset != t.Quant.Offset || !slices.Equal(prev.Dims, t.Dims) {
		return r.errf("%s is %s %v (scale %g, offset %d) but part %d outputs %s %v (scale %g, offset %d)", where,
			t.DataType, t.Dims, t.Quant.Scale, t.Quant.Offset, k, prev.DataType, prev.Dims, prev.Quant.Scale, prev.Quant.Offset)
	}
	return nil
}

// checkKV checks t, a past_{key,value}_<l>_in input (a key when isK; named where) of graph info,
// part k of g, against its _out output and the other graphs' caches: one quantisation, n_kv
// heads of head dim, g's past slots and AR new rows.
func (r *Runner) checkKV(gc *graphCheck, g *arGraph, k int, info qnn.GraphInfo, t qnn.TensorInfo, isK bool, where string) error {
	out, ok := info.Output(kvOut(t.Name))
	if !ok {
		return r.errf("%s has no output %s", where, kvOut(t.Name))
	}
	if out.DataType != t.DataType || out.Quant.Scale != t.Quant.Scale || out.Quant.Offset != t.Quant.Offset {
		return r.errf("%s: %s is %s (scale %g, offset %d) but %s is %s (scale %g, offset %d): the _in/_out KV pairs must share their quantisation (they share one cache)",
			filepath.Base(r.parts[k].path), t.Name, t.DataType, t.Quant.Scale, t.Quant.Offset, out.Name, out.DataType, out.Quant.Scale, out.Quant.Offset)
	}
	if f, ok := gc.kvQ[t.Name]; ok && (f.DataType != t.DataType || f.Quant.Scale != t.Quant.Scale || f.Quant.Offset != t.Quant.Offset) {
		return r.errf("%s is quantised differently in the graphs of different AR (scale %g/%g, offset %d/%d)", where,
			f.Quant.Scale, t.Quant.Scale, f.Quant.Offset, t.Quant.Offset)
	} else if !ok {
		gc.kvQ[t.Name] = t
	}
	if len(t.Dims) != 4 || t.Dims[1] != 1 {
		return r.errf("%s has dims %v, want [H,1,d,P] (keys) or [H,1,P,d] (values)", where, t.Dims)
	}
	h, d, pp := int(t.Dims[0]), int(t.Dims[2]), int(t.Dims[3])
	od, oa := int(out.Dims[2]), int(out.Dims[3])
	if !isK {
		d, pp, od, oa = pp, d, oa, od
	}
	if r.nkv == 0 {
		r.nkv, r.hd = h, d
	}
	if h != r.nkv || d != r.hd || od != d || oa != g.ar || int(out.Dims[0]) != h {
		return r.errf("%s has dims %v and %s %v: want %d heads of %d and %d new rows", where, t.Dims, out.Name, out.Dims, r.nkv, r.hd, g.ar)
	}
	if g.p == 0 {
		g.p = pp
	} else if pp != g.p {
		return r.errf("%s has %d past slots, other caches %d", where, pp, g.p)
	}
	return nil
}

// hiddenOf reads the hidden size off a hidden-state tensor (its last dim) and remembers it.
func (r *Runner) hiddenOf(t qnn.TensorInfo) int {
	if len(t.Dims) == 3 && r.hidden == 0 {
		r.hidden = int(t.Dims[2])
	}
	return r.hidden
}

func dimsAre(t qnn.TensorInfo, dims ...int) bool {
	if len(t.Dims) != len(dims) {
		return false
	}
	for i, d := range dims {
		if int(t.Dims[i]) != d {
			return false
		}
	}
	return true
}

func kvOut(in string) string { return strings.TrimSuffix(in, "_in") + "_out" }

// setup allocates the cache (one K and one V buffer per layer, viewed by every graph with its
// own stride), every graph's other tensors (a hidden state's output and the next part's input
// share one buffer) and the RoPE table.
func (r *Runner) setup() error {
	kt, _ := r.ars[0].infos[r.partOf(0)].Input("past_key_0_in")
	var err error
	if r.kvE, err = graphio.ElemOf(kt); err != nil {
		return r.errf("%s: %v", kt.Name, err)
	}
	r.es = r.kvE.Size()
	r.maxP = r.cl - r.ars[0].ar
	r.slots = r.maxP
	r.Batcher = slotpool.NewBatcher(&r.life, r.slots, slotpool.MaxSequences, r.cache)
	n := r.nkv * r.hd * r.maxP * r.es
	zero := make([]byte, r.es) // the empty slot: the zero point's code
	r.kvE.Put(zero, []float32{0})
	for range 2 * r.layers {
		b, err := r.rt.AllocPool(n)
		if err != nil {
			return fmt.Errorf("genie: KV cache: %w", err)
		}
		bb := b.Bytes()[:n]
		for i := 0; i < len(bb); i += r.es {
			copy(bb[i:], zero)
		}
		r.kv = append(r.kv, b)
	}
	k, v := make([][]byte, r.layers), make([][]byte, r.layers)
	for l := range r.layers {
		k[l], v[l] = r.kv[2*l].Bytes()[:n], r.kv[2*l+1].Bytes()[:n]
	}
	// The prompt graphs' layout first: prompts come first.
	r.kc = slotpool.NewCache(k, v, r.nkv, r.hd, r.es, r.cl-r.ars[len(r.ars)-1].ar, writeback.Workers())
	for _, g := range r.ars {
		if err := r.setupGraph(g); err != nil {
			return err
		}
	}
	r.ropeTable()
	return nil
}

// partOf is the index of the part holding layer l.
func (r *Runner) partOf(l int) int {
	for i, p := range r.parts {
		if slices.Contains(p.layers, l) {
			return i
		}
	}
	return -1
}

func (r *Runner) setupGraph(g *arGraph) error {
	g.kOut, g.vOut = make([][]byte, r.layers), make([][]byte, r.layers)
	for _, info := range g.infos {
		for _, t := range append(slices.Clip(info.Inputs), info.Outputs...) {
			if _, _, in, ok := kvName(t.Name); ok && in {
				continue
			}
			if g.bufs[t.Name] != nil {
				continue // a shared tensor (mask, cos, sin in every part; a hidden state both sides)
			}
			b, err := r.rt.Alloc(t.Bytes())
			if err != nil {
				return fmt.Errorf("genie: graph %s: %s: %w", info.Name, t.Name, err)
			}
			g.bufs[t.Name] = b
			var e graphio.Elem
			if e, err = graphio.ElemOf(t); err != nil {
				return r.errf("graph %s: %s: %v", info.Name, t.Name, err)
			}
			switch t.Name {
			case "input_ids":
				g.idsE = e
			case "attention_mask":
				g.maskE = e
				if g.masks, err = graphio.NewMask(e, graphio.MaskAdditive); err != nil {
					return r.errf("graph %s: attention_mask: %v", info.Name, err)
				}
			case "position_ids_cos":
				g.cosE = e
			case "position_ids_sin":
				g.sinE = e
			case "logits":
				if g.logits, err = graphio.Logits(e, b.Bytes()[:t.Bytes()]); err != nil {
					return r.errf("graph %s: logits: %v", info.Name, err)
				}
			default:
				if isK, l, _, ok := kvName(t.Name); ok {
					if isK {
						g.kOut[l] = b.Bytes()[:t.Bytes()]
					} else {
						g.vOut[l] = b.Bytes()[:t.Bytes()]
					}
				}
			}
		}
	}
	g.rowsE = make([]float32, 2*g.ar*r.half)
	g.ids = make([]int32, g.ar)
	return nil
}

// ropeTable is cos and sin of position·inv_freq for every position of the window, under the
// bundle's scaling (LongRoPE: the factors for the context CL, and cos and sin times the attention
// factor), in float64 rounded to float32 (RoPE applied split-half, d/2 unique frequencies:
// docs/genie.md).
func (r *Runner) ropeTable() {
	rp := r.bc.Rope
	r.inv = rp.Scaling.InvFreq(r.hd, rp.Theta, r.cl) // r.half of them: check made r.hd = 2·r.half
	r.ropeAF = rp.Scaling.Attention()
	r.rope = make([]float32, 2*r.cl*r.half)
	for p := range r.cl {
		r.ropeAngles(p, r.rope[p*r.half:(p+1)*r.half], r.rope[(r.cl+p)*r.half:(r.cl+p+1)*r.half])
	}
}

// ropeRow writes position p's cos and sin rows: from the table within the window, computed the
// same way past it (a shifted sequence's positions go on up to MaxPositions).
func (r *Runner) ropeRow(p int, cos, sin []float32) {
	if p < r.cl {
		copy(cos, r.rope[p*r.half:(p+1)*r.half])
		copy(sin, r.rope[(r.cl+p)*r.half:(r.cl+p+1)*r.half])
		return
	}
	r.ropeAngles(p, cos, sin)
}

func (r *Runner) ropeAngles(p int, cos, sin []float32) {
	for i, f := range r.inv {
		a := float64(p) * f
		cos[i], sin[i] = float32(math.Cos(a)*r.ropeAF), float32(math.Sin(a)*r.ropeAF)
	}
}

// MaxPositions is config.json's max_position_embeddings (0: the bundle has none), the most
// positions a shifted sequence may reach (inference.ContextShifter; Shift is the slot pool's).
func (r *Runner) MaxPositions() int { return r.bc.MaxPositions }

// bind builds every graph call (again after a reload).
func (r *Runner) bind() error {
	for _, g := range r.ars {
		g.calls = make([]*qnn.Call, len(r.parts))
		for k, p := range r.parts {
			gr, err := p.ctx.Graph(g.names[k])
			if err != nil {
				return fmt.Errorf("genie: %w", err)
			}
			var in, out []qnn.Binding
			for _, t := range g.infos[k].Inputs {
				b := g.bufs[t.Name]
				if isK, l, _, ok := kvName(t.Name); ok {
					b = r.kv[2*l]
					if !isK {
						b = r.kv[2*l+1]
					}
				}
				in = append(in, qnn.Binding{Name: t.Name, Buffer: b})
			}
			for _, t := range g.infos[k].Outputs {
				out = append(out, qnn.Binding{Name: t.Name, Buffer: g.bufs[t.Name]})
			}
			if g.calls[k], err = gr.Bind(in, out); err != nil {
				return fmt.Errorf("genie: binding %s of %s: %w", g.names[k], filepath.Base(p.path), err)
			}
		}
	}
	return nil
}

// Info describes the model: the context is the AR-1 graphs' past, CL − 1 (CL − the smallest AR).
func (r *Runner) Info() inference.ModelInfo {
	return inference.ModelInfo{Name: r.name, VocabSize: r.bc.NVocab, ContextLen: r.slots, PrefillWindow: r.ars[len(r.ars)-1].ar,
		BOS: r.bc.BOS, EOS: slices.Clone(r.bc.EOS)}
}

// Contract names the runner's model contract, "genie", as a QHexRT runner's
// Contract names its bundle's (bench keys its goals on it).
func (r *Runner) Contract() string { return "genie" }

// Defaults are dialog.sampler's values, the model's defaults when a request sets none.
func (r *Runner) Defaults() Sampler { return r.bc.Sampler }

// SetEndTokens replaces the end tokens Info reports (the server's end-token rule).
func (r *Runner) SetEndTokens(ids []int32) { r.bc.EOS = slices.Clone(ids) }

// BufferBytes is the runtime's buffer memory (graph I/O and KV).
func (r *Runner) BufferBytes() int64 { return r.rt.BufferBytes() }

// Tokenizer is the bundle's tokenizer.json.
func (r *Runner) Tokenizer() string { return r.bc.Tokenizer }

// reload recreates the contexts and calls; buffers stay, the pool's rows are lost.
func (r *Runner) reload() error {
	r.closeGraphs()
	if err := r.loadContexts(); err != nil {
		return err
	}
	return r.bind()
}

func (r *Runner) closeGraphs() {
	for _, g := range r.ars {
		for i, c := range g.calls {
			if c != nil {
				c.Close()
				g.calls[i] = nil
			}
		}
	}
	for _, p := range r.parts {
		if p.ctx != nil {
			p.ctx.Close()
			p.ctx = nil
		}
	}
}

// Close releases the calls, contexts and buffers.
func (r *Runner) Close() error {
	if !r.life.Close() {
		return nil
	}
	if r.kc != nil {
		r.kc.Close() // finishes the write-back
	}
	r.closeGraphs()
	for _, g := range r.ars {
		for _, b := range g.bufs {
			b.Free()
		}
	}
	for _, b := range r.kv {
		b.Free()
	}
	if r.cfg.OwnRuntime {
		return r.rt.Close()
	}
	return nil
}

// Stats returns the counters (graphs by name, every part's call counts) as of the end of the
// last call; safe from any goroutine.
func (r *Runner) Stats() plan.Stats { return r.board.Load() }

// TimeThreadCPU makes the runner read the calling thread's CPU time around
// each graph call, into Stats (GraphStats.CPU); call it before the first
// call. Off by default: two system calls per graph call.
func (r *Runner) TimeThreadCPU() { r.life.ThreadCPU = true }

// GraphTotals implements inference.GraphTimer (a part's graph is one execute per call).
func (r *Runner) GraphTotals() []inference.GraphTotal { return r.board.Totals(nil) }
