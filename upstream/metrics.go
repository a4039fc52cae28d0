package upstream

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the relay's series, labelled by the served model id. A nil
// *Metrics records nothing.
type Metrics struct {
	requests *prometheus.CounterVec
	errors   *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	bytes    *prometheus.CounterVec
}

// NewMetrics registers the relay's series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hexserve_upstream_requests_total",
			Help: "Requests forwarded to upstream models, by model and the status the client got (499: it left first).",
		}, []string{"model", "status"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hexserve_upstream_errors_total",
			Help: "Upstream failures by model and kind: unreachable, timeout, status (it answered >= 400), stream (it broke off a stream or sent an event that is not JSON), invalid (a 2xx reply that is not what was asked), size (a reply over 64 MiB), memory (server.relay_memory), busy (max_in_flight), cancelled (the client left).",
		}, []string{"model", "kind"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hexserve_upstream_latency_seconds",
			Help:    "Time from forwarding a request to the upstream's response headers, by model.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14), // 1 ms … 150 s
		}, []string{"model"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hexserve_upstream_bytes_total",
			Help: "Bytes exchanged with upstream models, by model and direction (sent, received).",
		}, []string{"model", "direction"}),
	}
	reg.MustRegister(m.requests, m.errors, m.latency, m.bytes)
	return m
}

func (m *Metrics) request(model, status string) {
	if m != nil {
		m.requests.WithLabelValues(model, status).Inc()
	}
}

func (m *Metrics) failure(model, kind string) {
	if m != nil {
		m.errors.WithLabelValues(model, kind).Inc()
	}
}

func (m *Metrics) observeLatency(model string, d time.Duration) {
	if m != nil {
		m.latency.WithLabelValues(model).Observe(d.Seconds())
	}
}

func (m *Metrics) addBytes(model, direction string, n int) {
	if m != nil && n > 0 {
		m.bytes.WithLabelValues(model, direction).Add(float64(n))
	}
}
