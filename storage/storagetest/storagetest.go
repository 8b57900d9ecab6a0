// Package storagetest is the contract suite of slogfeed's storage
// backends: what the rest of slogfeed relies on of a storage.Backend,
// checked the same way for every backend (the bbolt storage.Store and the
// JetStream store of storage/jetstream), so that the two cannot drift
// apart.
//
// A backend that does not implement yet every method a case needs has
// that case skipped with a message naming the missing methods: a partial
// backend shows what it lacks instead of passing silently.
package storagetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// Open returns a new, empty backend for one case; the suite does not close
// it (register that with t.Cleanup). It is typed any so that a backend
// that implements only part of storage.Backend can be run: each case asks
// for the methods it needs.
type Open func(t *testing.T) any

// at is the fixed time the cases stamp observations and items with.
var at = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// Option adjusts a Run.
type Option func(*runConfig)

type runConfig struct {
	known  map[string]string
	reopen Reopen
}

// Reopen returns a backend over the data of b as another process sees it
// (b after a restart, or another node of its cluster), its in-memory
// state fresh; it may close b. The suite does not close what it returns
// (register that with t.Cleanup).
type Reopen func(t *testing.T, b any) any

// WithReopen runs the cases that restart a backend (a node taking over
// from another) with reopen; without it they are skipped, visibly.
func WithReopen(reopen Reopen) Option {
	return func(c *runConfig) { c.reopen = reopen }
}

// Known marks the case named name as a known deviation of the backend,
// explained by why: the case is skipped with that explanation, visibly,
// instead of failing. Use it only for a deviation that is documented and
// planned to be removed.
func Known(name, why string) Option {
	return func(c *runConfig) { c.known[name] = why }
}

// Run runs every contract case against backends made by open.
func Run(t *testing.T, open Open, opts ...Option) {
	t.Helper()
	cfg := runConfig{known: map[string]string{}}
	for _, o := range opts {
		o(&cfg)
	}
	for name := range cfg.known {
		if !slices.ContainsFunc(cases, func(c testCase) bool { return c.name == name }) &&
			!slices.ContainsFunc(restartCases, func(c restartCase) bool { return c.name == name }) {
			t.Errorf("Known(%q): no such case", name)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if why, ok := cfg.known[c.name]; ok {
				t.Skipf("known deviation of this backend: %s", why)
			}
			c.run(t, open(t))
		})
	}
	for _, c := range restartCases {
		t.Run(c.name, func(t *testing.T) {
			if why, ok := cfg.known[c.name]; ok {
				t.Skipf("known deviation of this backend: %s", why)
			}
			if cfg.reopen == nil {
				t.Skip("the backend cannot be restarted here (no WithReopen)")
			}
			c.run(t, open(t), cfg.reopen)
		})
	}
}

// restartCase is a case that restarts its backend with a Reopen.
type restartCase struct {
	name string
	run  func(t *testing.T, b any, reopen Reopen)
}

type testCase struct {
	name string
	run  func(t *testing.T, b any)
}

// need returns b as I, or skips the test naming the methods of I that b
// lacks.
func need[I any](t *testing.T, b any) I {
	t.Helper()
	if v, ok := b.(I); ok {
		return v
	}
	it := reflect.TypeFor[I]()
	bv := reflect.ValueOf(b)
	var missing []string
	for m := range it.Methods() {
		switch bm := bv.MethodByName(m.Name); {
		case !bm.IsValid():
			missing = append(missing, m.Name)
		case bm.Type() != m.Type:
			missing = append(missing, m.Name+" (with another signature)")
		}
	}
	t.Skipf("not implemented by %T: %s", b, strings.Join(missing, ", "))
	var zero I
	return zero
}

func remote(url string) *storage.Feed {
	return &storage.Feed{Kind: storage.KindRemote, URL: url, Title: "t", Policy: "auto"}
}

func items(ids ...string) []storage.Item {
	out := make([]storage.Item, len(ids))
	for i, id := range ids {
		out[i] = storage.Item{ID: id, Title: "item " + id, Published: at.Add(time.Duration(i) * time.Minute), Fetched: at}
	}
	return out
}

