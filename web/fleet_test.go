package web

import (
	"reflect"
	"testing"

	"github.com/slogfeed/slogfeed/storage"
)

// GET /api/v1/fleet sums up the feeds, and follows the writes: polls,
// errors cleared, deletions. The starved feeds are counted at once from
// an aggregator that lists its overdue feeds, else by a count that serves
// a few seconds.
func TestFleetEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name    string
		overdue bool
		starved int // after feed 7 is deleted
	}{
		{"counted by a walk", false, 6},
		{"listed by the aggregator", true, 5},
	} {
		t.Run(tc.name, func(t *testing.T) { testFleetEndpoint(t, tc.overdue, tc.starved) })
	}
}

func testFleetEndpoint(t *testing.T, overdue bool, starved int) {
	st, h, agg := listFixtureOf(t, 45, overdue)
	var raw map[string]any
	getJSON(t, h, "/api/v1/fleet", &raw)
	if _, ok := raw["hit_pct"]; ok {
		t.Errorf("hit_pct present before any poll: %v", raw)
	}
	var got FleetView
	getJSON(t, h, "/api/v1/fleet", &got)
	want := FleetView{Feeds: 45, Remote: 45, Erroring: 15, Starved: 6}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fleet %+v, want %+v", got, want)
	}
	// Feeds 1–10 polled 4 times, 1 hit each, a mean latency of i s;
	// feed 3's error cleared; feed 7 (starved) and 9 (erroring) deleted.
	for i := uint64(1); i <= 10; i++ {
		if _, err := st.UpdateFeed(i, func(f *storage.Feed) error {
			f.Polls, f.Hits = 4, 1
			f.LatencySumS, f.LatencyCount = float64(2*i), 2
			if i == 3 {
				f.LastError, f.ErrorCount = "", 0
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []uint64{7, 9} {
		if err := st.DeleteFeed(id); err != nil {
			t.Fatal(err)
		}
		delete(agg.next, id) // unsubscribed: no longer planned
	}
	got = FleetView{}
	getJSON(t, h, "/api/v1/fleet", &got)
	hit := 25.0
	// A count by a walk is a few seconds old at most: the clock has not
	// moved, so it is the first one.
	want = FleetView{Feeds: 43, Remote: 43, Polls: 32, Hits: 8, Erroring: 13, Starved: starved, HitPct: &hit,
		LatencyFeeds: 8, MeanLatencyS: &LatencyQuants{P50: 5, P90: 10, P99: 10, Max: 10}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fleet %+v %+v, want %+v %+v", got, got.MeanLatencyS, want, want.MeanLatencyS)
	}
}
