package aggregator_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// TestServiceOverdue: the feeds Overdue lists are those whose NextFetch
// is before the time asked, as the clock moves on with nothing fetched;
// a feed unsubscribed leaves the list.
func TestServiceOverdue(t *testing.T) {
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := schedule.NewVirtualClock(t0)
	svc, err := aggregator.NewService(aggregator.ServiceOptions{
		Store: st, Clock: clock,
		Fetcher: fetcher.New(fetcher.Options{Transport: handlerTransport{http.NewServeMux()}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	// Feed i's first fetch is i minutes after t0.
	var ids []uint64
	for i := range 5 {
		f, err := svc.SubscribeAt(storage.Feed{URL: fmt.Sprintf("http://pub.test/%d", i)}, t0.Add(time.Duration(i)*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, f.ID)
	}
	overdue := func(before time.Time) []uint64 {
		got := svc.Overdue(before)
		slices.Sort(got)
		return got
	}
	byNext := func(before time.Time) []uint64 {
		var want []uint64
		for _, id := range ids {
			if next, ok := svc.NextFetch(id); ok && next.Before(before) {
				want = append(want, id)
			}
		}
		return want
	}
	tests := []struct {
		name   string
		do     func()
		before time.Duration // from t0
		want   int           // the first want feeds of ids
	}{
		{"none due yet", func() {}, 0, 0},
		{"strictly before", func() {}, time.Minute, 1},
		{"later", func() { clock.Advance(10 * time.Minute) }, 150 * time.Second, 3},
		{"all", func() {}, 9 * time.Minute, 5},
		{"one unsubscribed", func() {
			if err := svc.Unsubscribe(ids[4]); err != nil {
				t.Fatal(err)
			}
			ids = ids[:4]
		}, 9 * time.Minute, 4},
	}
	for _, tc := range tests {
		tc.do()
		before := t0.Add(tc.before)
		got, want := overdue(before), byNext(before)
		if !slices.Equal(got, want) || len(got) != tc.want {
			t.Fatalf("%s: Overdue %v, by NextFetch %v, want the first %d of %v", tc.name, got, want, tc.want, ids)
		}
	}
}