func ids(items []storage.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantIDs(t *testing.T, what string, got []storage.Item, want ...string) {
	t.Helper()
	if g := ids(got); !slices.Equal(g, want) {
		t.Errorf("%s: items %q, want %q", what, g, want)
	}
}

type feedCRUD interface {
	CreateFeed(f *storage.Feed) error
	Feed(id uint64) (storage.Feed, error)
	Feeds() ([]storage.Feed, error)
	UpdateFeed(id uint64, fn func(*storage.Feed) error) (storage.Feed, error)
	DeleteFeed(id uint64) error
}

type feedItems interface {
	CreateFeed(f *storage.Feed) error
	UpdateFeed(id uint64, fn func(*storage.Feed) error) (storage.Feed, error)
	AddItems(feedID uint64, items []storage.Item) ([]storage.Item, error)
	CountItems(feedID uint64) (int, error)
	Items(feedID uint64, q storage.ItemQuery) ([]storage.Item, error)
}

var (
	errEdit   = errors.New("edit refused")
	errReduce = errors.New("reduction refused")
)

// digestReducer keeps items titled "keep" and summarises the others in
// one digest item, "digest", whose title counts every item dropped so
// far; a previous digest given back is merged into the new one.
type digestReducer struct {
	calls   [][]string // IDs given to each call
	dropped int
	err     error
	invalid bool // the digest has no ID
}

func (r *digestReducer) Reduce(feed storage.Feed, in []storage.Item) (keep, digest []storage.Item, err error) {
	r.calls = append(r.calls, ids(in))
	if r.err != nil {
		return nil, nil, r.err
	}
	var newest time.Time
	for _, it := range in {
		switch {
		case it.Title == "keep":
			keep = append(keep, it)
		case it.ID == "digest":
		default:
			r.dropped++
			newest = it.Published
		}
	}
	d := storage.Item{ID: "digest", Title: fmt.Sprintf("%d dropped", r.dropped), Published: newest}
	if r.invalid {
		d.ID = ""
	}
	return keep, []storage.Item{d}, nil
}

// keep is a feed update that changes nothing.
func keep(*storage.Feed) error { return nil }

var cases = []testCase{
	{"feeds/crud", func(t *testing.T, b any) {
		s := need[feedCRUD](t, b)
		var created []uint64
		for i := range 3 {
			f := remote(fmt.Sprintf("http://127.0.0.1/feed/%d", i))
			must(t, s.CreateFeed(f))
			if f.ID == 0 || slices.Contains(created, f.ID) {
				t.Fatalf("CreateFeed gave ID %d after %v", f.ID, created)
			}
			created = append(created, f.ID)
		}
		got, err := s.Feed(created[1])
		must(t, err)
		if got.URL != "http://127.0.0.1/feed/1" || got.Kind != storage.KindRemote || got.Title != "t" {
			t.Errorf("Feed = %+v", got)
		}
		all, err := s.Feeds()
		must(t, err)
		var allIDs []uint64
		for _, f := range all {
			allIDs = append(allIDs, f.ID)
		}
		if !slices.Equal(allIDs, created) || !slices.IsSorted(allIDs) {
			t.Errorf("Feeds IDs %v, want %v in order", allIDs, created)
		}
		up, err := s.UpdateFeed(created[0], func(f *storage.Feed) error { f.Title = "new"; f.Polls = 7; return nil })
		must(t, err)
		if up.Title != "new" || up.Polls != 7 {
			t.Errorf("UpdateFeed returned %+v", up)
		}
		if _, err := s.UpdateFeed(created[0], func(f *storage.Feed) error { f.Title = "lost"; return errEdit }); !errors.Is(err, errEdit) {
			t.Errorf("UpdateFeed with a failing edit: %v, want its error", err)
		}
		if got, _ := s.Feed(created[0]); got.Title != "new" || got.Polls != 7 {
			t.Errorf("after a failed edit Feed = %q %d, want the stored edit kept", got.Title, got.Polls)
		}
		must(t, s.DeleteFeed(created[2]))
		if _, err := s.Feed(created[2]); !errors.Is(err, storage.ErrFeedNotFound) {
			t.Errorf("Feed of a deleted feed: %v, want ErrFeedNotFound", err)
		}
		if _, err := s.Feed(1 << 40); !errors.Is(err, storage.ErrFeedNotFound) {
			t.Errorf("Feed of an unknown ID: %v, want ErrFeedNotFound", err)
		}
		if _, err := s.UpdateFeed(created[2], func(*storage.Feed) error { return nil }); !errors.Is(err, storage.ErrFeedNotFound) {
			t.Errorf("UpdateFeed of a deleted feed: %v, want ErrFeedNotFound", err)
		}
	}},
	{"feeds/unique-url", func(t *testing.T, b any) {
		s := need[interface {
			CreateFeed(f *storage.Feed) error
			DeleteFeed(id uint64) error
		}](t, b)
		f := remote("http://127.0.0.1/same")
		must(t, s.CreateFeed(f))
		if err := s.CreateFeed(remote("http://127.0.0.1/same")); !errors.Is(err, storage.ErrFeedExists) {
			t.Errorf("second CreateFeed of one URL: %v, want ErrFeedExists", err)
		}
		sensor := &storage.Feed{Kind: storage.KindSensor, Slug: "buoy-1", Policy: "auto"}
		must(t, s.CreateFeed(sensor))
		if err := s.CreateFeed(&storage.Feed{Kind: storage.KindSensor, Slug: "buoy-1", Policy: "auto"}); !errors.Is(err, storage.ErrFeedExists) {
			t.Errorf("second CreateFeed of one sensor slug: %v, want ErrFeedExists", err)
		}
		must(t, s.DeleteFeed(f.ID))
		if err := s.CreateFeed(remote("http://127.0.0.1/same")); err != nil {
			t.Errorf("CreateFeed of a deleted feed's URL: %v", err)
		}
	}},
	{"feeds/lookup", func(t *testing.T, b any) {
		s := need[interface {
			CreateFeed(f *storage.Feed) error
			FeedByURL(url string) (storage.Feed, error)
			FeedBySlug(kind storage.Kind, slug string) (storage.Feed, error)
		}](t, b)
		r := remote("http://127.0.0.1/by-url")
		must(t, s.CreateFeed(r))
		sensor := &storage.Feed{Kind: storage.KindSensor, Slug: "air-7", Policy: "auto"}
		must(t, s.CreateFeed(sensor))
		if got, err := s.FeedByURL(r.URL); err != nil || got.ID != r.ID {
			t.Errorf("FeedByURL = %d, %v, want %d", got.ID, err, r.ID)
		}
		if got, err := s.FeedBySlug(storage.KindSensor, "air-7"); err != nil || got.ID != sensor.ID {
			t.Errorf("FeedBySlug = %d, %v, want %d", got.ID, err, sensor.ID)
		}
		if _, err := s.FeedByURL("http://127.0.0.1/none"); !errors.Is(err, storage.ErrFeedNotFound) {
			t.Errorf("FeedByURL of an unknown URL: %v, want ErrFeedNotFound", err)
		}
		if _, err := s.FeedBySlug(storage.KindPipe, "air-7"); !errors.Is(err, storage.ErrFeedNotFound) {
			t.Errorf("FeedBySlug of another kind: %v, want ErrFeedNotFound", err)
		}
	}},
	{"items/dedup-by-id", func(t *testing.T, b any) {
		s := need[feedItems](t, b)
		f := remote("http://127.0.0.1/items")
		must(t, s.CreateFeed(f))
		added, err := s.AddItems(f.ID, items("a", "b", "c"))
		must(t, err)
		wantIDs(t, "first AddItems", added, "a", "b", "c")
		for _, it := range added {
			if it.FeedID != f.ID || it.Seq == 0 {
				t.Errorf("added item %q: FeedID %d Seq %d", it.ID, it.FeedID, it.Seq)
			}
		}
		if !slices.IsSortedFunc(added, func(x, y storage.Item) int { return int(x.Seq) - int(y.Seq) }) {
			t.Errorf("Seq not increasing in input order: %+v", added)
		}
		again, err := s.AddItems(f.ID, items("b", "c", "d"))
		must(t, err)
		wantIDs(t, "second AddItems", again, "d")
		n, err := s.CountItems(f.ID)
		must(t, err)
		if n != 4 {
			t.Errorf("CountItems = %d, want 4", n)
		}
	}},
	{"items/order", func(t *testing.T, b any) {
		s := need[feedItems](t, b)
		f := remote("http://127.0.0.1/order")
		must(t, s.CreateFeed(f))
		added, err := s.AddItems(f.ID, items("a", "b", "c", "d"))
		must(t, err)
		for _, c := range []struct {
			name string
			q    storage.ItemQuery
			want []string
		}{
			{"arrival", storage.ItemQuery{Order: storage.ByArrival}, []string{"d", "c", "b", "a"}},
			{"arrival-limit", storage.ItemQuery{Order: storage.ByArrival, Limit: 2}, []string{"d", "c"}},
			{"arrival-asc", storage.ItemQuery{Order: storage.ByArrivalAsc}, []string{"a", "b", "c", "d"}},
			{"after-seq", storage.ItemQuery{Order: storage.ByArrivalAsc, AfterSeq: added[1].Seq}, []string{"c", "d"}},
			{"after-seq-limit", storage.ItemQuery{Order: storage.ByArrivalAsc, AfterSeq: added[0].Seq, Limit: 2}, []string{"b", "c"}},
			{"before-seq", storage.ItemQuery{Order: storage.ByArrival, BeforeSeq: added[2].Seq}, []string{"b", "a"}},
			{"published", storage.ItemQuery{Order: storage.ByPublished}, []string{"d", "c", "b", "a"}},
			{"since-until", storage.ItemQuery{Order: storage.ByPublished, Since: at.Add(time.Minute), Until: at.Add(3 * time.Minute)}, []string{"c", "b"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				got, err := s.Items(f.ID, c.q)
				must(t, err)
				wantIDs(t, "Items", got, c.want...)
			})
		}
	}},
	{"items/lookup", func(t *testing.T, b any) {
		s := need[interface {
			CreateFeed(f *storage.Feed) error
			AddItems(feedID uint64, items []storage.Item) ([]storage.Item, error)
			storage.ItemReader
		}](t, b)
		fa, fb := remote("http://127.0.0.1/a"), remote("http://127.0.0.1/b")
		must(t, s.CreateFeed(fa))
		must(t, s.CreateFeed(fb))
		if seq, err := s.LastSeq(); err != nil || seq != 0 {
			t.Errorf("LastSeq of an empty store = %d, %v", seq, err)
		}
		added, err := s.AddItems(fa.ID, items("a", "b"))
		must(t, err)
		_, err = s.AddItems(fb.ID, items("c"))
		must(t, err)
		it, err := s.Item(fa.ID, "b")
		must(t, err)
		if it.ID != "b" || it.FeedID != fa.ID || it.Seq != added[1].Seq || it.Title != "item b" {
			t.Errorf("Item = %+v, want b of feed %d at Seq %d", it, fa.ID, added[1].Seq)
		}
		if _, err := s.Item(fa.ID, "c"); !errors.Is(err, storage.ErrItemNotFound) {
			t.Errorf("Item of another feed's item: %v, want ErrItemNotFound", err)
		}
		if _, err := s.Item(1<<40, "a"); !errors.Is(err, storage.ErrFeedNotFound) {
			t.Errorf("Item of an unknown feed: %v, want ErrFeedNotFound", err)
		}
		counts, err := s.ItemCounts([]uint64{fa.ID, fb.ID, 1 << 40})
		must(t, err)
		if len(counts) != 2 || counts[fa.ID] != 2 || counts[fb.ID] != 1 {
			t.Errorf("ItemCounts = %v, want %d:2 %d:1 and no unknown feed", counts, fa.ID, fb.ID)
		}
		last, err := s.LastSeq()
		must(t, err)
		more, err := s.AddItems(fb.ID, items("d"))
		must(t, err)
		if last < added[1].Seq || more[0].Seq <= last {
			t.Errorf("LastSeq %d after Seqs %d, %d; next item got %d", last, added[0].Seq, added[1].Seq, more[0].Seq)
		}
		if now, err := s.LastSeq(); err != nil || now != more[0].Seq {
			t.Errorf("LastSeq = %d, %v, want %d", now, err, more[0].Seq)
		}
	}},
	{"versions/snapshot", func(t *testing.T, b any) {
		s := need[interface {
			CreateFeed(f *storage.Feed) error
			UpdateFeed(id uint64, fn func(*storage.Feed) error) (storage.Feed, error)
			AddItems(feedID uint64, items []storage.Item) ([]storage.Item, error)
			storage.VersionStore
		}](t, b)
		f := &storage.Feed{Kind: storage.KindSensor, Slug: "tide", Policy: "auto"}
		must(t, s.CreateFeed(f))
		v0, err := s.FeedVersionBySlug(storage.KindSensor, "tide", 2)
		must(t, err)
		if v0 == (storage.Version{}) || v0.FeedID != f.ID || v0.Count != 0 {
			t.Errorf("version of an empty feed = %+v", v0)
		}
		if again, err := s.FeedVersionBySlug(storage.KindSensor, "tide", 2); err != nil || again != v0 {
			t.Errorf("version read twice: %+v then %+v, %v", v0, again, err)
		}
		added, err := s.AddItems(f.ID, items("a", "b", "c"))
		must(t, err)
		v1, err := s.FeedVersionBySlug(storage.KindSensor, "tide", 2)
		must(t, err)
		if v1 == v0 || v1.Count != 3 || v1.LastSeq != added[2].Seq {
			t.Errorf("version after 3 items = %+v (before %+v), want Count 3 LastSeq %d", v1, v0, added[2].Seq)
		}
		_, err = s.UpdateFeed(f.ID, func(f *storage.Feed) error { f.Title = "renamed"; return nil })
		must(t, err)
		v2, err := s.FeedVersionBySlug(storage.KindSensor, "tide", 2)
		must(t, err)
		if v2 == v1 {
			t.Errorf("version unchanged by an edit of the feed: %+v", v2)
		}
		sf, newest, sv, err := s.FeedSnapshot(storage.KindSensor, "tide", 2)
		must(t, err)
		wantIDs(t, "FeedSnapshot items", newest, "c", "b")
		if sf.ID != f.ID || sf.Title != "renamed" || sv != v2 {
			t.Errorf("FeedSnapshot = feed %d %q, version %+v, want %d renamed and %+v", sf.ID, sf.Title, sv, f.ID, v2)
		}
		if _, err := s.FeedVersionBySlug(storage.KindSensor, "none", 2); !errors.Is(err, storage.ErrFeedNotFound) {
			t.Errorf("version of an unknown slug: %v, want ErrFeedNotFound", err)
		}
		if _, _, _, err := s.FeedSnapshot(storage.KindPipe, "tide", 2); !errors.Is(err, storage.ErrFeedNotFound) {
			t.Errorf("snapshot of another kind: %v, want ErrFeedNotFound", err)
		}
	}},
	{"items/retention-max-items", func(t *testing.T, b any) {
		s := need[feedItems](t, b)
		f := remote("http://127.0.0.1/retention")
		f.Retention = storage.Retention{MaxItems: 3}
		must(t, s.CreateFeed(f))
		_, err := s.AddItems(f.ID, items("a", "b", "c", "d", "e"))
		must(t, err)
		n, err := s.CountItems(f.ID)
		must(t, err)
		if n != 3 {
			t.Errorf("CountItems = %d, want MaxItems 3", n)
		}
		got, err := s.Items(f.ID, storage.ItemQuery{Order: storage.ByArrivalAsc})
		must(t, err)
		wantIDs(t, "kept", got, "c", "d", "e")
		// An item retention removed does not come back as new.
		again, err := s.AddItems(f.ID, items("a"))
		must(t, err)
		wantIDs(t, "re-added removed item", again)
	}},
	{"items/retention-long-lived", func(t *testing.T, b any) {
		// A feed at its retention for a long time: one new item a poll,
		// every removed item still refused when a document lists it again.
		s := need[feedItems](t, b)
		f := remote("http://127.0.0.1/long-lived")
		f.Retention = storage.Retention{MaxItems: 3}
		must(t, s.CreateFeed(f))
		const n = 200
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("i%03d", i)
		}
		all := items(ids...)
		for i := range all {
			added, err := s.AddItems(f.ID, all[i:i+1])
			must(t, err)
			wantIDs(t, "added", added, ids[i])
		}
		again, err := s.AddItems(f.ID, all)
		must(t, err)
		wantIDs(t, "removed and kept items offered again", again)
		got, err := s.Items(f.ID, storage.ItemQuery{Order: storage.ByArrivalAsc})
		must(t, err)
		wantIDs(t, "kept", got, ids[n-3:]...)
	}},
	{"items/retention-by-publish-time", func(t *testing.T, b any) {
		s := need[feedItems](t, b)
		f := remote("http://127.0.0.1/late")
		f.Retention = storage.Retention{MaxItems: 2}
		must(t, s.CreateFeed(f))
		// Arrival order a, b, c; publish order b, c, a: retention drops the
		// oldest by publish time (b), not the first to arrive.
		in := items("a", "b", "c")
		in[0].Published = at.Add(time.Hour)
		_, err := s.AddItems(f.ID, in)
		must(t, err)
		got, err := s.Items(f.ID, storage.ItemQuery{Order: storage.ByPublished})
		must(t, err)
		wantIDs(t, "kept", got, "a", "c")
	}},
	{"items/retention-max-age", func(t *testing.T, b any) {
		s := need[feedItems](t, b)
		f := remote("http://127.0.0.1/aged")
		f.Retention = storage.Retention{MaxAge: time.Hour}
		must(t, s.CreateFeed(f))
		// Both arrive now; the one published two hours ago is past MaxAge
		// and not stored (age counts from the publish time, not arrival).
		now := time.Now()
		added, err := s.AddItems(f.ID, []storage.Item{
			{ID: "old", Title: "old", Published: now.Add(-2 * time.Hour)},
			{ID: "new", Title: "new", Published: now.Add(-time.Minute)},
			{ID: "undated", Title: "no publish time: its fetch time counts"},
		})
		must(t, err)
		wantIDs(t, "added", added, "new", "undated")
		n, err := s.CountItems(f.ID)
		must(t, err)
		if n != 2 {
			t.Errorf("CountItems = %d, want 2", n)
		}
	}},
	{"items/retention-reducer", func(t *testing.T, b any) {
		s := need[interface {
			feedItems
			Item(feedID uint64, itemID string) (storage.Item, error)
			SetReducer(r storage.Reducer)
		}](t, b)
		r := &digestReducer{}
		s.SetReducer(r)
		f := remote("http://127.0.0.1/reduced")
		f.Retention = storage.Retention{MaxItems: 3}
		must(t, s.CreateFeed(f))
		pub := func(m int) time.Time { return at.Add(time.Duration(m) * time.Minute) }
		// Arrival order c, a, e, b, d; publish order a..e: the reducer is
		// given the oldest by publish time.
		added, err := s.AddItems(f.ID, []storage.Item{
			{ID: "c", Title: "c", Published: pub(3)},
			{ID: "a", Title: "keep", Published: pub(1)},
			{ID: "e", Title: "e", Published: pub(5)},
			{ID: "b", Title: "b", Published: pub(2)},
			{ID: "d", Title: "d", Published: pub(4)},
		})
		must(t, err)
		if len(r.calls) != 1 || !slices.Equal(r.calls[0], []string{"a", "b"}) {
			t.Fatalf("reducer calls %q, want [[a b]]", r.calls)
		}
		wantIDs(t, "added (retention removed b)", added, "c", "a", "e", "d")
		got, err := s.Items(f.ID, storage.ItemQuery{Order: storage.ByPublished})
		must(t, err)
		wantIDs(t, "stored", got, "e", "d", "c", "digest", "a")
		d1, err := s.Item(f.ID, "digest")
		must(t, err)
		if d1.Title != "1 dropped" || d1.FeedID != f.ID || d1.Seq == 0 || d1.Fetched.IsZero() {
			t.Errorf("digest = %+v", d1)
		}

		// The next item pushes a, the digest and c over: a is kept again,
		// c dropped, the digest replaced by a merged one with a new Seq.
		_, err = s.AddItems(f.ID, []storage.Item{{ID: "f", Title: "f", Published: pub(6)}})
		must(t, err)
		if got := r.calls[len(r.calls)-1]; !slices.Equal(got, []string{"a", "digest", "c"}) {
			t.Errorf("second reducer call got %q, want [a digest c]", got)
		}
		d2, err := s.Item(f.ID, "digest")
		must(t, err)
		if d2.Title != "2 dropped" || d2.Seq <= d1.Seq {
			t.Errorf("merged digest = %+v (first had Seq %d)", d2, d1.Seq)
		}
		after, err := s.Items(f.ID, storage.ItemQuery{Order: storage.ByArrivalAsc, AfterSeq: d1.Seq})
		must(t, err)
		if !slices.Contains(ids(after), "digest") {
			t.Errorf("an incremental reader does not see the merged digest: %q", ids(after))
		}
		if _, err := s.Item(f.ID, "c"); !errors.Is(err, storage.ErrItemNotFound) {
			t.Errorf("c not dropped: %v", err)
		}
		all, err := s.Items(f.ID, storage.ItemQuery{Order: storage.ByPublished})
		must(t, err)
		wantIDs(t, "stored after the merge", all, "f", "e", "d", "digest", "a")

		// A failing reducer keeps everything: the new item is stored and
		// reported, the reducer's error returned, nothing removed.
		r.err = errReduce
		added, err = s.AddItems(f.ID, []storage.Item{{ID: "g", Title: "g", Published: pub(7)}})
		if !errors.Is(err, errReduce) {
			t.Errorf("AddItems with a failing reducer: %v, want its error", err)
		}
		wantIDs(t, "added with a failing reducer", added, "g")
		n, err := s.CountItems(f.ID)
		must(t, err)
		if n != 6 {
			t.Errorf("CountItems after a failed reduction = %d, want 6", n)
		}
		r.err = nil

		// An invalid digest item fails the reduction the same way.
		r.invalid = true
		added, err = s.AddItems(f.ID, []storage.Item{{ID: "h", Title: "h", Published: pub(8)}})
		if !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("AddItems with an invalid digest: %v, want ErrInvalid", err)
		}
		wantIDs(t, "added with an invalid digest", added, "h")
		r.invalid = false

		// Without a reducer the oldest beyond MaxItems are deleted.
		s.SetReducer(nil)
		calls := len(r.calls)
		_, err = s.AddItems(f.ID, []storage.Item{{ID: "i", Title: "i", Published: pub(9)}})
		must(t, err)
		got, err = s.Items(f.ID, storage.ItemQuery{Order: storage.ByPublished})
		must(t, err)
		wantIDs(t, "stored without a reducer", got, "i", "h", "g")
		if len(r.calls) != calls {
			t.Errorf("a removed reducer was called")
		}
	}},
	{"polls/record-fetch-atomic", func(t *testing.T, b any) {
		s := need[interface {
			CreateFeed(f *storage.Feed) error
			Feed(id uint64) (storage.Feed, error)
			CountItems(feedID uint64) (int, error)
			Observations(feedID uint64, limit int) ([]storage.Observation, error)
			RecordFetch(feedID uint64, items []storage.Item, o storage.Observation, fn func(f *storage.Feed, o *storage.Observation, added []storage.Item) error) (storage.Fetched, error)
		}](t, b)
		f := remote("http://127.0.0.1/fetch")
		must(t, s.CreateFeed(f))
		// A refused update stores nothing: no item, no observation, no counter.
		if _, err := s.RecordFetch(f.ID, items("a", "b"), storage.Observation{At: at, Hit: true}, func(*storage.Feed, *storage.Observation, []storage.Item) error { return errEdit }); !errors.Is(err, errEdit) {
			t.Fatalf("RecordFetch with a failing update: %v, want its error", err)
		}
		n, err := s.CountItems(f.ID)
		must(t, err)
		obs, err := s.Observations(f.ID, 0)
		must(t, err)
		if n != 0 || len(obs) != 0 {
			t.Errorf("after a failed RecordFetch: %d items, %d observations, want none", n, len(obs))
		}
		res, err := s.RecordFetch(f.ID, items("a", "b"), storage.Observation{At: at, Hit: true}, func(f *storage.Feed, o *storage.Observation, added []storage.Item) error {
			f.Polls++
			f.Hits++
			f.Items += int64(len(added))
			return nil
		})
		must(t, err)
		wantIDs(t, "RecordFetch added", res.Added, "a", "b")
		if res.Feed.Polls != 1 || res.Feed.Items != 2 {
			t.Errorf("RecordFetch feed: polls %d items %d, want 1 and 2", res.Feed.Polls, res.Feed.Items)
		}
		// The second poll of the same items adds none.
		res, err = s.RecordFetch(f.ID, items("a", "b"), storage.Observation{At: at.Add(time.Minute)}, func(f *storage.Feed, o *storage.Observation, added []storage.Item) error {
			f.Polls++
			f.Items += int64(len(added))
			return nil
		})
		must(t, err)
		wantIDs(t, "second RecordFetch added", res.Added)
		got, err := s.Feed(f.ID)
		must(t, err)
		obs, err = s.Observations(f.ID, 0)
		must(t, err)
		if got.Polls != 2 || got.Items != 2 || len(obs) != 2 || !obs[0].At.Equal(at) || !obs[0].Hit {
			t.Errorf("after two polls: polls %d items %d, observations %+v", got.Polls, got.Items, obs)
		}
	}},
	{"polls/observations", func(t *testing.T, b any) {
		s := need[interface {
			CreateFeed(f *storage.Feed) error
			Observations(feedID uint64, limit int) ([]storage.Observation, error)
			RecordPoll(feedID uint64, o storage.Observation, fn func(*storage.Feed) error) (storage.Feed, error)
		}](t, b)
		f := remote("http://127.0.0.1/obs")
		must(t, s.CreateFeed(f))
		for i := range 5 {
			got, err := s.RecordPoll(f.ID, storage.Observation{At: at.Add(time.Duration(i) * time.Minute), Hit: i%2 == 0, Status: 200}, func(f *storage.Feed) error {
				f.Polls++
				f.NextFetch = at.Add(time.Duration(i+1) * time.Minute)
				return nil
			})
			must(t, err)
			if got.Polls != int64(i+1) {
				t.Fatalf("RecordPoll %d: polls %d", i, got.Polls)
			}
		}
		obs, err := s.Observations(f.ID, 3)
		must(t, err)
		if len(obs) != 3 {
			t.Fatalf("Observations(3) = %d observations", len(obs))
		}
		for i, o := range obs {
			if want := at.Add(time.Duration(i+2) * time.Minute); !o.At.Equal(want) || o.Status != 200 {
				t.Errorf("observation %d at %v status %d, want %v (newest 3, oldest first)", i, o.At, o.Status, want)
			}
		}
		if _, err := s.RecordPoll(1<<40, storage.Observation{At: at}, keep); !errors.Is(err, storage.ErrFeedNotFound) {
			t.Errorf("RecordPoll of an unknown feed: %v, want ErrFeedNotFound", err)
		}
	}},
	{"polls/recent-latencies", func(t *testing.T, b any) {
		s := need[interface {
			CreateFeed(f *storage.Feed) error
			RecordPoll(feedID uint64, o storage.Observation, fn func(*storage.Feed) error) (storage.Feed, error)
			RecentLatencies(ids []uint64, polls int) (map[uint64][]float64, error)
		}](t, b)
		f, quiet := remote("http://127.0.0.1/lat"), remote("http://127.0.0.1/quiet")
		must(t, s.CreateFeed(f))
		must(t, s.CreateFeed(quiet))
		for i, lat := range [][]float64{{1, 2}, {3}, nil, {4}} {
			_, err := s.RecordPoll(f.ID, storage.Observation{At: at.Add(time.Duration(i) * time.Minute), LatencyS: lat}, keep)
			must(t, err)
		}
		_, err := s.RecordPoll(quiet.ID, storage.Observation{At: at}, keep)
		must(t, err)
		for _, c := range []struct {
			name  string
			ids   []uint64
			polls int
			want  map[uint64][]float64
		}{
			{"newest-2", []uint64{f.ID, quiet.ID}, 2, map[uint64][]float64{f.ID: {4}}},
			{"newest-3", []uint64{f.ID}, 3, map[uint64][]float64{f.ID: {3, 4}}},
			{"all-kept", []uint64{f.ID, 1 << 40}, 0, map[uint64][]float64{f.ID: {1, 2, 3, 4}}},
			{"every-feed", nil, 0, map[uint64][]float64{f.ID: {1, 2, 3, 4}}},
		} {
			t.Run(c.name, func(t *testing.T) {
				got, err := s.RecentLatencies(c.ids, c.polls)
				must(t, err)
				if fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Errorf("RecentLatencies = %v, want %v", got, c.want)
				}
			})
		}
	}},
	{"polls/feed-states", func(t *testing.T, b any) {
		s := need[interface {
			CreateFeed(f *storage.Feed) error
			DeleteFeed(id uint64) error
			RecordPoll(feedID uint64, o storage.Observation, fn func(*storage.Feed) error) (storage.Feed, error)
			storage.StateLoader
		}](t, b)
		var ids []uint64
		for i := range 4 {
			f := remote(fmt.Sprintf("http://127.0.0.1/state/%d", i))
			must(t, s.CreateFeed(f))
			ids = append(ids, f.ID)
			for p := range i + 1 { // feed i has i+1 observations
				_, err := s.RecordPoll(f.ID, storage.Observation{At: at.Add(time.Duration(p) * time.Minute), Status: 200 + p}, func(f *storage.Feed) error { f.Polls++; return nil })
				must(t, err)
			}
		}
		must(t, s.DeleteFeed(ids[3]))
		got, err := s.FeedStates(nil, 0)
		must(t, err)
		if len(got) != 3 {
			t.Fatalf("FeedStates(every feed) = %d feeds, want 3 (the deleted one left out)", len(got))
		}
		for i, id := range ids[:3] {
			st := got[id]
			if st == nil || st.Feed.ID != id || st.Feed.Polls != int64(i+1) || len(st.Observations) != i+1 || st.Observations[i].Status != 200+i {
				t.Errorf("state of feed %d = %+v, want %d polls and observations, oldest first", id, st, i+1)
			}
		}
		newest, err := s.FeedStates(func(id uint64) bool { return id == ids[2] }, 2)
		must(t, err)
		if st := newest[ids[2]]; len(newest) != 1 || st == nil || len(st.Observations) != 2 || st.Observations[0].Status != 201 || st.Observations[1].Status != 202 {
			t.Errorf("FeedStates(one feed, newest 2) = %+v", newest)
		}
	}},
	{"pipes/commit-run-once", func(t *testing.T, b any) {
		s := need[interface {
			CreatePipe(p *storage.Pipe, out *storage.Feed) error
			Pipe(id uint64) (storage.Pipe, error)
			CountItems(feedID uint64) (int, error)
			CommitPipeRun(pipeID uint64, state json.RawMessage, out []storage.Item, run storage.PipeRun) ([]storage.Item, error)
		}](t, b)
		p := &storage.Pipe{Slug: "smooth", Def: json.RawMessage(`{"nodes":[]}`)}
		out := &storage.Feed{Kind: storage.KindPipe, Slug: "smooth", Policy: "auto"}
		must(t, s.CreatePipe(p, out))
		if p.ID == 0 || out.ID == 0 || p.FeedID != out.ID {
			t.Fatalf("CreatePipe: pipe %+v, output feed %d", p, out.ID)
		}
		added, err := s.CommitPipeRun(p.ID, json.RawMessage(`{"cursor":1}`), items("x", "y"), storage.PipeRun{At: at})
		must(t, err)
		wantIDs(t, "first run", added, "x", "y")
		// A rerun of the same inputs (after a crash, a takeover) emits nothing twice.
		added, err = s.CommitPipeRun(p.ID, json.RawMessage(`{"cursor":2}`), items("y", "z"), storage.PipeRun{At: at.Add(time.Minute)})
		must(t, err)
		wantIDs(t, "rerun", added, "z")
		// A failed run keeps the state and adds nothing.
		added, err = s.CommitPipeRun(p.ID, json.RawMessage(`{"cursor":9}`), items("w"), storage.PipeRun{At: at.Add(2 * time.Minute), Err: "boom"})
		must(t, err)
		wantIDs(t, "failed run", added)
		got, err := s.Pipe(p.ID)
		must(t, err)
		n, err := s.CountItems(out.ID)
		must(t, err)
		if string(got.State) != `{"cursor":2}` || got.Runs != 3 || got.ErrorCount != 1 || got.LastError != "boom" || n != 3 {
			t.Errorf("after 3 runs: state %s runs %d errors %d %q, %d outputs", got.State, got.Runs, got.ErrorCount, got.LastError, n)
		}
	}},
	{"pipes/create-delete", func(t *testing.T, b any) {
		s := need[interface {
			Feed(id uint64) (storage.Feed, error)
			CreatePipe(p *storage.Pipe, out *storage.Feed) error
			Pipe(id uint64) (storage.Pipe, error)
			Pipes() ([]storage.Pipe, error)
			DeletePipe(id uint64) error
			CommitPipeRun(pipeID uint64, state json.RawMessage, out []storage.Item, run storage.PipeRun) ([]storage.Item, error)
		}](t, b)
		newPipe := func(slug string) (*storage.Pipe, *storage.Feed) {
			return &storage.Pipe{Slug: slug, Def: json.RawMessage(`{"nodes":[]}`)}, &storage.Feed{Kind: storage.KindPipe, Slug: slug, Policy: "auto"}
		}
		p1, o1 := newPipe("one")
		must(t, s.CreatePipe(p1, o1))
		p2, o2 := newPipe("two")
		must(t, s.CreatePipe(p2, o2))
		dup, dupOut := newPipe("one")
		if err := s.CreatePipe(dup, dupOut); !errors.Is(err, storage.ErrPipeExists) || dup.ID != 0 {
			t.Errorf("CreatePipe of a taken slug: %v (ID %d), want ErrPipeExists", err, dup.ID)
		}
		bad, badOut := newPipe("three")
		badOut.Kind = storage.KindSensor
		if err := s.CreatePipe(bad, badOut); !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("CreatePipe with a sensor output feed: %v, want ErrInvalid", err)
		}
		all, err := s.Pipes()
		must(t, err)
		if len(all) != 2 || all[0].ID != p1.ID || all[1].ID != p2.ID || all[0].FeedID != o1.ID {
			t.Errorf("Pipes = %+v, want pipes %d and %d in order", all, p1.ID, p2.ID)
		}
		// An invalid output refuses the whole commit.
		outs := items("ok")
		outs = append(outs, storage.Item{Title: "no id"})
		if _, err := s.CommitPipeRun(p1.ID, json.RawMessage(`{"c":1}`), outs, storage.PipeRun{At: at}); !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("CommitPipeRun with an item without ID: %v, want ErrInvalid", err)
		}
		if got, err := s.Pipe(p1.ID); err != nil || got.Runs != 0 || got.State != nil {
			t.Errorf("after a refused commit: %+v, %v, want nothing written", got, err)
		}
		must(t, s.DeletePipe(p1.ID))
		if _, err := s.Pipe(p1.ID); !errors.Is(err, storage.ErrPipeNotFound) {
			t.Errorf("Pipe of a deleted pipe: %v, want ErrPipeNotFound", err)
		}
		if _, err := s.Feed(o1.ID); !errors.Is(err, storage.ErrFeedNotFound) {
			t.Errorf("output feed of a deleted pipe: %v, want ErrFeedNotFound", err)
		}
		again, againOut := newPipe("one")
		if err := s.CreatePipe(again, againOut); err != nil {
			t.Errorf("CreatePipe of a deleted pipe's slug: %v", err)
		}
	}},
	{"pipes/update", func(t *testing.T, b any) {
		s := need[interface {
			Feed(id uint64) (storage.Feed, error)
			FeedBySlug(kind storage.Kind, slug string) (storage.Feed, error)
			CreatePipe(p *storage.Pipe, out *storage.Feed) error
			Pipe(id uint64) (storage.Pipe, error)
			UpdatePipeFeed(p storage.Pipe, edit func(*storage.Feed) error) error
		}](t, b)
		newPipe := func(slug string) (*storage.Pipe, *storage.Feed) {
			return &storage.Pipe{Slug: slug, Def: json.RawMessage(`{"v":1}`)}, &storage.Feed{Kind: storage.KindPipe, Slug: slug, Policy: "auto"}
		}
		p, out := newPipe("alpha")
		must(t, s.CreatePipe(p, out))
		q, qOut := newPipe("beta")
		must(t, s.CreatePipe(q, qOut))
		np := *p
		np.Def = json.RawMessage(`{"v":2}`)
		must(t, s.UpdatePipeFeed(np, func(f *storage.Feed) error { f.Title = "Alpha"; return nil }))
		if got, _ := s.Pipe(p.ID); string(got.Def) != `{"v":2}` {
			t.Errorf("definition after update: %s", got.Def)
		}
		if f, _ := s.Feed(out.ID); f.Title != "Alpha" {
			t.Errorf("output feed title after edit: %q", f.Title)
		}
		// A refused edit changes nothing.
		np.Def = json.RawMessage(`{"v":3}`)
		if err := s.UpdatePipeFeed(np, func(f *storage.Feed) error { f.Title = "lost"; return errEdit }); !errors.Is(err, errEdit) {
			t.Errorf("UpdatePipeFeed with a failing edit: %v, want its error", err)
		}
		if err := s.UpdatePipeFeed(np, func(f *storage.Feed) error { f.Kind = storage.KindSensor; return nil }); !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("UpdatePipeFeed turning the output into a sensor feed: %v, want ErrInvalid", err)
		}
		if got, _ := s.Pipe(p.ID); string(got.Def) != `{"v":2}` {
			t.Errorf("definition after refused updates: %s", got.Def)
		}
		// Renaming moves the output feed with the pipe; a taken slug is refused.
		np.Def, np.Slug = json.RawMessage(`{"v":2}`), "gamma"
		must(t, s.UpdatePipeFeed(np, nil))
		if f, err := s.FeedBySlug(storage.KindPipe, "gamma"); err != nil || f.ID != out.ID {
			t.Errorf("output feed under the new slug: %d, %v, want %d", f.ID, err, out.ID)
		}
		if _, err := s.FeedBySlug(storage.KindPipe, "alpha"); !errors.Is(err, storage.ErrFeedNotFound) {
			t.Errorf("output feed under the old slug: %v, want ErrFeedNotFound", err)
		}
		np.Slug = "beta"
		if err := s.UpdatePipeFeed(np, nil); !errors.Is(err, storage.ErrPipeExists) {
			t.Errorf("renaming onto another pipe's slug: %v, want ErrPipeExists", err)
		}
		if got, _ := s.Pipe(p.ID); got.Slug != "gamma" {
			t.Errorf("slug after a refused rename: %q", got.Slug)
		}
		again, againOut := newPipe("alpha")
		if err := s.CreatePipe(again, againOut); err != nil {
			t.Errorf("CreatePipe of a renamed pipe's old slug: %v", err)
		}
	}},
	{"admin/check-after-writes", func(t *testing.T, b any) {
		s := need[interface {
			CreateFeed(f *storage.Feed) error
			DeleteFeed(id uint64) error
			CreatePipe(p *storage.Pipe, out *storage.Feed) error
			UpdatePipeFeed(p storage.Pipe, edit func(*storage.Feed) error) error
			DeletePipe(id uint64) error
			AddItems(feedID uint64, items []storage.Item) ([]storage.Item, error)
			Check() error
		}](t, b)
		f := remote("http://127.0.0.1/c1")
		must(t, s.CreateFeed(f))
		gone := remote("http://127.0.0.1/c2")
		must(t, s.CreateFeed(gone))
		_, err := s.AddItems(f.ID, items("a", "b"))
		must(t, err)
		must(t, s.DeleteFeed(gone.ID))
		p := &storage.Pipe{Slug: "p1", Def: json.RawMessage(`{}`)}
		must(t, s.CreatePipe(p, &storage.Feed{Kind: storage.KindPipe, Slug: "p1", Policy: "auto"}))
		np := *p
		np.Slug = "p2"
		must(t, s.UpdatePipeFeed(np, nil))
		q := &storage.Pipe{Slug: "p3", Def: json.RawMessage(`{}`)}
		must(t, s.CreatePipe(q, &storage.Feed{Kind: storage.KindPipe, Slug: "p3", Policy: "auto"}))
		must(t, s.DeletePipe(q.ID))
		if err := s.Check(); err != nil {
			t.Errorf("Check after creates, edits and deletes: %v", err)
		}
	}},
	{"plugins/records", func(t *testing.T, b any) {
		s := need[storage.PluginStore](t, b)
		must(t, s.PluginPut("hooks", "b", []byte("2")))
		must(t, s.PluginPut("hooks", "a", []byte("1")))
		must(t, s.PluginPut("other", "a", []byte("x")))
		must(t, s.PluginPut("hooks", "a b/c.d*>", []byte("odd")))
		if v, err := s.PluginGet("hooks", "a"); err != nil || string(v) != "1" {
			t.Errorf("PluginGet = %q, %v", v, err)
		}
		var keys []string
		must(t, s.PluginList("hooks", func(k string, v []byte) error { keys = append(keys, k+"="+string(v)); return nil }))
		if want := []string{"a=1", "a b/c.d*>=odd", "b=2"}; !slices.Equal(keys, want) {
			t.Errorf("PluginList = %q, want %q (key order)", keys, want)
		}
		must(t, s.PluginDelete("hooks", "a"))
		if _, err := s.PluginGet("hooks", "a"); !errors.Is(err, storage.ErrPluginKeyNotFound) {
			t.Errorf("PluginGet of a deleted key: %v, want ErrPluginKeyNotFound", err)
		}
		if err := s.PluginPut("hooks", "", []byte("v")); !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("PluginPut of an empty key: %v, want ErrInvalid", err)
		}
		if v, err := s.PluginGet("other", "a"); err != nil || string(v) != "x" {
			t.Errorf("another plugin's record: %q, %v", v, err)
		}
	}},
	{"plugins/create", func(t *testing.T, b any) {
		s := need[storage.PluginStore](t, b)
		if v, err := s.PluginCreate("ids", "k", []byte("first")); err != nil || string(v) != "first" {
			t.Errorf("PluginCreate of a new key = %q, %v, want first", v, err)
		}
		if v, err := s.PluginCreate("ids", "k", []byte("second")); err != nil || string(v) != "first" {
			t.Errorf("PluginCreate of a key held = %q, %v, want first, the value held", v, err)
		}
		if v, err := s.PluginGet("ids", "k"); err != nil || string(v) != "first" {
			t.Errorf("PluginGet after two creates = %q, %v, want first", v, err)
		}
		must(t, s.PluginDelete("ids", "k"))
		if v, err := s.PluginCreate("ids", "k", []byte("third")); err != nil || string(v) != "third" {
			t.Errorf("PluginCreate of a deleted key = %q, %v, want third", v, err)
		}
		if _, err := s.PluginCreate("ids", "", []byte("v")); !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("PluginCreate of an empty key: %v, want ErrInvalid", err)
		}
		// Concurrent creates of one key: every caller gets the one value
		// stored.
		got := make([]string, 8)
		var wg sync.WaitGroup
		for i := range got {
			wg.Go(func() {
				v, err := s.PluginCreate("ids", "race", []byte(strconv.Itoa(i)))
				if err != nil {
					t.Errorf("concurrent PluginCreate %d: %v", i, err)
				}
				got[i] = string(v)
			})
		}
		wg.Wait()
		stored, err := s.PluginGet("ids", "race")
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			if v != string(stored) {
				t.Errorf("concurrent PluginCreate %d got %q, the key holds %q", i, v, stored)
			}
		}
	}},
	{"plugins/apply", func(t *testing.T, b any) {
		s := need[storage.PluginStore](t, b)
		list := func(plugin string) []string {
			t.Helper()
			var keys []string
			must(t, s.PluginList(plugin, func(k string, v []byte) error { keys = append(keys, k+"="+string(v)); return nil }))
			return keys
		}
		must(t, s.PluginPut("hooks", "old", []byte("o")))
		must(t, s.PluginApply("hooks", []storage.PluginOp{
			{Key: "b", Value: []byte("2")},
			{Key: "a", Value: []byte("1")},
			{Key: "old", Delete: true},
			{Key: "a", Value: []byte("1 again")}, // a later write of a key wins
			{Key: "never stored", Delete: true},
		}))
		if got, want := list("hooks"), []string{"a=1 again", "b=2"}; !slices.Equal(got, want) {
			t.Errorf("after a batch: %q, want %q", got, want)
		}
		// A namespace never written: a delete of nothing, then a put.
		must(t, s.PluginApply("fresh", []storage.PluginOp{{Key: "k", Delete: true}, {Key: "k", Value: []byte("v")}}))
		if got, want := list("fresh"), []string{"k=v"}; !slices.Equal(got, want) {
			t.Errorf("a new namespace: %q, want %q", got, want)
		}
		must(t, s.PluginApply("hooks", nil))

		// A batch with one refused write is refused whole, writing nothing.
		put := storage.PluginOp{Key: "c", Value: []byte("3")}
		refused := []struct {
			name   string
			plugin string
			ops    []storage.PluginOp
		}{
			{"empty key", "hooks", []storage.PluginOp{put, {Key: "", Value: []byte("v")}}},
			{"long key", "hooks", []storage.PluginOp{put, {Key: strings.Repeat("k", storage.MaxPluginKey+1), Value: []byte("v")}}},
			{"delete of an empty key", "hooks", []storage.PluginOp{put, {Key: "", Delete: true}}},
			{"value over the limit", "hooks", []storage.PluginOp{put, {Key: "big", Value: make([]byte, storage.MaxPluginValue+1)}}},
			{"empty plugin name", "", []storage.PluginOp{put}},
			{"long plugin name", strings.Repeat("p", storage.MaxPluginName+1), []storage.PluginOp{put}},
		}
		for _, tt := range refused {
			t.Run(tt.name, func(t *testing.T) {
				if err := s.PluginApply(tt.plugin, tt.ops); !errors.Is(err, storage.ErrInvalid) {
					t.Errorf("PluginApply: %v, want ErrInvalid", err)
				}
				if _, err := s.PluginGet("hooks", "c"); !errors.Is(err, storage.ErrPluginKeyNotFound) {
					t.Errorf("a refused batch's first write was made: %v", err)
				}
			})
		}
		if got, want := list("hooks"), []string{"a=1 again", "b=2"}; !slices.Equal(got, want) {
			t.Errorf("after the refused batches: %q, want %q", got, want)
		}
	}},
}

