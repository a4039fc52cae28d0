package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/kvstore"
	"github.com/hexserve/hexserve/overflow"
	"github.com/hexserve/hexserve/registry"
	"github.com/hexserve/hexserve/server"
)

// npuTurn is shared by the QNN runtimes of every model this process loads:
// there is one NPU, and their graph calls take turns on it (qnn.Turn).
var npuTurn qnn.Turn

// loaded is one loaded model: the runner, its engine and KV store, what the
// server sees of it, and its metrics (unregistered when it is unloaded).
type loaded struct {
	model   inference.Model
	engine  *inference.Engine
	store   *kvstore.Store // nil: none
	srv     *server.Model
	metrics *trackedRegisterer
	log     zerolog.Logger
}

// Close stops the engine, saves the KV store and closes the model.
func (l *loaded) Close() error {
	l.engine.Close()
	var errs []error
	if l.store != nil {
		if err := l.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("saving the KV store: %w", err))
		}
	}
	if err := l.model.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing the model: %w", err))
	}
	l.metrics.unregisterAll()
	err := errors.Join(errs...)
	if err != nil {
		l.log.Warn().Err(err).Msg("unloading the model")
	}
	return err
}

// catalog is the server's view of the configured models (server.Catalog)
// over a registry that loads them on demand. Registry keys are the entries'
// indexes: a single model without an id gets the one its manifest names at
// its first load.
type catalog struct {
	cfg     config.Config
	entries []config.Model
	details []server.ModelDetails
	load    modelLoader
	prom    prometheus.Registerer
	log     zerolog.Logger
	reg     *registry.Registry[*loaded]
	single  bool // one model: loaded at start and never unloaded

	mu         sync.Mutex
	ids        []string // served ids ("" until known)
	contextLen []int    // probed at start (0: unknown), the engine's once loaded
	generated  []string // the files' own note that the weights are random ("": real weights)
	preloading []bool
}

func newCatalog(cfg config.Config, load modelLoader, prom prometheus.Registerer, log zerolog.Logger) *catalog {
	c := &catalog{cfg: cfg, entries: cfg.Entries(), load: load, prom: prom, log: log}
	n := len(c.entries)
	c.single = n == 1
	c.details, c.ids, c.contextLen, c.preloading = make([]server.ModelDetails, n), make([]string, n), make([]int, n), make([]bool, n)
	c.generated = make([]string, n)
	var entries []registry.Entry[*loaded]
	for i, e := range c.entries {
		c.ids[i] = e.ID
		name := e.ID
		if name == "" {
			name = filepath.Base(e.Location())
		}
		var d server.ModelDetails
		if err := checkModelPath(e.Location()); err != nil {
			log.Warn().Err(err).Msg("this model cannot load until the path is fixed") // one line, not one per look
		} else {
			if d, err = modelDetails(e.Location(), name); err != nil {
				log.Warn().Err(err).Str("model", e.Location()).Msg("model details for the listings")
			}
			// What the files tell without loading: a failure leaves it unknown
			// (the load, which reports it, may still succeed or fail as it will).
			if pr, err := probeModel(e); err != nil {
				log.Warn().Err(err).Str("model", e.Location()).Msg("probing the model for the listings")
			} else {
				c.contextLen[i] = pr.ContextLen
				c.generated[i] = pr.Generated
				d.Size += pr.Outside
				if pr.Family != "" {
					d.Family = pr.Family
				}
				if d.Arch = pr.Shape.arch(); d.Arch.Params == 0 {
					d.Arch.Params = namedParams(d.ParameterSize)
				}
			}
		}
		c.details[i] = d
		keep := *e.KeepAlive
		if c.single {
			keep = -1
		}
		entries = append(entries, registry.Entry[*loaded]{ID: strconv.Itoa(i), Estimate: d.Size, KeepAlive: keep, Load: c.loader(i)})
	}
	loads := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hexserve_model_load_seconds",
		Help: "Model loads by model and outcome (ok, error).", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)},
		[]string{"model", "outcome"})
	unloads := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hexserve_model_unloads_total",
		Help: "Model unloads by model and reason (idle: keep_alive; evicted: room for another; closed: shutdown)."},
		[]string{"model", "reason"})
	prom.MustRegister(loads, unloads, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hexserve_models_loaded",
		Help: "Models loaded now."}, func() float64 { return float64(c.loadedCount()) }))
	c.reg = registry.New(registry.Options{MaxLoaded: cfg.Server.MaxLoadedModels, Memory: int64(cfg.Engine.ModelMemory),
		OnLoad: func(key string, took time.Duration, err error) {
			outcome := "ok"
			if err != nil {
				outcome = "error"
				if !c.single { // a single model's failure stops the server, which logs it
					log.Error().Err(err).Str("model", c.idOf(key)).Msg("model load failed")
				}
			}
			loads.WithLabelValues(c.idOf(key), outcome).Observe(took.Seconds())
		},
		OnUnload: func(key, reason string) {
			unloads.WithLabelValues(c.idOf(key), reason).Inc()
			log.Info().Str("model", c.idOf(key)).Str("reason", reason).Msg("model unloaded")
		}}, entries)
	return c
}

