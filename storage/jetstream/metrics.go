package jetstream

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the JetStream store's Prometheus metrics. A nil *Metrics
// records nothing.
//
//	slogfeed_jetstream_publish_seconds{op="items|observation"}  publish → acknowledged, per call
//	slogfeed_jetstream_kv_writes_total{bucket,result}           KV writes: ok, conflict (lost a
//	                                                            compare-and-set), error
//
// KV writes per poll is rate(slogfeed_jetstream_kv_writes_total[5m]) /
// rate(slogfeed_fetches_total[5m]).
type Metrics struct {
	publish  *prometheus.HistogramVec
	kvWrites *prometheus.CounterVec
}

// NewMetrics registers the store's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		publish: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "slogfeed_jetstream_publish_seconds",
			Help:    "Time from publishing to JetStream's acknowledgement, per store call.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5 ms … 16 s
		}, []string{"op"}),
		kvWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slogfeed_jetstream_kv_writes_total", Help: "KV writes by bucket and result (ok, conflict, error).",
		}, []string{"bucket", "result"}),
	}
	reg.MustRegister(m.publish, m.kvWrites)
	for _, b := range []string{DefsBucket, IndexBucket} {
		for _, r := range []string{"ok", "conflict", "error"} {
			m.kvWrites.WithLabelValues(b, r)
		}
	}
	return m
}

func (m *Metrics) published(op string, since time.Time) {
	if m != nil {
		m.publish.WithLabelValues(op).Observe(time.Since(since).Seconds())
	}
}

// kvWrite counts one KV write's outcome and returns err unchanged.
func (m *Metrics) kvWrite(bucket string, err error) error {
	if m == nil {
		return err
	}
	r := "ok"
	switch {
	case IsConflict(err):
		r = "conflict"
	case err != nil:
		r = "error"
	}
	m.kvWrites.WithLabelValues(bucket, r).Inc()
	return err
}
