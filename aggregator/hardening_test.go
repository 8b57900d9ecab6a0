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
	r := parser.Repairs{InvalidUTF8: 3, UTF8Items: []string{"a", "c"}, BadDates: []string{"a", "b"}, Last: "item \"b\": published date \"9999\" …"}
	recordRepairs(&f, r, []storage.Item{{ID: "a"}, {ID: "c"}}, at)
	if f.InvalidUTF8 != 2 || f.BadDates != 1 || f.LastRepair != r.Last || !f.LastRepairAt.Equal(at) || !f.RepairsPerItem {
		t.Errorf("after the first fetch: %+v", f)
	}
	// The same document again: its items are not new, and neither their
	// bytes nor their dates count again.
	recordRepairs(&f, r, nil, at.Add(time.Minute))
	if f.InvalidUTF8 != 2 || f.BadDates != 1 || !f.LastRepairAt.Equal(at) {
		t.Errorf("after the second fetch: %+v", f)
	}
	// A clean fetch keeps the counts and the last repair.
	recordRepairs(&f, parser.Repairs{}, []storage.Item{{ID: "d"}}, at.Add(2*time.Minute))
	if f.InvalidUTF8 != 2 || f.BadDates != 1 || !f.LastRepairAt.Equal(at) {
		t.Errorf("after a clean fetch: %+v", f)
	}
	// A feed counted by an older slogfeed (bytes at every fetch) drops
	// that count at its next fetch.
	old := storage.Feed{InvalidUTF8: 117, BadDates: 3}
	recordRepairs(&old, parser.Repairs{}, nil, at)
	if u, d := old.RepairCounts(); u != 0 || d != 3 || !old.RepairsPerItem {
		t.Errorf("an older feed after a fetch: %+v", old)
	}
}
