package web

import (
	"net/http"
)

// FleetView is GET /api/v1/fleet: every feed summed up, as the feeds
// page shows it above the list.
type FleetView struct {
	Feeds    int   `json:"feeds"`
	Remote   int   `json:"remote"`
	Polls    int64 `json:"polls"`
	Hits     int64 `json:"hits"`
	Erroring int   `json:"erroring"`
	// Starved counts the remote feeds overdue by more than
	// feedlist.StarvedLag: the feeds whose planned fetch is that far
	// past and not yet made (counted now from the live aggregator, else
	// as counted at most feedlist.StarvedEvery ago).
	Starved int `json:"starved"`
	// HitPct is the share of all polls that found something new
	// (absent before any poll).
	HitPct *float64 `json:"hit_pct,omitempty"`
	// LatencyFeeds counts the feeds with a measured use latency, and
	// MeanLatencyS gives the quantiles over them of each one's mean, in
	// seconds (absent without any).
	LatencyFeeds int            `json:"latency_feeds"`
	MeanLatencyS *LatencyQuants `json:"mean_latency_s,omitempty"`
}

// LatencyQuants are quantiles of a distribution of latencies.
type LatencyQuants struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// fleet answers GET /api/v1/fleet. On the bbolt store it reads no feed
// record: the aggregates are kept up to date by the writes.
func (a *api) fleet(w http.ResponseWriter, r *http.Request) {
	s, err := a.fleetCount.Fleet(a.store, a.agg, a.now())
	if err != nil {
		a.internal(w, err)
		return
	}
	v := FleetView{Feeds: s.Feeds, Remote: s.Remote, Polls: s.Polls, Hits: s.Hits, Erroring: s.Erroring,
		Starved: s.Starved, LatencyFeeds: s.LatencyFeeds}
	if s.Polls > 0 {
		v.HitPct = &s.HitPct
	}
	if s.LatencyFeeds > 0 {
		v.MeanLatencyS = &LatencyQuants{P50: s.MeanP50, P90: s.MeanP90, P99: s.MeanP99, Max: s.MeanMax}
	}
	respondJSON(w, http.StatusOK, v)
}
