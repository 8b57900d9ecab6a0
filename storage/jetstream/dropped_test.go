package jetstream_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

// TestDroppedKeptWhenRecordWriteFails: retention writes the IDs it drops
// into the feed's record before it deletes their messages, so a poll
// whose own record write fails (no quorum, a conflict to the end) loses
// none of them: after a takeover the document brings back only its new
// item.
func TestDroppedKeptWhenRecordWriteFails(t *testing.T) {
	c := jstest.NewServer(t)
	st, _ := openStore(t, c)
	b := sjs.NewBackend(st, 0)
	t.Cleanup(func() { b.Close() })
	servers := map[*sjs.Backend]*jstest.Cluster{b: c}
	f := storage.Feed{Kind: storage.KindRemote, URL: "http://pub.test/u", Policy: "auto", Retention: storage.Retention{MaxItems: 2}}
	if err := b.CreateFeed(&f); err != nil {
		t.Fatal(err)
	}
	fetch := func(b *sjs.Backend, fail bool, ids ...string) (storage.Fetched, error) {
		now := time.Now()
		items := make([]storage.Item, len(ids))
		for i, id := range ids {
			items[i] = storage.Item{ID: id, Title: "reading " + id, Fetched: now}
		}
		runs := 0
		return b.RecordFetch(f.ID, items, storage.Observation{At: now}, func(x *storage.Feed, _ *storage.Observation, _ []storage.Item) error {
			runs++
			if fail && runs > 1 { // the write, after the items were added
				return errors.New("the record cannot be written")
			}
			x.Listed = len(ids)
			return nil
		})
	}
	if _, err := fetch(b, true, "u1", "u2", "u3", "u4"); err == nil {
		t.Fatal("the poll's record write did not fail")
	}
	nb := reopen(t, servers, b, nil).(*sjs.Backend)
	res, err := fetch(nb, false, "u1", "u2", "u3", "u4", "u5")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range res.Added {
		got = append(got, it.ID)
	}
	if !slices.Equal(got, []string{"u5"}) {
		t.Errorf("after the failed write and a takeover, added %v; want [u5]", got)
	}
}
