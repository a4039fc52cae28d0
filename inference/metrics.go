package inference

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// GraphTimer is optionally implemented by a Model that times its graph
// calls. GraphTotals returns cumulative counts and execution time per graph
// (e.g. "prefill", "decode", "lmhead"); the engine exports their increase as
// hexserve_graph_calls_total and hexserve_graph_seconds_total{graph}.
type GraphTimer interface {
	GraphTotals() []GraphTotal
}

// GraphTotal is one graph's cumulative execution count and time, and the
// runner's current estimate of one call of it (learned from recent calls,
// all shards of a step: what the runner's StepCost compares), exported as
// hexserve_graph_call_cost_seconds{graph}; zero until measured.
type GraphTotal struct {
	Graph string
	Calls int64
	Time  time.Duration
	Cost  time.Duration
}

type metrics struct {
	queueDepth      prometheus.Gauge
	running         prometheus.Gauge
	requests        *prometheus.CounterVec
	promptTokens    prometheus.Counter
	cachedTokens    prometheus.Counter
	generatedTokens prometheus.Counter
	ttft            prometheus.Histogram
	tpot            prometheus.Histogram
	hostTime        prometheus.Histogram
	hostShare       prometheus.Histogram
	maskTime        prometheus.Histogram
	graphCalls      *prometheus.CounterVec
	graphSeconds    *prometheus.CounterVec
	graphCost       *prometheus.GaugeVec
	kvHits          prometheus.Counter
	kvMisses        prometheus.Counter
	kvRestored      prometheus.Counter
	verifyCalls     prometheus.Counter
	draftTokens     *prometheus.CounterVec
	activeSeqs      prometheus.Gauge
	stepRows        prometheus.Histogram
	queueWait       prometheus.Histogram
	preemptions     prometheus.Counter
	sharedRows      prometheus.Counter
	shifts          *prometheus.CounterVec
	lastGraph       map[string]*graphSeen // worker only
}

// newMetrics creates the engine's collectors and registers them on r
// (unless r is nil, when they are kept but never exported).
func newMetrics(r prometheus.Registerer) *metrics {
	lat := prometheus.ExponentialBuckets(0.001, 2, 16) // 1 ms … 33 s
	host := prometheus.ExponentialBuckets(1e-6, 2, 16) // 1 µs … 33 ms
	m := &metrics{
		queueDepth:      gauge("hexserve_queue_depth", "Requests waiting for a sequence slot (running sequences excluded)."),
		running:         gauge("hexserve_running_requests", "Requests being generated."),
		requests:        counterVec("hexserve_requests_total", "Finished or refused requests by outcome (finish reason, busy, invalid).", "outcome"),
		promptTokens:    counter("hexserve_prompt_tokens_total", "Prompt tokens of requests that ran."),
		cachedTokens:    counter("hexserve_cached_prompt_tokens_total", "Prompt tokens whose KV rows were reused."),
		generatedTokens: counter("hexserve_generated_tokens_total", "Sampled tokens."),
		ttft:            histogram("hexserve_time_to_first_token_seconds", "From the start of a run to its first token.", lat),
		tpot:            histogram("hexserve_time_per_output_token_seconds", "Decode step time, model and host.", lat),
		hostTime:        histogram("hexserve_host_seconds_per_token", "Host-side time of a decode step (sampling, text, events).", host),
		hostShare: histogram("hexserve_step_host_share", "The host's share of a model step's time (planning, sampling, text, events; the rest is the model's Step call).",
			[]float64{0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1}),
		maskTime:     histogram("hexserve_constraint_seconds_per_token", "Structured outputs: time to sample a token the constraint allows and advance it (check, mask when rejected).", host),
		graphCalls:   counterVec("hexserve_graph_calls_total", "Graph executions by graph.", "graph"),
		graphSeconds: counterVec("hexserve_graph_seconds_total", "Graph execution time by graph.", "graph"),
		graphCost:    gaugeVec("hexserve_graph_call_cost_seconds", "The runner's estimate of one call of each graph, learned from recent calls (what it weighs when choosing one multi-row call or one-row calls).", "graph"),
		kvHits:       counter("hexserve_kv_store_hits_total", "Requests that restored rows from the KV store."),
		kvMisses:     counter("hexserve_kv_store_misses_total", "Requests the KV store had nothing longer than the resident cache for."),
		kvRestored:   counter("hexserve_kv_store_restored_tokens_total", "KV rows copied from the store into the model's cache."),
		verifyCalls:  counter("hexserve_verify_calls_total", "Speculative decoding: multi-token verify calls."),
		draftTokens:  counterVec("hexserve_draft_tokens_total", "Speculative decoding: verified draft tokens by source (prediction, lookup) and result (accepted, rejected).", "source", "result"),
		activeSeqs:   gauge("hexserve_active_sequences", "Sequences (choices of active requests) the model is advancing side by side."),
		stepRows:     histogram("hexserve_step_rows", "Rows (tokens of all sequences) per model step.", prometheus.ExponentialBuckets(1, 2, 9)), // 1 … 256 rows
		queueWait:    histogram("hexserve_queue_wait_seconds", "From Submit to the start of a request's generation.", lat),
		preemptions:  counter("hexserve_preemptions_total", "Sequences released to make room for others' growth, their rows evaluated again later."),
		sharedRows:   counter("hexserve_shared_prefix_rows_total", "Prompt rows a new request shared (Fork) from a live sequence of the same owner instead of evaluating them."),
		shifts:       counterVec("hexserve_context_shifts_total", "Context shifts: a sequence past the window freed a quarter of it, by kind (ring: the oldest rows after the sink evicted in place; reread: the sink and newest rows read again at new positions).", "kind"),
		lastGraph:    map[string]*graphSeen{},
	}
	if r != nil {
		r.MustRegister(m.queueDepth, m.running, m.requests, m.promptTokens, m.cachedTokens,
			m.generatedTokens, m.ttft, m.tpot, m.hostTime, m.hostShare, m.maskTime, m.graphCalls, m.graphSeconds, m.graphCost,
			m.verifyCalls, m.draftTokens, m.activeSeqs, m.stepRows, m.queueWait, m.preemptions, m.sharedRows, m.shifts)
	}
	return m
}

