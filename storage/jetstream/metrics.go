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
//	slogfeed_jetstream_poll_reads_total{read="record|items"}    reads a poll may make: a feed
//	                                                            record, an items subject's last
//	                                                            sequence (none for an owned feed's
//	                                                            quiet poll)
//	slogfeed_jetstream_feed_id_listings_total                   listings of every feed ID of the
//	                                                            defs bucket (a watch keeps the
//	                                                            set current in between)
//	slogfeed_jetstream_unreadable_total{what="record|observation"}
//	                                                            records and observations a
//	                                                            takeover left out because they
//	                                                            cannot be decoded
//
// KV writes per poll is rate(slogfeed_jetstream_kv_writes_total[5m]) /
// rate(slogfeed_fetches_total[5m]).
type Metrics struct {
	publish    *prometheus.HistogramVec
	kvWrites   *prometheus.CounterVec
	reads      *prometheus.CounterVec
	listings   prometheus.Counter
	unreadable *prometheus.CounterVec
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
	m.reads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "slogfeed_jetstream_poll_reads_total", Help: "Reads of feed records and of items subjects' last sequences.",
	}, []string{"read"})
	m.listings = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "slogfeed_jetstream_feed_id_listings_total", Help: "Listings of every feed ID in the defs bucket.",
	})
	m.unreadable = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "slogfeed_jetstream_unreadable_total", Help: "Records and observations a takeover left out because they cannot be decoded.",
	}, []string{"what"})
	reg.MustRegister(m.publish, m.kvWrites, m.reads, m.listings, m.unreadable)
	m.unreadable.WithLabelValues("record")
	m.unreadable.WithLabelValues("observation")
	m.reads.WithLabelValues("record")
	m.reads.WithLabelValues("items")
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

// read counts one read of a feed record or of an items subject's last
// sequence.
func (m *Metrics) read(what string) {
	if m != nil {
		m.reads.WithLabelValues(what).Inc()
	}
}

// listed counts one listing of every feed ID.
func (m *Metrics) listed() {
	if m != nil {
		m.listings.Inc()
	}
}

// leftOut counts one record or observation a takeover could not decode.
func (m *Metrics) leftOut(what string) {
	if m != nil {
		m.unreadable.WithLabelValues(what).Inc()
	}
}
