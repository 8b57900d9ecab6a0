package aggregator

import (
	"slices"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// timeOrder puts the new items of one fetch into the order they are
// stored in, which is the order pipes read them in (storage Seq): oldest
// observation first. Feeds list their items newest first, so the items
// are reversed, then sorted (stably) by observation time, the reading's
// time or else the publish time, when every item has one; a feed whose
// items are not all dated keeps its own order, reversed.
func timeOrder(items []storage.Item) {
	slices.Reverse(items)
	for i := range items {
		if obsTime(&items[i]).IsZero() {
			return
		}
	}
	slices.SortStableFunc(items, func(a, b storage.Item) int { return obsTime(&a).Compare(obsTime(&b)) })
}

// obsTime is an item's observation time: its reading's time, else its
// publish time (zero when it has neither).
func obsTime(it *storage.Item) time.Time {
	if it.Reading != nil && !it.Reading.Time.IsZero() {
		return it.Reading.Time
	}
	return it.Published
}
