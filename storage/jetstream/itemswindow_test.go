package jetstream_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

// windowBatches are the AddItems calls TestItemsWindowAgreesWithBolt
// makes: items in order, items arriving late with old dates, dates past
// the years UnixNano holds and before them, equal dates, items without a
// publish date, then items in order again.
func windowBatches() [][]storage.Item {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	mk := func(id string, pub, fetched time.Time) storage.Item {
		return storage.Item{ID: id, Title: id, Published: pub, Fetched: fetched}
	}
	var out [][]storage.Item
	var b []storage.Item
	for i := range 300 {
		at := t0.Add(time.Duration(i) * time.Minute)
		b = append(b, mk(fmt.Sprintf("a%d", i), at, at))
	}
	out = append(out, b[:150], b[150:])
	b = nil
	for i := range 20 { // late: arrive now, dated days before everything
		b = append(b, mk(fmt.Sprintf("late%d", i), t0.Add(-time.Duration(i+1)*24*time.Hour), t0.Add(6*time.Hour)))
	}
	out = append(out, b)
	out = append(out, []storage.Item{
		mk("future", time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC), t0.Add(6*time.Hour)),
		mk("far-future", time.Date(2400, 1, 1, 0, 0, 0, 0, time.UTC), t0.Add(6*time.Hour)),
		mk("far-past", time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC), t0.Add(6*time.Hour)),
	})
	b = nil
	for i := range 30 { // equal dates
		b = append(b, mk(fmt.Sprintf("eq%d", i), t0.Add(100*time.Minute), t0.Add(7*time.Hour)))
	}
	out = append(out, b)
	b = nil
	for i := range 10 { // no publish date: placed by fetch time
		b = append(b, mk(fmt.Sprintf("nodate%d", i), time.Time{}, t0.Add(time.Duration(200+i)*time.Minute)))
	}
	out = append(out, b)
	b = nil
	for i := range 200 {
		at := t0.Add(time.Duration(300+i) * time.Minute)
		b = append(b, mk(fmt.Sprintf("b%d", i), at, at))
	}
	return append(out, b)
}