func (c *catalog) idOf(key string) string {
	i, _ := strconv.Atoi(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ids[i]
}

func (c *catalog) loadedCount() int {
	n := 0
	for _, st := range c.reg.States() {
		if st.Loaded {
			n++
		}
	}
	return n
}

// loader loads entry i: the runner, the KV store, the engine (its metrics
// labelled with the model id).
func (c *catalog) loader(i int) func(context.Context) (*loaded, int64, error) {
	return func(context.Context) (*loaded, int64, error) {
		start := time.Now()
		e := c.entries[i]
		cfg := c.cfg
		cfg.Model = e
		cfg.Engine.QueueLength, cfg.Engine.Timeout = e.QueueLength, e.Timeout
		model, tok, tmpl, err := c.load(cfg, c.log)
		if err != nil {
			return nil, 0, fmt.Errorf("model %s failed to load: %w", e.Location(), err)
		}
		info := model.Info()
		c.mu.Lock()
		if c.ids[i] == "" {
			c.ids[i] = config.ModelID(info.Name)
		}
		id := c.ids[i]
		c.contextLen[i] = info.ContextLen
		c.mu.Unlock()
		if c.single { // several models: config.Validate checked the targets
			if err := cfg.Server.CheckModelAliases(id, e.Aliases); err != nil {
				model.Close()
				return nil, 0, err
			}
		}
		log := c.log.With().Str("model", id).Logger()
		kv := cfg.Engine.KVCache
		if !c.single && kv.Dir != "" {
			kv.Dir = filepath.Join(kv.Dir, id) // one spill folder per model
		}
		store, err := openKVStore(kv, model, log)
		if err != nil {
			model.Close()
			return nil, 0, err
		}
		metrics := &trackedRegisterer{Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"model": id}, c.prom)}
		sp := cfg.Engine.Speculative
		ecfg := inference.Config{QueueLen: cfg.Engine.QueueLength, Timeout: cfg.Engine.Timeout, MaxSequences: e.MaxSequences,
			Speculative: inference.Speculative{Enabled: sp.Enabled, PromptLookup: sp.PromptLookup, MaxDraft: sp.MaxDraft},
			Registerer:  metrics, Logger: log.With().Str("component", "engine").Logger()}
		mem, storeMem := c.details[i].Size, int64(0)
		if b, ok := model.(interface{ BufferBytes() int64 }); ok {
			mem += b.BufferBytes()
		}
		if store != nil {
			ecfg.KVStore = store
			storeMem = int64(kv.Memory)
			mem += storeMem
		}
		engine := inference.New(model, tok, ecfg)
		ctxLen := engine.Info().ContextLen // the engine's: a slot pool may hold fewer rows than the model
		c.mu.Lock()
		c.contextLen[i] = ctxLen
		c.mu.Unlock()
		srv := &server.Model{ID: id, Aliases: e.Aliases, AliasGlobs: cfg.Server.ModelAliases, Created: time.Now(), ContextLen: ctxLen,
			Tokenizer: tok, Template: tmpl, Engine: engine, Health: engine.Healthy, Details: c.details[i], Sampling: modelSampling(model, cfg.Sampling),
			ToolFormat: toolFormat(e, tmpl, log),
			Overflow:   overflow.Policy(e.ContextOverflow), Shift: e.ContextShift, Reasoning: reasoningParser(e, tmpl, log)}
		logLoaded(log, time.Since(start), c.details[i].Size, mem-c.details[i].Size-storeMem, storeMem, engine.MaxSequences(), c.generated[i])
		return &loaded{model: model, engine: engine, store: store, srv: srv, metrics: metrics, log: log}, mem, nil
	}
}

