package feedlist

import (
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

func TestSummarise(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var feeds []storage.Feed
	for i := 1; i <= 100; i++ {
		f := storage.Feed{ID: uint64(i), Kind: storage.KindRemote, Polls: 10, Hits: 4,
			LatencySumS: float64(2 * i), LatencyCount: 2} // mean latency i s
		if i%25 == 0 {
			f.LastError = "HTTP 500"
		}
		feeds = append(feeds, f)
	}
	feeds = append(feeds, storage.Feed{ID: 101, Kind: storage.KindSensor, Slug: "lab"})
	next := func(id uint64) (time.Time, bool) {
		if id%20 == 0 {
			return now.Add(-2 * StarvedLag), true
		}
		if id == 101 { // a sensor feed is never starved
			return now.Add(-time.Hour), true
		}
		return now.Add(time.Second), true
	}
	_, got, err := Read(FromFeeds(feeds), Filter{Limit: DefaultLimit}, next, now, true)
	if err != nil {
		t.Fatal(err)
	}
	want := Fleet{Feeds: 101, Remote: 100, Polls: 1000, Hits: 400, Erroring: 4, Starved: 5, HitPct: 40,
		LatencyFeeds: 100, MeanP50: 51, MeanP90: 91, MeanP99: 100, MeanMax: 100}
	if got != want {
		t.Fatalf("Summarise:\n got %+v\nwant %+v", got, want)
	}
	if _, empty, _ := Read(FromFeeds(nil), Filter{Limit: DefaultLimit}, nil, now, true); empty != (Fleet{}) {
		t.Fatal("an empty fleet sums to something")
	}
}

func TestCursorRoundTrip(t *testing.T) {
	for _, id := range []uint64{1, 99, 1 << 40} {
		got, ok := decodeCursor(EncodeCursor(id))
		if !ok || got != id {
			t.Errorf("cursor of %d decodes to %d, %v", id, got, ok)
		}
	}
	for _, bad := range []string{"", "!!", EncodeCursor(0), "ZjE6LTE"} {
		if _, ok := decodeCursor(bad); ok {
			t.Errorf("cursor %q accepted", bad)
		}
	}
}

// The bbolt store keeps summaries and aggregates: lists read them rather than
// decoding every record.
var _ Index = (*storage.Store)(nil)
