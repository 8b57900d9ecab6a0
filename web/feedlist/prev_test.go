package feedlist

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

// records is a store that keeps no summaries (as the JetStream store):
// its pages are cut by a walk of every record.
type records struct{ st *storage.Store }

func (r records) Feeds() ([]storage.Feed, error)       { return r.st.Feeds() }
func (r records) Feed(id uint64) (storage.Feed, error) { return r.st.Feed(id) }

// store is what TestPagesBack fills and lists.
type store interface {
	Lister
	CreateFeed(f *storage.Feed) error
	DeleteFeed(id uint64) error
}

// TestPagesBack walks the pages of each filter forward to the last, then
// back to the first by each page's Prev, on a store with summaries, on
// its records alone and on the JetStream store (which keeps none), with
// a starved filter from planners with and without a list of their
// overdue feeds: each page back is the page seen going forward, with the
// same links, and a link to the page before that names the first page
// when it is the first.
// fixed15m keeps the feeds of fillPages polled every 15 minutes, by
// either of the names it gives that policy.
func fixed15m(f *storage.Feed) bool { return f.Policy == "fixed-15m" || f.Policy == "fixed-900s" }

// starvedFeed keeps the feeds fillPages's plans starve.
func starvedFeed(f *storage.Feed) bool { return f.ID%2 == 0 && f.Kind == storage.KindRemote }

func TestPagesBack(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	bolt, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	asked := 0
	for _, sc := range []struct {
		name string
		st   func() (store, Lister)
	}{
		{"summaries", func() (store, Lister) { return bolt, bolt }},
		{"records", func() (store, Lister) { return bolt, records{bolt} }},
		{"jetstream", func() (store, Lister) { b := openJetStream(t); return b, b }},
	} {
		st, list := sc.st()
		if sc.name == "records" {
			st = nil // filled as summaries
		}
		kept, p := fillPages(t, st, list, now)
		planners := []struct {
			name string
			p    Planner
		}{{"walk", p}, {"overdue", overduePlans{p, &asked}}}
		for _, pc := range planners {
			for _, fc := range []struct {
				name string
				q    url.Values
				keep func(f *storage.Feed) bool
			}{
				{"all", url.Values{}, func(*storage.Feed) bool { return true }},
				{"erroring", url.Values{"status": {"erroring"}}, func(f *storage.Feed) bool { return f.LastError != "" }},
				{"policy", url.Values{"policy": {"fixed-15m"}}, fixed15m},
				{"policy spelt otherwise", url.Values{"policy": {"fixed-900000ms"}}, fixed15m},
				{"text", url.Values{"q": {"MOTE 1"}}, func(f *storage.Feed) bool { return strings.HasPrefix(f.Title, "Mote 1") }},
				{"starved", url.Values{"status": {"starved"}}, starvedFeed},
				{"sensors", url.Values{"kind": {"sensor"}}, func(f *storage.Feed) bool { return f.Kind == storage.KindSensor }},
				{"remote and erroring", url.Values{"kind": {"remote"}, "status": {"erroring"}},
					func(f *storage.Feed) bool { return f.Kind == storage.KindRemote && f.LastError != "" }},
				{"starved sensors", url.Values{"kind": {"sensor"}, "status": {"starved"}}, func(*storage.Feed) bool { return false }},
				{"starved remote", url.Values{"kind": {"remote"}, "status": {"starved"}}, starvedFeed},
				{"starved and policy", url.Values{"status": {"starved"}, "policy": {"fixed-15m"}},
					func(f *storage.Feed) bool { return starvedFeed(f) && fixed15m(f) }},
				{"none", url.Values{"q": {"nowhere"}}, func(*storage.Feed) bool { return false }},
			} {
				for _, limit := range []int{1, 4, 10, 100} {
					name := fmt.Sprintf("%s/%s/%s/limit %d", sc.name, pc.name, fc.name, limit)
					var want []uint64
					for i := range kept {
						if fc.keep(&kept[i]) {
							want = append(want, kept[i].ID)
						}
					}
					q := url.Values{}
					for k, v := range fc.q {
						q[k] = v
					}
					q.Set("limit", fmt.Sprint(limit))
					walkBack(t, name, list, pc.p, now, q, limit, want)
				}
			}
		}
	}
	if asked == 0 {
		t.Fatal("the overdue planner was never asked")
	}
}

