package lease

import "github.com/prometheus/client_golang/prometheus"

// Metrics are a node's lease metrics. A nil *Metrics records nothing.
//
//	slogfeed_cluster_shards_owned                     shards this node may act on
//	slogfeed_cluster_shards_lapsed                    shards whose lease this node holds but renewed too long ago to act on
//	slogfeed_cluster_members_live                     live members this node sees
//	slogfeed_cluster_kv_healthy                       1 while this node's lease writes succeed
//	slogfeed_cluster_lease_renewals_total{result}     renewals: ok, conflict (lost), error
//	slogfeed_cluster_lease_claims_total{kind}         claims won: free, takeover (of an expired lease)
//	slogfeed_cluster_lease_releases_total             leases given back (rebalancing, shutdown)
type Metrics struct {
	owned    prometheus.Gauge
	lapsed   prometheus.Gauge
	live     prometheus.Gauge
	healthy  prometheus.Gauge
	renewals *prometheus.CounterVec
	claims   *prometheus.CounterVec
	releases prometheus.Counter
}

// NewMetrics registers the lease metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		owned: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slogfeed_cluster_shards_owned", Help: "Shards this node owns (may poll and run pipes of).",
		}),
		lapsed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slogfeed_cluster_shards_lapsed", Help: "Shards whose lease this node holds but could not renew in time to act on (lapsed; owned again if a renewal succeeds).",
		}),
		live: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slogfeed_cluster_members_live", Help: "Live cluster members as this node sees them.",
		}),
		healthy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slogfeed_cluster_kv_healthy", Help: "1 while this node's lease writes succeed, else 0.",
		}),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slogfeed_cluster_lease_renewals_total", Help: "Lease renewals by result (ok, conflict, error).",
		}, []string{"result"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slogfeed_cluster_lease_claims_total", Help: "Leases claimed, of free shards or taken over after expiry.",
		}, []string{"kind"}),
		releases: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slogfeed_cluster_lease_releases_total", Help: "Leases given back.",
		}),
	}
	reg.MustRegister(m.owned, m.lapsed, m.live, m.healthy, m.renewals, m.claims, m.releases)
	for _, r := range []string{"ok", "conflict", "error"} {
		m.renewals.WithLabelValues(r)
	}
	for _, k := range []string{"free", "takeover"} {
		m.claims.WithLabelValues(k)
	}
	return m
}

func (m *Metrics) renewal(result string) {
	if m != nil {
		m.renewals.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) claim(takeover bool) {
	if m == nil {
		return
	}
	k := "free"
	if takeover {
		k = "takeover"
	}
	m.claims.WithLabelValues(k).Inc()
}

func (m *Metrics) release() {
	if m != nil {
		m.releases.Inc()
	}
}

func (m *Metrics) state(owned, lapsed, live int, healthy bool) {
	if m == nil {
		return
	}
	m.owned.Set(float64(owned))
	m.lapsed.Set(float64(lapsed))
	m.live.Set(float64(live))
	h := 0.0
	if healthy {
		h = 1
	}
	m.healthy.Set(h)
}