// fetcher is a backend that stores polls.
type fetcher interface {
	CreateFeed(f *storage.Feed) error
	Item(feedID uint64, itemID string) (storage.Item, error)
	Items(feedID uint64, q storage.ItemQuery) ([]storage.Item, error)
	RecordFetch(feedID uint64, items []storage.Item, o storage.Observation, fn func(f *storage.Feed, o *storage.Observation, added []storage.Item) error) (storage.Fetched, error)
}

// undated returns items with the IDs of the document a poll at polled
// read, without a date of their own: dated by the fetch.
func undated(polled time.Time, ids ...string) []storage.Item {
	out := make([]storage.Item, len(ids))
	for i, id := range ids {
		out[i] = storage.Item{ID: id, Title: "reading " + id, Fetched: polled}
	}
	return out
}

// droppedDatedCase: after a restart (or a takeover), an item with a date
// of its own whose ID retention dropped is judged by its date, not
// refused for its ID: a guid reissued for a new item dated newer than
// every item kept is stored. An item without a date of its own under a
// dropped ID is refused (the document still lists it).
var droppedDatedCase = restartCase{"items/retention-dropped-dated-judged-by-date", func(t *testing.T, b any, reopen Reopen) {
	s := need[fetcher](t, b)
	f := remote("http://127.0.0.1/reissued")
	f.Retention = storage.Retention{MaxItems: 2}
	must(t, s.CreateFeed(f))
	poll := func(n int, items ...storage.Item) storage.Fetched {
		t.Helper()
		polled := at.Add(time.Duration(n) * time.Hour)
		for i := range items {
			items[i].Fetched = polled
		}
		res, err := s.RecordFetch(f.ID, items, storage.Observation{At: polled}, func(x *storage.Feed, _ *storage.Observation, _ []storage.Item) error {
			x.Listed = len(items)
			return nil
		})
		must(t, err)
		return res
	}
	old := func(id string, m int) storage.Item {
		return storage.Item{ID: id, Title: id, Published: at.Add(time.Duration(m) * time.Minute)}
	}
	poll(0, old("alert-1", 0), old("alert-2", 1), old("alert-3", 2), storage.Item{ID: "u1", Title: "u1"})
	// alert-1 and u1 went, the oldest (u1 is dated by the fetch).
	s = need[fetcher](t, reopen(t, s))
	res := poll(1, storage.Item{ID: "alert-1", Title: "new alert", Published: at.Add(time.Hour)}, old("alert-2", 1), old("alert-3", 2),
		storage.Item{ID: "u1", Title: "u1"})
	wantIDs(t, "added", res.Added, "alert-1")
	got, err := s.Items(f.ID, storage.ItemQuery{Order: storage.ByArrival})
	must(t, err)
	wantIDs(t, "kept", got, "alert-1", "alert-3")
}}

