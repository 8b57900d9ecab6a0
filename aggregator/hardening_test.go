package aggregator

import (
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/reader/parser"
	"github.com/slogfeed/slogfeed/storage"
)

func TestRecordRepairs(t *testing.T) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	var f storage.Feed
	r := parser.Repairs{InvalidUTF8: 3, BadDates: []string{"a", "b"}, Last: "item \"b\": published date \"9999\" …"}
	recordRepairs(&f, r, []storage.Item{{ID: "a"}, {ID: "c"}}, at)
	if f.InvalidUTF8 != 3 || f.BadDates != 1 || f.LastRepair != r.Last || !f.LastRepairAt.Equal(at) {
		t.Errorf("after the first fetch: %+v", f)
	}
	// The same document again: its bytes count again (it was fetched
	// again), its items are not new and their dates do not.
	recordRepairs(&f, r, nil, at.Add(time.Minute))
	if f.InvalidUTF8 != 6 || f.BadDates != 1 {
		t.Errorf("after the second fetch: %+v", f)
	}
	// A clean fetch keeps the counts and the last repair.
	recordRepairs(&f, parser.Repairs{}, []storage.Item{{ID: "d"}}, at.Add(2*time.Minute))
	if f.InvalidUTF8 != 6 || f.BadDates != 1 || !f.LastRepairAt.Equal(at.Add(time.Minute)) {
		t.Errorf("after a clean fetch: %+v", f)
	}
}