// The engine's collectors: a name and help, and labels or buckets.

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

func histogram(name, help string, buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

// registerKV exports the KV store's counters and size on r (nil: nothing).
func (m *metrics) registerKV(r prometheus.Registerer, s KVStore) {
	if r == nil {
		return
	}
	gauge := func(name, help string, f func(KVStats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(s.Stats()) })
	}
	r.MustRegister(m.kvHits, m.kvMisses, m.kvRestored,
		gauge("hexserve_kv_store_entries", "Sequences held by the KV store in memory.", func(st KVStats) float64 { return float64(st.Entries) }),
		gauge("hexserve_kv_store_bytes", "Bytes of KV rows held by the KV store in memory.", func(st KVStats) float64 { return float64(st.Bytes) }),
		gauge("hexserve_kv_store_disk_entries", "Sequences saved in the KV store's directory.", func(st KVStats) float64 { return float64(st.DiskEntries) }),
		gauge("hexserve_kv_store_disk_bytes", "Bytes of the KV store's files.", func(st KVStats) float64 { return float64(st.DiskBytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "hexserve_kv_store_evictions_total",
			Help: "Entries evicted from memory (to disk when a directory is set)."}, func() float64 { return float64(s.Stats().Evictions) }))
}

// observeGraphs exports the model's graph timings, if it keeps them.
func (m *metrics) observeGraphs(model Model) {
	gt, ok := model.(GraphTimer)
	if !ok {
		return
	}
	for _, g := range gt.GraphTotals() {
		s := m.lastGraph[g.Graph]
		if s == nil {
			s = &graphSeen{calls: m.graphCalls.WithLabelValues(g.Graph), secs: m.graphSeconds.WithLabelValues(g.Graph),
				cost: m.graphCost.WithLabelValues(g.Graph)}
			m.lastGraph[g.Graph] = s
		}
		last := s.last
		if g.Calls >= last.Calls && g.Time >= last.Time { // else: the model reset its counters
			s.calls.Add(float64(g.Calls - last.Calls))
			s.secs.Add((g.Time - last.Time).Seconds())
		}
		s.last = g
		if g.Cost > 0 && g.Cost != last.Cost {
			s.cost.Set(g.Cost.Seconds())
		}
	}
}

// graphSeen is one graph's last totals and its metrics (looked up once: a
// step exports every graph's).
type graphSeen struct {
	last        GraphTotal
	calls, secs prometheus.Counter
	cost        prometheus.Gauge
}