// fillPages stores 61 feeds in st (unless nil) less every 7th, deleted,
// and returns those list holds, with plans starving the even IDs.
func fillPages(t *testing.T, st store, list Lister, now time.Time) ([]storage.Feed, plans) {
	t.Helper()
	for i := 1; st != nil && i <= 61; i++ {
		f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("https://m%d.example/f.rss", i), Title: fmt.Sprintf("Mote %d", i), Policy: "auto"}
		if i%4 == 0 {
			f.Policy = "fixed-15m"
		}
		if i%8 == 0 {
			f.Policy = "fixed-900s" // the same policy, spelt otherwise
		}
		if i%3 == 0 {
			f.LastError = "HTTP 503"
		}
		if i%5 == 0 { // a sensor: no URL, never fetched, never starved
			f.Kind, f.URL, f.Slug = storage.KindSensor, "", fmt.Sprintf("mote-%d", i)
		}
		if err := st.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 { // gaps in the IDs
			if err := st.DeleteFeed(f.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	kept, err := list.Feeds()
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 61-61/7 {
		t.Fatalf("%d feeds stored", len(kept))
	}
	p := plans{}
	for _, f := range kept {
		if f.Kind != storage.KindRemote {
			continue
		}
		p[f.ID] = now.Add(time.Second)
		if f.ID%2 == 0 {
			p[f.ID] = now.Add(-time.Hour) // starved
		}
	}
	return kept, p
}

// openJetStream is a JetStream store on an in-process server.
func openJetStream(t *testing.T) *sjs.Backend {
	t.Helper()
	js, err := jetstream.New(jstest.NewServer(t).Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := sjs.Open(ctx, js, sjs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := sjs.NewBackend(st, 10*time.Second)
	t.Cleanup(func() { b.Close() })
	return b
}

// walkBack checks the pages of query q on st (pages of limit of the
// feeds want, in order) forward and then back.
func walkBack(t *testing.T, name string, st Lister, plans Planner, now time.Time, q url.Values, limit int, want []uint64) {
	t.Helper()
	list := func(q url.Values) Page {
		t.Helper()
		ff, err := Parse(q)
		if err != nil {
			t.Fatalf("%s: %v: %v", name, q, err)
		}
		pg, err := List(st, ff, plans, now)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return pg
	}
	with := func(key, cursor string) url.Values {
		q2 := url.Values{}
		for k, v := range q {
			q2[k] = v
		}
		if key != "" {
			q2.Set(key, cursor)
		}
		return q2
	}
	var pages []Page
	for pg := list(q); ; pg = list(with("cursor", pg.Cursor)) {
		pages = append(pages, pg)
		if pg.Cursor == "" || len(pages) > len(want)+1 {
			break
		}
	}
	var got []uint64
	for i, pg := range pages {
		got = append(got, pg.IDs...)
		if pg.Total != len(want) {
			t.Fatalf("%s: page %d counts %d feeds, want %d", name, i, pg.Total, len(want))
		}
		if first := i == 0; (pg.Prev == "") != first || pg.PrevFirst != (i == 1) {
			t.Fatalf("%s: page %d: prev %q (first %v), want a prev on every page but the first, to the first from the second", name, i, pg.Prev, pg.PrevFirst)
		}
	}
	if !slices.Equal(got, want) || len(pages) != max(1, (len(want)+limit-1)/limit) {
		t.Fatalf("%s: %d pages forward list %v, want %v", name, len(pages), got, want)
	}
	// Back by each page's Prev: before=Prev as the API's client asks,
	// and the first page without a cursor, as the UI links it.
	for i := len(pages) - 1; i > 0; i-- {
		prev := pages[i].Prev
		back := list(with("before", prev))
		if pages[i].PrevFirst {
			if ui := list(with("", "")); !samePage(ui, back) {
				t.Fatalf("%s: page %d back to the first: by before %+v, the first page %+v", name, i, back, ui)
			}
		}
		if !samePage(back, pages[i-1]) {
			t.Fatalf("%s: back from page %d: %+v, want %+v", name, i, back, pages[i-1])
		}
	}
	// Past the end, before gives the last limit feeds (the first page
	// when there are no more than that).
	last := list(with("before", EncodeCursor(math.MaxUint64)))
	if n := len(want); n > limit && !slices.Equal(last.IDs, want[n-limit:]) || n <= limit && !samePage(last, pages[0]) {
		t.Fatalf("%s: before the end: %v", name, last.IDs)
	}
}

func samePage(a, b Page) bool {
	return slices.Equal(a.IDs, b.IDs) && a.Total == b.Total && a.Cursor == b.Cursor && a.Prev == b.Prev && a.PrevFirst == b.PrevFirst
}

func TestParseBefore(t *testing.T) {
	c := EncodeCursor(42)
	for _, tc := range []struct {
		name   string
		q      url.Values
		before uint64
		bad    string
	}{
		{"before", url.Values{"before": {c}}, 42, ""},
		{"with a filter", url.Values{"before": {c}, "status": {"erroring"}}, 42, ""},
		{"not a cursor", url.Values{"before": {"42"}}, 0, "before is not a cursor"},
		{"zero", url.Values{"before": {EncodeCursor(0)}}, 0, "before is not a cursor"},
		{"and a cursor", url.Values{"before": {c}, "cursor": {c}}, 0, "not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ff, err := Parse(tc.q)
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("error %v, want one saying %q", err, tc.bad)
				}
				return
			}
			if err != nil || ff.Before != tc.before || ff.After != 0 {
				t.Fatalf("%+v, %v; want before %d", ff, err, tc.before)
			}
			if ff.Query().Has("before") {
				t.Fatal("the filter's query keeps the page's bound")
			}
		})
	}
}