func itemIDs(items []storage.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

// windowSetups are the JetStream setups TestItemsWindowAgreesWithBolt
// runs on, as the contract suites: one server; one server whose store
// owns every feed (its index is trusted, polls read nothing back); a
// 3-server cluster (R3 assets, direct gets answered by any replica),
// skipped with SLOGFEED_SKIP_JS_CLUSTER_CONTRACTS=1.
func windowSetups() []struct {
	name string
	open func(t *testing.T) *sjs.Store
} {
	return []struct {
		name string
		open func(t *testing.T) *sjs.Store
	}{
		{"one server", func(t *testing.T) *sjs.Store {
			st, _ := openStore(t, jstest.NewServer(t))
			return st
		}},
		{"owning everything", func(t *testing.T) *sjs.Store {
			st, _ := openStore(t, jstest.NewServer(t))
			if err := st.SetOwner(cluster.Everything); err != nil {
				t.Fatal(err)
			}
			return st
		}},
		{"cluster", func(t *testing.T) *sjs.Store {
			if os.Getenv("SLOGFEED_SKIP_JS_CLUSTER_CONTRACTS") == "1" {
				t.Skip("SLOGFEED_SKIP_JS_CLUSTER_CONTRACTS=1")
			}
			st, _ := openStore(t, jstest.NewCluster(t, 3))
			return st
		}},
	}
}

// TestItemsWindowAgreesWithBolt asks the same queries of the bbolt store
// and of the JetStream backend holding the same items and expects the
// same answers, each of the backend's reading a bounded number of item
// messages where the query is one it reads a window for: by arrival with
// a Limit, by publish time with a Limit, and without a Limit within
// Since and Until.
func TestItemsWindowAgreesWithBolt(t *testing.T) {
	for _, setup := range windowSetups() {
		t.Run(setup.name, func(t *testing.T) {
			// Paging forward one item at a time (a consumer a page) is
			// walked on one server only: the other setups read those
			// pages by the same path, and page by 7 and by 50.
			testItemsWindow(t, setup.open(t), setup.name == "one server")
		})
	}
}

// windowStore is what the window tests ask of a bbolt store and of the
// JetStream backend alike.
type windowStore interface {
	CreateFeed(*storage.Feed) error
	AddItems(uint64, []storage.Item) ([]storage.Item, error)
	Items(uint64, storage.ItemQuery) ([]storage.Item, error)
	Item(uint64, string) (storage.Item, error)
}

// boltBeside opens a bbolt store and the backend of js, both closed with
// the test, to ask them the same queries.
func boltBeside(t *testing.T, js *sjs.Store) (*storage.Store, *sjs.Backend) {
	t.Helper()
	bolt, err := storage.Open(filepath.Join(t.TempDir(), "w.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bolt.Close() })
	be := sjs.NewBackend(js, 0)
	t.Cleanup(func() { _ = be.Close() })
	return bolt, be
}

func testItemsWindow(t *testing.T, js *sjs.Store, forwardByOne bool) {
	bolt, be := boltBeside(t, js)
	stores := []windowStore{bolt, be}
	feeds := make([]uint64, 2)
	total := 0
	for i, st := range stores {
		// Another feed's items between this one's: sequences are not
		// consecutive within a feed.
		other := storage.Feed{Kind: storage.KindSensor, Slug: "other"}
		f := storage.Feed{Kind: storage.KindSensor, Slug: "w"}
		if err := st.CreateFeed(&other); err != nil {
			t.Fatal(err)
		}
		if err := st.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
		feeds[i] = f.ID
		total = 0
		for k, b := range windowBatches() {
			if _, err := st.AddItems(other.ID, []storage.Item{{ID: fmt.Sprint(k), Fetched: time.Unix(int64(k), 0)}}); err != nil {
				t.Fatal(err)
			}
			added, err := st.AddItems(f.ID, b)
			if err != nil || len(added) != len(b) {
				t.Fatalf("AddItems: %d of %d, %v", len(added), len(b), err)
			}
			total += len(b)
		}
	}
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		q    storage.ItemQuery
		max  uint64 // item messages the backend may read; 0: not checked
	}{
		{"newest", storage.ItemQuery{Limit: 1}, 3},
		{"page", storage.ItemQuery{Limit: 51}, 2 * 52},
		{"more than held", storage.ItemQuery{Limit: 1000}, 0},
		{"all", storage.ItemQuery{}, 0},
		{"since", storage.ItemQuery{Limit: 20, Since: t0.Add(350 * time.Minute)}, 3 * 21},
		{"since, fewer", storage.ItemQuery{Limit: 200, Since: t0.Add(400 * time.Minute)}, 0},
		{"until", storage.ItemQuery{Limit: 25, Until: t0.Add(120 * time.Minute)}, 0},
		{"since and until", storage.ItemQuery{Limit: 10, Since: t0.Add(-3 * 24 * time.Hour), Until: t0.Add(100 * time.Minute)}, 0},
		{"equal dates", storage.ItemQuery{Limit: 7, Since: t0.Add(100 * time.Minute), Until: t0.Add(101 * time.Minute)}, 0},
		{"far future", storage.ItemQuery{Limit: 1, Since: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}, 0},
		{"far past", storage.ItemQuery{Limit: 1, Until: time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)}, 0},
		{"oldest", storage.ItemQuery{Limit: 10, Order: storage.ByArrivalAsc}, 2 * 11},
		{"oldest since", storage.ItemQuery{Limit: 5, Order: storage.ByArrivalAsc, Since: t0.Add(490 * time.Minute)}, 0},
		// By publish time: the newest, a date past 2262 first; ties of
		// equal dates and of dates beyond either end of the years Unix
		// nanoseconds hold; windows that hold only such dates; late
		// arrivals dated before everything.
		{"by publish time", storage.ItemQuery{Limit: 40, Order: storage.ByPublished}, 2 * 41},
		{"by publish time, newest", storage.ItemQuery{Limit: 1, Order: storage.ByPublished}, 3},
		{"by publish time, window", storage.ItemQuery{Limit: 40, Order: storage.ByPublished, Since: t0.Add(-2 * 24 * time.Hour), Until: t0.Add(200 * time.Minute)}, 2 * 41},
		{"by publish time, equal dates", storage.ItemQuery{Limit: 12, Order: storage.ByPublished, Until: t0.Add(100*time.Minute + 1)}, 2 * 13},
		{"by publish time, undated", storage.ItemQuery{Limit: 5, Order: storage.ByPublished, Since: t0.Add(200 * time.Minute), Until: t0.Add(300 * time.Minute)}, 2 * 6},
		{"by publish time, late", storage.ItemQuery{Limit: 8, Order: storage.ByPublished, Until: t0}, 2 * 9},
		{"by publish time, far future", storage.ItemQuery{Limit: 3, Order: storage.ByPublished, Since: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}, 3},
		{"by publish time, far past", storage.ItemQuery{Limit: 3, Order: storage.ByPublished, Until: time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)}, 3},
		{"by publish time, beyond 2262 to 2500", storage.ItemQuery{Limit: 3, Order: storage.ByPublished, Since: time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC)}, 3},
		{"by publish time, more than held", storage.ItemQuery{Limit: 1000, Order: storage.ByPublished}, 0},
		{"by publish time, none", storage.ItemQuery{Limit: 10, Order: storage.ByPublished, Since: t0.Add(-400 * 24 * time.Hour), Until: t0.Add(-300 * 24 * time.Hour)}, 1},
		// Without a Limit, a window of publish times reads what may be in it.
		{"window, no limit", storage.ItemQuery{Since: t0.Add(-5 * 24 * time.Hour), Until: t0}, 2 * 6},
		{"window, no limit, by publish time", storage.ItemQuery{Order: storage.ByPublished, Since: t0.Add(480 * time.Minute)}, 2 * 21},
		{"window, no limit, oldest first", storage.ItemQuery{Order: storage.ByArrivalAsc, Until: time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, err := bolt.Items(feeds[0], c.q)
			if err != nil {
				t.Fatal(err)
			}
			before, readers := sjs.BodiesRead(js), sjs.ItemReaders(js)
			got, err := be.Items(feeds[1], c.q)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(itemIDs(got), itemIDs(want)) {
				t.Errorf("Items(%+v) =\n%v\nbbolt:\n%v", c.q, itemIDs(got), itemIDs(want))
			}
			if read := sjs.BodiesRead(js) - before; c.max > 0 && read > c.max {
				t.Errorf("Items(%+v) read %d item messages, more than %d", c.q, read, c.max)
			}
			if n := sjs.ItemReaders(js) - readers; c.max > 0 && c.q.Limit > 0 && c.q.Order != storage.ByArrivalAsc && n > 0 {
				t.Errorf("Items(%+v) created %d consumers, want batched gets", c.q, n)
			}
		})
	}
	// Paging by publish time: each page the newest before the oldest
	// time of the page before (Until), as far back as the dates go.
	for _, limit := range []int{1, 7, 50} {
		t.Run(fmt.Sprintf("paging by publish time by %d", limit), func(t *testing.T) {
			var pages [2][][]string
			for i, st := range stores {
				var until time.Time
				for range total + 2 {
					q := storage.ItemQuery{Limit: limit, Order: storage.ByPublished, Until: until}
					before := sjs.BodiesRead(js)
					page, err := st.Items(feeds[i], q)
					if err != nil {
						t.Fatal(err)
					}
					if read := sjs.BodiesRead(js) - before; i == 1 && read > uint64(2*(limit+1)) {
						t.Fatalf("Items(%+v) read %d item messages for a page of %d", q, read, limit)
					}
					if len(page) == 0 {
						break
					}
					pages[i] = append(pages[i], itemIDs(page))
					last := page[len(page)-1]
					if until = last.Published; until.IsZero() {
						until = last.Fetched
					}
				}
			}
			if !slices.EqualFunc(pages[0], pages[1], slices.Equal) {
				t.Errorf("pages of the backend:\n%v\nbbolt:\n%v", pages[1], pages[0])
			}
			if len(pages[1]) < 2 {
				t.Errorf("%d pages", len(pages[1]))
			}
		})
	}
	// Paging back (BeforeSeq) and forward (AfterSeq), each store by its
	// own sequences, page by page.
	for _, limit := range []int{1, 7, 50, 1000} {
		for _, dir := range []string{"back", "forward", "forward-asc"} {
			if limit == 1 && dir != "back" && !forwardByOne {
				continue
			}
			t.Run(fmt.Sprintf("paging %s by %d", dir, limit), func(t *testing.T) {
				var pages [2][][]string
				for i, st := range stores {
					var cursor uint64
					for range total + 2 {
						q := storage.ItemQuery{Limit: limit, Order: storage.ByArrival, BeforeSeq: cursor}
						switch dir {
						case "forward":
							// AfterSeq 0 with ByArrival is the newest page.
							q = storage.ItemQuery{Limit: limit, Order: storage.ByArrivalAsc}
							if cursor > 0 {
								q = storage.ItemQuery{Limit: limit, Order: storage.ByArrival, AfterSeq: cursor}
							}
						case "forward-asc":
							q = storage.ItemQuery{Limit: limit, Order: storage.ByArrivalAsc, AfterSeq: cursor}
						}
						before, readers := sjs.BodiesRead(js), sjs.ItemReaders(js)
						page, err := st.Items(feeds[i], q)
						if err != nil {
							t.Fatal(err)
						}
						if read := sjs.BodiesRead(js) - before; i == 1 && limit < 1000 && read > uint64(3*(limit+1)) {
							t.Fatalf("Items(%+v) read %d item messages for a page of %d", q, read, limit)
						}
						if n := sjs.ItemReaders(js) - readers; i == 1 && dir == "back" && n > 0 {
							t.Fatalf("Items(%+v) created %d consumers, want batched gets", q, n)
						}
						if len(page) == 0 {
							break
						}
						pages[i] = append(pages[i], itemIDs(page))
						cursor = page[len(page)-1].Seq
						if dir == "forward" && cursor == 0 {
							t.Fatal("page without sequences")
						}
					}
				}
				if !slices.EqualFunc(pages[0], pages[1], slices.Equal) {
					t.Errorf("pages of the backend:\n%v\nbbolt:\n%v", pages[1], pages[0])
				}
				n := 0
				for _, p := range pages[1] {
					n += len(p)
				}
				if n != total {
					t.Errorf("%d items paged, want %d", n, total)
				}
			})
		}
	}
	t.Run("item", func(t *testing.T) {
		for _, b := range windowBatches() {
			for _, want := range b {
				before := sjs.BodiesRead(js)
				got, err := be.Item(feeds[1], want.ID)
				if err != nil || got.ID != want.ID || !got.Published.Equal(want.Published) || got.Seq == 0 {
					t.Fatalf("Item(%q) = %q %v seq %d, %v", want.ID, got.ID, got.Published, got.Seq, err)
				}
				if read := sjs.BodiesRead(js) - before; read > 1 {
					t.Fatalf("Item(%q) read %d item messages", want.ID, read)
				}
			}
		}
		for _, id := range []string{"missing", "", "a300"} {
			if _, err := be.Item(feeds[1], id); !errors.Is(err, storage.ErrItemNotFound) {
				t.Errorf("Item(%q) = %v, want ErrItemNotFound", id, err)
			}
			if _, err := bolt.Item(feeds[0], id); !errors.Is(err, storage.ErrItemNotFound) {
				t.Errorf("bbolt Item(%q) = %v, want ErrItemNotFound", id, err)
			}
		}
	})
}