// droppedShortCase: a short document (a publisher's glitch, a truncated
// reply) or a poll that does not know how many items its document lists
// (Listed 0) does not shrink the set of IDs retention dropped: after a
// restart the whole document brings none of them back.
var droppedShortCase = restartCase{"items/retention-dropped-short-document", func(top *testing.T, b any, reopen Reopen) {
	for _, tc := range []struct {
		name   string
		listed int // the short polls' Listed
	}{
		{"short-document", 1},
		{"listed-unknown", 0},
	} {
		top.Run(tc.name, func(t *testing.T) {
			s := need[fetcher](t, b)
			f := remote("http://127.0.0.1/short/" + tc.name)
			f.Retention = storage.Retention{MaxItems: 2}
			must(t, s.CreateFeed(f))
			poll := func(n, listed int, ids ...string) storage.Fetched {
				t.Helper()
				polled := at.Add(time.Duration(n) * time.Hour)
				res, err := s.RecordFetch(f.ID, undated(polled, ids...), storage.Observation{At: polled}, func(x *storage.Feed, _ *storage.Observation, _ []storage.Item) error {
					x.Listed = listed
					return nil
				})
				must(t, err)
				return res
			}
			poll(0, 6, "u1", "u2", "u3", "u4", "u5", "u6") // u1…u4 dropped
			poll(1, tc.listed, "u7")                       // short documents, each dropping one
			poll(2, tc.listed, "u8")
			s = need[fetcher](t, reopen(top, s))
			b = s
			res := poll(3, 8, "u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8")
			wantIDs(t, "added after the restart", res.Added)
		})
	}
}}

