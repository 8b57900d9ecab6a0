package aggregator

import (
	"sync"

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
//
// and, once the service is attached (Service.SetMetrics), its Ownership:
//
//	slogfeed_owned_feeds_pending          feeds of this node's shards listed and
//	                                      not scheduled yet (a takeover loading)
//	slogfeed_owned_feeds_deferred         feeds scheduled from their shard's digest
//	                                      whose records are not read yet
//	slogfeed_owned_feeds_failed           feeds of this node's shards whose policy
//	                                      cannot be built (tried at each resync)
//	slogfeed_owned_feeds_parked           feeds of shards whose lease lapsed, kept
//	                                      but not fetched until a renewal (lapse.go)
//	slogfeed_shard_change_loading         1 while the last change of this node's
//	                                      shards is not loaded, else 0
//	slogfeed_shard_change_load_seconds    how long the last change that was loaded
//	                                      took, from the change seen to its feeds
//	                                      all scheduled
//
// A single node (no cluster) answers 0 to each.
type Metrics struct {
	reg     prometheus.Registerer
	fetches *prometheus.CounterVec
	items   prometheus.Counter
	latency prometheus.Histogram
	owning  sync.Once
}

// NewMetrics registers the aggregator's metrics on reg. sched may be nil
// (then the queue gauges are not registered); rate is the configured fetch
// budget.
func NewMetrics(reg prometheus.Registerer, sched *schedule.Scheduler, rate float64) *Metrics {
	m := &Metrics{
		reg: reg,
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

// watchOwnership registers the gauges of a service's Ownership, once.
func (m *Metrics) watchOwnership(own func() OwnershipStatus) {
	if m == nil || m.reg == nil {
		return
	}
	m.owning.Do(func() {
		m.reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "slogfeed_owned_feeds_pending", Help: "Feeds of this node's shards listed and not scheduled yet.",
			}, func() float64 { return float64(own().Pending) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "slogfeed_owned_feeds_deferred", Help: "Feeds scheduled from their shard's schedule digest whose records (policy states) are not read yet.",
			}, func() float64 { return float64(own().Deferred) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "slogfeed_owned_feeds_failed", Help: "Feeds of this node's shards whose policy cannot be built (tried again at each resync).",
			}, func() float64 { return float64(own().Failed) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "slogfeed_owned_feeds_parked", Help: "Feeds of shards whose lease lapsed (not renewed in time, no other holder seen): kept with their learned state, not fetched until a renewal.",
			}, func() float64 { return float64(own().Parked) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "slogfeed_shard_change_loading", Help: "1 while the last change of this node's shards is not loaded (feeds of its shards not all scheduled), else 0.",
			}, func() float64 {
				if own().Loading() {
					return 1
				}
				return 0
			}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "slogfeed_shard_change_load_seconds", Help: "Seconds from the last loaded change of this node's shards to every feed of its shards scheduled.",
			}, func() float64 { return own().Took.Seconds() }),
		)
	})
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