// TestItemsWindowAfterRemovals removes items through another store (as
// another node's retention does), behind the reading store's index, and
// expects pages and item lookups to stay those of the whole subject.
func TestItemsWindowAfterRemovals(t *testing.T) {
	c := jstest.NewServer(t)
	reader, _ := openStore(t, c)
	writer, _ := openStore(t, c)
	rb, wb := sjs.NewBackend(reader, 0), sjs.NewBackend(writer, 0)
	defer rb.Close()
	defer wb.Close()
	f := storage.Feed{Kind: storage.KindSensor, Slug: "r"}
	if err := wb.CreateFeed(&f); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	// Each arrival dated before the one before it, but the last: retention
	// by publish time removes the newest arrivals but the last message.
	var its []storage.Item
	for i := range 400 {
		its = append(its, storage.Item{ID: fmt.Sprintf("d%d", i), Published: t0.Add(-time.Duration(i) * time.Minute), Fetched: t0})
	}
	its = append(its, storage.Item{ID: "last", Published: t0.Add(time.Hour), Fetched: t0})
	if _, err := wb.AddItems(f.ID, its); err != nil {
		t.Fatal(err)
	}
	if _, err := rb.Items(f.ID, storage.ItemQuery{Limit: 10}); err != nil { // the reader's index holds all 401
		t.Fatal(err)
	}
	if _, err := wb.UpdateFeed(f.ID, func(f *storage.Feed) error { f.Retention.MaxItems = 150; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.ApplyRetention(testCtx(t), mustFeed(t, wb, f.ID)); err != nil {
		t.Fatal(err)
	}
	all, err := rb.Items(f.ID, storage.ItemQuery{})
	if err != nil || len(all) != 150 || all[0].ID != "last" {
		t.Fatalf("all items: %d, first %v, %v", len(all), itemIDs(all[:min(1, len(all))]), err)
	}
	for _, limit := range []int{1, 2, 10, 51, 149, 150, 151} {
		got, err := rb.Items(f.ID, storage.ItemQuery{Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		if want := all[:min(limit, len(all))]; !slices.Equal(itemIDs(got), itemIDs(want)) {
			t.Errorf("Items(limit %d) = %v, want %v", limit, itemIDs(got), itemIDs(want))
		}
	}
	if _, err := rb.Item(f.ID, "d399"); !errors.Is(err, storage.ErrItemNotFound) {
		t.Errorf("Item of a removed item = %v, want ErrItemNotFound", err)
	}
	if it, err := rb.Item(f.ID, "d1"); err != nil || it.ID != "d1" {
		t.Errorf("Item(d1) = %q, %v", it.ID, err)
	}
}

func mustFeed(t *testing.T, b *sjs.Backend, id uint64) storage.Feed {
	t.Helper()
	f, err := b.Feed(id)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestItemsByArrivalWindowBeyondNanos: a page by arrival whose window
// has a bound beyond the years Unix nanoseconds hold (Until after 2262,
// Since before 1678) is a window still: the newest items dated past the
// bound are not in it, and the page holds the Limit newest that are, as
// on bbolt.
func TestItemsByArrivalWindowBeyondNanos(t *testing.T) {
	js, _ := openStore(t, jstest.NewServer(t))
	bolt, be := boltBeside(t, js)
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	batches := [][]storage.Item{
		{{ID: "a", Published: t0, Fetched: t0}},
		{{ID: "b", Published: t0.Add(time.Minute), Fetched: t0}},
		{{ID: "far-future", Published: time.Date(2400, 1, 1, 0, 0, 0, 0, time.UTC), Fetched: t0}},
		{{ID: "far-past", Published: time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC), Fetched: t0}},
	}
	ids := make([]uint64, 2)
	for i, st := range []windowStore{bolt, be} {
		f := storage.Feed{Kind: storage.KindSensor, Slug: "w"}
		if err := st.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
		ids[i] = f.ID
		for _, b := range batches {
			if added, err := st.AddItems(f.ID, b); err != nil || len(added) != 1 {
				t.Fatalf("AddItems: %v, %v", added, err)
			}
		}
	}
	for _, c := range []struct {
		name string
		q    storage.ItemQuery
	}{
		{"until 2300", storage.ItemQuery{Limit: 2, Until: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"since 1600", storage.ItemQuery{Limit: 1, Since: time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"since 1600 until 2300", storage.ItemQuery{Limit: 2, Since: time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}},
	} {
		want, err := bolt.Items(ids[0], c.q)
		if err != nil {
			t.Fatal(err)
		}
		got, err := be.Items(ids[1], c.q)
		if err != nil {
			t.Fatal(err)
		}
		if w, g := itemIDs(want), itemIDs(got); !slices.Equal(w, g) {
			t.Errorf("%s: bbolt %v, jetstream %v", c.name, w, g)
		}
	}
}