var restartCases = []restartCase{
	droppedDatedCase,
	droppedShortCase,
	// The items of a remote feed that retention dropped do not come back
	// after a restart (or a takeover) when its document still lists them
	// without dates: dated by the first poll after the restart, they
	// would look newer than every item kept. The items new to the
	// document are stored.
	{"items/retention-dropped-stay-dropped", func(top *testing.T, b any, reopen Reopen) {
		type poll struct {
			listed []string // the document, oldest item first
			whole  bool     // the poll passes the whole document, else its last item (new)
		}
		for _, tc := range []struct {
			name  string
			kept  int
			polls []poll // before the restart
			after poll   // the first poll after it
			added []string
			gone  []string // dropped: not stored
		}{
			{name: "dropped-at-once", kept: 2,
				polls: []poll{{listed: []string{"u1", "u2", "u3", "u4"}, whole: true}},
				after: poll{listed: []string{"u1", "u2", "u3", "u4", "u5"}, whole: true},
				added: []string{"u5"}, gone: []string{"u1", "u2"}},
			{name: "document-grows", kept: 2,
				polls: []poll{
					{listed: []string{"u1", "u2"}, whole: true},
					{listed: []string{"u1", "u2", "u3"}},
					{listed: []string{"u1", "u2", "u3", "u4"}},
					{listed: []string{"u1", "u2", "u3", "u4", "u5"}},
				},
				after: poll{listed: []string{"u1", "u2", "u3", "u4", "u5", "u6"}, whole: true},
				added: []string{"u6"}, gone: []string{"u1", "u2", "u3"}},
			{name: "sliding-window", kept: 2,
				polls: []poll{
					{listed: []string{"u1", "u2", "u3", "u4"}, whole: true},
					{listed: []string{"u2", "u3", "u4", "u5"}},
					{listed: []string{"u3", "u4", "u5", "u6"}},
				},
				after: poll{listed: []string{"u4", "u5", "u6", "u7"}, whole: true},
				added: []string{"u7"}, gone: []string{"u1", "u2", "u3", "u4"}},
		} {
			top.Run(tc.name, func(t *testing.T) {
				s := need[fetcher](t, b)
				f := remote("http://127.0.0.1/undated/" + tc.name)
				f.Retention = storage.Retention{MaxItems: tc.kept}
				must(t, s.CreateFeed(f))
				record := func(s fetcher, n int, p poll) storage.Fetched {
					t.Helper()
					polled := at.Add(time.Duration(n) * time.Hour)
					in := undated(polled, p.listed...)
					if !p.whole {
						in = in[len(in)-1:]
					}
					res, err := s.RecordFetch(f.ID, in, storage.Observation{At: polled}, func(x *storage.Feed, _ *storage.Observation, _ []storage.Item) error {
						x.Polls++
						x.Listed = len(p.listed)
						return nil
					})
					must(t, err)
					return res
				}
				for i, p := range tc.polls {
					record(s, i, p)
				}
				// The restarted backend serves the cases after this one.
				s = need[fetcher](t, reopen(top, s))
				b = s
				res := record(s, len(tc.polls), tc.after)
				wantIDs(t, "added after the restart", res.Added, tc.added...)
				for _, id := range tc.gone {
					if it, err := s.Item(f.ID, id); err == nil {
						t.Errorf("item %s, dropped by retention, stored again (seq %d)", id, it.Seq)
					} else if !errors.Is(err, storage.ErrItemNotFound) {
						t.Errorf("item %s: %v", id, err)
					}
				}
				got, err := s.Items(f.ID, storage.ItemQuery{Order: storage.ByArrival})
				must(t, err)
				if len(got) != tc.kept {
					t.Errorf("%d items kept, want %d", len(got), tc.kept)
				}
			})
		}
	}},
}
