package aggregator

import (
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

func TestPublishTimes(t *testing.T) {
	at := time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC)
	prev := at.Add(-10 * time.Minute)
	min := func(m float64) time.Time { return at.Add(time.Duration(m * float64(time.Minute))) }
	type item struct {
		date    time.Time
		reading bool
	}
	for _, c := range []struct {
		name      string
		resp      fetcher.Response
		prev      time.Time
		items     []item      // feed order, newest first
		want      []time.Time // estimates, oldest first
		published []time.Time // items' Published afterwards, feed order
	}{
		{
			name:      "phase hint beats everything, others shifted by the same correction",
			resp:      fetcher.Response{Hints: schedule.Hints{Phase: 30 * time.Second, HasPhase: true}, LastModifiedTime: min(-5)},
			prev:      prev,
			items:     []item{{date: min(-2)}, {date: min(-4)}, {}},
			want:      []time.Time{min(-2.5), min(-0.5), min(-0.5)},
			published: []time.Time{min(-2), min(-4), min(-0.5)},
		},
		{
			name:      "phase hint without item dates",
			resp:      fetcher.Response{Hints: schedule.Hints{Phase: time.Minute, HasPhase: true}},
			prev:      prev,
			items:     []item{{}, {}},
			want:      []time.Time{min(-1), min(-1)},
			published: []time.Time{min(-1), min(-1)},
		},
		{
			name:      "Last-Modified for the newest, own dates for the others",
			resp:      fetcher.Response{LastModifiedTime: min(-3), Date: at},
			prev:      prev,
			items:     []item{{date: min(-2)}, {date: min(-6)}, {}},
			want:      []time.Time{min(-6), min(-5), min(-3)},
			published: []time.Time{min(-2), min(-6), min(-5)},
		},
		{
			name:      "Last-Modified without item dates: the first item is the newest",
			resp:      fetcher.Response{LastModifiedTime: min(-3)},
			prev:      prev,
			items:     []item{{}, {}},
			want:      []time.Time{min(-5), min(-3)},
			published: []time.Time{min(-3), min(-5)},
		},
		{
			name:      "Last-Modified equal to Date is a dynamic server's now",
			resp:      fetcher.Response{LastModifiedTime: at, Date: at},
			prev:      prev,
			items:     []item{{date: min(-2)}},
			want:      []time.Time{min(-2)},
			published: []time.Time{min(-2)},
		},
		{
			name:      "Last-Modified equal to Date, no item date: still the best there is",
			resp:      fetcher.Response{LastModifiedTime: at, Date: at},
			prev:      prev,
			items:     []item{{}},
			want:      []time.Time{at},
			published: []time.Time{at},
		},
		{
			name:      "Last-Modified before the previous poll is ignored",
			resp:      fetcher.Response{LastModifiedTime: min(-60)},
			prev:      prev,
			items:     []item{{date: min(-1)}},
			want:      []time.Time{min(-1)},
			published: []time.Time{min(-1)},
		},
		{
			name:      "plausible own dates",
			prev:      prev,
			items:     []item{{date: min(-1)}, {date: min(-9)}},
			want:      []time.Time{min(-9), min(-1)},
			published: []time.Time{min(-1), min(-9)},
		},
		{
			name:      "own date slightly ahead (clock skew) is clamped to the poll",
			prev:      prev,
			items:     []item{{date: min(0.5)}},
			want:      []time.Time{at},
			published: []time.Time{min(0.5)},
		},
		{
			name:      "dates before the previous poll or far ahead fall back to the bracket midpoint",
			prev:      prev,
			items:     []item{{date: min(5)}, {date: min(-30)}, {}},
			want:      []time.Time{min(-5), min(-5), min(-5)},
			published: []time.Time{min(-5), min(-5), min(-5)},
		},
		{
			name:      "first poll: any date up to now, no bracket",
			items:     []item{{date: min(-600)}, {}},
			want:      []time.Time{min(-600), at},
			published: []time.Time{min(-600), at},
		},
		{
			name:      "readings without a time take the estimate",
			prev:      prev,
			items:     []item{{reading: true}},
			want:      []time.Time{min(-5)},
			published: []time.Time{min(-5)},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := c.resp
			resp.ReceivedAt = at
			items := make([]storage.Item, len(c.items))
			for i, it := range c.items {
				items[i].Published = it.date
				if it.reading {
					items[i].Reading = &storage.Reading{Value: 1}
				}
			}
			got := PublishTimes(&resp, items, c.prev)
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for i := range got {
				if !got[i].Equal(c.want[i]) {
					t.Errorf("estimate %d: %v, want %v", i, got[i].Sub(at), c.want[i].Sub(at))
				}
				if i > 0 && got[i].Before(got[i-1]) {
					t.Errorf("not sorted: %v", got)
				}
				if got[i].After(at) {
					t.Errorf("estimate after the poll: %v", got[i])
				}
			}
			for i, it := range items {
				if !it.Published.Equal(c.published[i]) {
					t.Errorf("item %d published %v, want %v", i, it.Published.Sub(at), c.published[i].Sub(at))
				}
				if it.Reading != nil && !it.Reading.Time.Equal(it.Published) {
					t.Errorf("item %d reading time %v", i, it.Reading.Time)
				}
			}
		})
	}
	if got := PublishTimes(&fetcher.Response{ReceivedAt: at}, nil, prev); got != nil {
		t.Errorf("no items: %v", got)
	}
	if got := PublishTimes(nil, []storage.Item{{Published: at}}, time.Time{}); len(got) != 1 || !got[0].Equal(at) {
		t.Errorf("nil response: %v", got)
	}
}

// The estimates feed a policy as they are: Observation.Newest picks the
// newest estimate.
func TestPublishTimesObservation(t *testing.T) {
	at := time.Date(2026, 11, 21, 20, 0, 0, 0, time.UTC)
	items := []storage.Item{{Published: at.Add(-time.Minute)}, {Published: at.Add(-3 * time.Minute)}}
	obs := schedule.Observation{At: at, Hit: true, Published: PublishTimes(&fetcher.Response{ReceivedAt: at}, items, at.Add(-5*time.Minute))}
	if n, ok := obs.Newest(); !ok || !n.Equal(at.Add(-time.Minute)) {
		t.Errorf("newest %v", n)
	}
}

// TestPublishTimesMarksUndated: only an item its document gave no date
// is marked undated (the store's set of dropped items refuses only
// those); an implausible date of its own still counts as one.
func TestPublishTimesMarksUndated(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	prev := at.Add(-time.Hour)
	items := []storage.Item{
		{ID: "none"},
		{ID: "plausible", Published: at.Add(-time.Minute)},
		{ID: "old", Published: at.Add(-48 * time.Hour)},
	}
	PublishTimes(&fetcher.Response{ReceivedAt: at}, items, prev)
	for i, want := range []bool{true, false, false} {
		if items[i].Undated != want || items[i].Published.IsZero() {
			t.Errorf("%s: undated %v, published %v; want undated %v and an estimate", items[i].ID, items[i].Undated, items[i].Published, want)
		}
	}
}
