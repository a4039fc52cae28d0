package server

import "github.com/prometheus/client_golang/prometheus"

// metrics are the HTTP-level series; the engine registers its own on the
// same registry.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
	// streamTimeouts counts streams dropped after Options.StreamWriteTimeout.
	streamTimeouts prometheus.Counter
	compile        prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
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
		Help: "Streams dropped because the client stopped reading for server.stream_write_timeout.",
	})
	reg.MustRegister(m.requests, m.duration, m.inFlight, m.streamTimeouts, m.compile)
	return m
}
