package server

import (
	"github.com/hexserve/hexserve/grammar"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the HTTP-level series; the engine registers its own on the
// same registry.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
	// streamTimeouts counts responses dropped after Options.StreamWriteTimeout.
	streamTimeouts prometheus.Counter
	compile        prometheus.Histogram
	compileSteps   prometheus.Histogram
	// modelWait is the time requests waited for their model to load.
	modelWait *prometheus.HistogramVec
	// fallbacks counts local models' requests served by an upstream.
	fallbacks *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, cache *grammar.Cache, vocabBytes func() int64) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hexserve_http_requests_total",
			Help: "HTTP requests by route pattern, method and status.",
		}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hexserve_http_request_duration_seconds",
			Help:    "HTTP request latency (streamed responses: until the stream ends) by route pattern and method.",
			Buckets: []float64{.001, .005, .025, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"route", "method"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hexserve_http_requests_in_flight",
			Help: "HTTP requests being served.",
		}),
		compile: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hexserve_schema_compile_seconds",
			Help:    "Structured outputs: compiling a response_format schema or forced tool set to a grammar.",
			Buckets: prometheus.ExponentialBuckets(1e-5, 2, 16), // 10 µs … 0.3 s
		}),
	}
	m.streamTimeouts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hexserve_http_stream_write_timeouts_total",
		Help: "Responses (streams, and whole replies) dropped because the client stopped reading for server.stream_write_timeout.",
	})
	m.modelWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hexserve_model_load_wait_seconds",
		Help:    "Time a request waited for its model to load (requests that found it loaded are not counted), by model.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14), // 10 ms … 82 s
	}, []string{"model"})
	m.compileSteps = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "hexserve_schema_compile_steps",
		Help:    "Structured outputs: the work of compiling a grammar, in the steps structured.compile_budget bounds.",
		Buckets: prometheus.ExponentialBuckets(1e3, 4, 10), // 1e3 … 2.6e8
	})
	m.fallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hexserve_fallbacks_total",
		Help: "Requests for a local model served by its fallback upstream, by model (as requested), upstream and reason.",
	}, []string{"model", "to", "reason"})
	reg.MustRegister(m.requests, m.duration, m.inFlight, m.streamTimeouts, m.compile, m.compileSteps, m.modelWait, m.fallbacks)
	reg.MustRegister(cacheCollector{cache, vocabBytes})
	return m
}

// cacheCollector reports the structured-output cache and the vocabulary
// index at scrape time.
type cacheCollector struct {
	c          *grammar.Cache
	vocabBytes func() int64
}

var (
	cacheBytesDesc = prometheus.NewDesc("hexserve_structured_cache_bytes",
		"Structured outputs: bytes held by kind (pattern: compiled patterns, mask: cached token masks, vocab: the model's vocabulary index); pattern+mask stay within structured.memory.",
		[]string{"kind"}, nil)
	cacheLimitDesc = prometheus.NewDesc("hexserve_structured_cache_limit_bytes",
		"Structured outputs: the cache's byte budget (structured.memory).", nil, nil)
	cacheEntriesDesc = prometheus.NewDesc("hexserve_structured_cache_entries",
		"Structured outputs: compiled patterns and masks in the cache.", nil, nil)
	cacheLookupsDesc = prometheus.NewDesc("hexserve_structured_cache_lookups_total",
		"Structured outputs: cache lookups by result (hit, miss).", []string{"result"}, nil)
	cacheEvictionsDesc = prometheus.NewDesc("hexserve_structured_cache_evictions_total",
		"Structured outputs: entries evicted to stay within structured.memory.", nil, nil)
)

func (c cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{cacheBytesDesc, cacheLimitDesc, cacheEntriesDesc, cacheLookupsDesc, cacheEvictionsDesc} {
		ch <- d
	}
}

func (c cacheCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.c.Stats()
	ch <- prometheus.MustNewConstMetric(cacheBytesDesc, prometheus.GaugeValue, float64(st.PatternBytes), "pattern")
	ch <- prometheus.MustNewConstMetric(cacheBytesDesc, prometheus.GaugeValue, float64(st.MaskBytes), "mask")
	ch <- prometheus.MustNewConstMetric(cacheBytesDesc, prometheus.GaugeValue, float64(c.vocabBytes()), "vocab")
	ch <- prometheus.MustNewConstMetric(cacheLimitDesc, prometheus.GaugeValue, float64(st.MaxBytes))
	ch <- prometheus.MustNewConstMetric(cacheEntriesDesc, prometheus.GaugeValue, float64(st.Entries))
	ch <- prometheus.MustNewConstMetric(cacheLookupsDesc, prometheus.CounterValue, float64(st.Hits), "hit")
	ch <- prometheus.MustNewConstMetric(cacheLookupsDesc, prometheus.CounterValue, float64(st.Misses), "miss")
	ch <- prometheus.MustNewConstMetric(cacheEvictionsDesc, prometheus.CounterValue, float64(st.Evictions))
}
