package jetstream_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/slogfeed/slogfeed/storage"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

// legacyItem is a message of testdata/legacyitems.json: an item and the
// time header an earlier version of slogfeed wrote for it, its sort
// time's UnixNano as a plain integer, which for a date outside the years
// 1678 to 2262 is another date (1500 reads as 2084, 2400 as 1815).
type legacyItem struct {
	ID         string    `json:"id"`
	Published  time.Time `json:"published"`
	Fetched    time.Time `json:"fetched"`
	TimeHeader string    `json:"time_header"`
}

// TestItemsByTimeLegacyHeaders reads by publish time a feed whose
// messages carry the time headers of an earlier version: the index
// cannot take their times for exact, so the first reads take every such
// item as a candidate, agreeing with bbolt, and the items read are exact
// for the index from then on: the same queries again read a page's worth
// of messages.
func TestItemsByTimeLegacyHeaders(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "legacyitems.json"))
	if err != nil {
		t.Fatal(err)
	}
	var legacy []legacyItem
	if err := json.Unmarshal(raw, &legacy); err != nil {
		t.Fatal(err)
	}
	bolt, err := storage.Open(filepath.Join(t.TempDir(), "l.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	bf := storage.Feed{Kind: storage.KindSensor, Slug: "legacy"}
	if err := bolt.CreateFeed(&bf); err != nil {
		t.Fatal(err)
	}
	c := jstest.NewServer(t)
	writer, js := openStore(t, c)
	wb := sjs.NewBackend(writer, 0)
	defer wb.Close()
	f := storage.Feed{Kind: storage.KindSensor, Slug: "legacy"}
	if err := wb.CreateFeed(&f); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	for _, l := range legacy {
		it := storage.Item{ID: l.ID, Title: l.ID, Published: l.Published, Fetched: l.Fetched}
		if _, err := bolt.AddItems(bf.ID, []storage.Item{it}); err != nil {
			t.Fatal(err)
		}
		it.FeedID = f.ID
		data, err := json.Marshal(&it)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg("slogfeed.items." + strconv.FormatUint(f.ID, 10))
		m.Header.Set(sjs.ItemKeyHeader, sjs.MsgID(f.ID, l.ID))
		m.Header.Set(sjs.ItemTimeHeader, l.TimeHeader)
		m.Data = data
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	reader, _ := openStore(t, c) // its index is read from the headers
	rb := sjs.NewBackend(reader, 0)
	defer rb.Close()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		q    storage.ItemQuery
	}{
		{"newest", storage.ItemQuery{Limit: 3, Order: storage.ByPublished}},
		{"far past", storage.ItemQuery{Limit: 2, Order: storage.ByPublished, Until: time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"beyond 2262", storage.ItemQuery{Limit: 5, Order: storage.ByPublished, Since: time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"window", storage.ItemQuery{Limit: 4, Order: storage.ByPublished, Since: t0.Add(5 * time.Minute), Until: t0.Add(15 * time.Minute)}},
		{"undated", storage.ItemQuery{Limit: 2, Order: storage.ByPublished, Until: t0.Add(time.Minute)}},
		{"window, no limit", storage.ItemQuery{Since: time.Date(1400, 1, 1, 0, 0, 0, 0, time.UTC), Until: t0.Add(2 * time.Minute)}},
	}
	for _, pass := range []string{"first", "again"} {
		for _, c := range cases {
			t.Run(pass+"/"+c.name, func(t *testing.T) {
				want, err := bolt.Items(bf.ID, c.q)
				if err != nil {
					t.Fatal(err)
				}
				before := sjs.BodiesRead(reader)
				got, err := rb.Items(f.ID, c.q)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(itemIDs(got), itemIDs(want)) {
					t.Errorf("Items(%+v) =\n%v\nbbolt:\n%v", c.q, itemIDs(got), itemIDs(want))
				}
				// A page's worth, with the items between the runs of the
				// subject a read takes (up to 8 between two runs).
				if read := sjs.BodiesRead(reader) - before; pass == "again" && read > uint64(2*(max(c.q.Limit, len(want))+1)+8) {
					t.Errorf("Items(%+v) read %d item messages again", c.q, read)
				}
			})
		}
	}
}
