package aggregator

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// Metrics are the aggregator's Prometheus metrics. A nil *Metrics records
// nothing.
//
//	slogfeed_fetches_total{result="hit|miss|not_modified|error"}
//	slogfeed_items_total                  new items stored
//	slogfeed_use_latency_seconds          publish → fetched, per new item
//	slogfeed_queue_feeds                  feeds in the scheduler
//	slogfeed_inflight_fetches             polls under way: fetching, or waiting
//	                                      for their write to be durable
//	slogfeed_fetch_budget_per_second      the configured budget (0 = unlimited);
//	                                      budget use = rate(slogfeed_fetches_total[1m]) / this
type Metrics struct {
	fetches *prometheus.CounterVec
	items   prometheus.Counter
	latency prometheus.Histogram
}

// NewMetrics registers the aggregator's metrics on reg. sched may be nil
// (then the queue gauges are not registered); rate is the configured fetch
// budget.
func NewMetrics(reg prometheus.Registerer, sched *schedule.Scheduler, rate float64) *Metrics {
	m := &Metrics{
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slogfeed_fetches_total", Help: "Feed fetches by result.",
		}, []string{"result"}),
		items: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slogfeed_items_total", Help: "New items stored by fetches.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "slogfeed_use_latency_seconds",
			Help:    "Time from an item's publish to its fetch.",
			Buckets: prometheus.ExponentialBuckets(0.25, 2, 20), // 0.25 s … ~36 h
		}),
	}
	reg.MustRegister(m.fetches, m.items, m.latency,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "slogfeed_fetch_budget_per_second", Help: "Configured fetch budget (0 = unlimited).",
		}, func() float64 { return rate }))
	if sched != nil {
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "slogfeed_queue_feeds", Help: "Feeds in the scheduler's queue.",
			}, func() float64 { return float64(sched.Len()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "slogfeed_inflight_fetches", Help: "Polls under way: fetching, or fetched and waiting for their write to be durable.",
			}, func() float64 { return float64(sched.InFlight()) }),
		)
	}
	for _, r := range []string{"hit", "miss", "not_modified", "error"} {
		m.fetches.WithLabelValues(r)
	}
	return m
}

func (m *Metrics) observe(o storage.Observation, notModified bool) {
	if m == nil {
		return
	}
	switch {
	case o.Hit:
		m.fetches.WithLabelValues("hit").Inc()
	case notModified:
		m.fetches.WithLabelValues("not_modified").Inc()
	default:
		m.fetches.WithLabelValues("miss").Inc()
	}
	m.items.Add(float64(len(o.Published)))
	for _, l := range o.LatencyS {
		m.latency.Observe(l)
	}
}

func (m *Metrics) failed() {
	if m == nil {
		return
	}
	m.fetches.WithLabelValues("error").Inc()
}