// servedIDs are the ids requests name: the local models' (known once
// loaded, when the config gives none) and the upstreams'.
func (c *catalog) servedIDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for _, id := range c.ids {
		if id != "" {
			ids = append(ids, id)
		}
	}
	for _, e := range c.cfg.UpstreamEntries() {
		ids = append(ids, e.ID)
	}
	return ids
}

// index is the entry serving id, or -1.
func (c *catalog) index(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.ids {
		if x == id {
			return i
		}
	}
	return -1
}

// errNoRoom ends a request that waited engine.timeout for its model.
var errNoRoom = errors.New("the model could not be loaded within engine.timeout: the loaded models are busy and there is no room for it (server.max_loaded_models, engine.model_memory); retry shortly")

// Acquire implements server.Catalog.
func (c *catalog) Acquire(ctx context.Context, id string) (*server.Lease, error) {
	i := c.index(id)
	if i < 0 {
		return nil, fmt.Errorf("%w %q", registry.ErrUnknown, id)
	}
	// Waiting for the load, or for a busy model to make room, is bounded
	// like the generation it precedes.
	ctx, cancel := context.WithTimeoutCause(ctx, c.entries[i].Timeout, errNoRoom)
	defer cancel()
	l, err := c.reg.Acquire(ctx, strconv.Itoa(i))
	if errors.Is(err, registry.ErrTooLarge) {
		return nil, fmt.Errorf("%w (engine.model_memory): raise it, or serve a smaller model", err)
	}
	if err != nil {
		return nil, err
	}
	return &server.Lease{Model: l.Model.srv, Loaded: l.Loaded, Release: func(keep *time.Duration) {
		if c.single {
			keep = nil // the one model stays loaded
		}
		l.Release(keep)
	}}, nil
}

// Models implements server.Catalog.
func (c *catalog) Models() []server.ModelState {
	states := c.reg.States()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]server.ModelState, len(states))
	for i, st := range states {
		ms := server.ModelState{ID: c.ids[i], Aliases: c.entries[i].Aliases, AliasGlobs: c.cfg.Server.ModelAliases, ContextLen: c.contextLen[i],
			Details: c.details[i], Preload: c.preloading[i], ExpiresAt: st.Expires}
		switch {
		case st.Loaded:
			ms.Status, ms.Model = server.StatusLoaded, st.Model.srv
		case st.Loading || c.preloading[i]:
			ms.Status = server.StatusLoading
		case st.Err != nil:
			ms.Status, ms.Err = server.StatusFailed, st.Err
		default:
			ms.Status = server.StatusUnloaded
		}
		out[i] = ms
	}
	return out
}

// preload loads the entries marked preload, one after the other. It
// returns the first error (a single model's failure stops the server; with
// several, the others keep serving).
func (c *catalog) preload(ctx context.Context) error {
	var first error
	c.mu.Lock()
	for i, e := range c.entries {
		c.preloading[i] = *e.Preload
	}
	c.mu.Unlock()
	for i, e := range c.entries {
		if !*e.Preload {
			continue
		}
		err := c.reg.Preload(ctx, strconv.Itoa(i))
		c.mu.Lock()
		c.preloading[i] = false
		c.mu.Unlock()
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// loading reports whether a load is in progress.
func (c *catalog) loading() bool {
	for _, st := range c.reg.States() {
		if st.Loading {
			return true
		}
	}
	return false
}

// trackedRegisterer registers a loaded model's collectors and unregisters
// them all when it is unloaded, so a reload can register them again.
type trackedRegisterer struct {
	prometheus.Registerer
	mu sync.Mutex
	cs []prometheus.Collector
}

func (t *trackedRegisterer) Register(c prometheus.Collector) error {
	if err := t.Registerer.Register(c); err != nil {
		return err
	}
	t.mu.Lock()
	t.cs = append(t.cs, c)
	t.mu.Unlock()
	return nil
}

func (t *trackedRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := t.Register(c); err != nil {
			panic(err)
		}
	}
}

func (t *trackedRegisterer) unregisterAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.cs {
		t.Registerer.Unregister(c)
	}
	t.cs = nil
}
