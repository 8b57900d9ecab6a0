package jetstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
)

// DefaultCallTimeout bounds each call of a Backend.
const DefaultCallTimeout = 5 * time.Second

// Backend presents the Store with the bbolt storage.Store's signatures (no
// context), so that it can stand behind the storage interfaces
// (storage.FeedStore, storage.ObservationReader, ...). Each call runs with
// a context bounded by the call timeout and cancelled by Close.
//
// It is a storage.Backend: the contract suite (storage/storagetest) runs
// against it, every case passing.
type Backend struct {
	s       *Store
	timeout time.Duration
	ctx     context.Context
	cancel  context.CancelFunc
	ids     feedIDSet
	// unstored: the feeds whose polls this node cannot store, as the
	// polling service noted them (storage.Unstored).
	unstored storage.Unstored
}

// NewBackend returns the Backend of s; callTimeout ≤ 0 means
// DefaultCallTimeout.
func NewBackend(s *Store, callTimeout time.Duration) *Backend {
	if callTimeout <= 0 {
		callTimeout = DefaultCallTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Backend{s: s, timeout: callTimeout, ctx: ctx, cancel: cancel}
}

// Store returns the Store the backend calls.
func (b *Backend) Store() *Store { return b.s }

// Close cancels the calls under way; the NATS connection is its owner's
// to close.
func (b *Backend) Close() error {
	b.cancel()
	return nil
}

// Unavailable implements storage.Unavailabler: err is a call the cluster
// could not answer now (unanswered, timed out, JetStream temporarily
// unavailable without a quorum or a leader, the connection down) and may
// answer soon. Other 503s of the JetStream API (insufficient resources,
// JetStream not enabled) are not: trying again does not help.
func (b *Backend) Unavailable(err error) bool {
	return unanswered(err) || errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, nats.ErrDisconnected)
}

var _ storage.Unavailabler = (*Backend)(nil)

func (b *Backend) call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.ctx, b.timeout)
}

// CreateFeed is Store.CreateFeed.
func (b *Backend) CreateFeed(f *storage.Feed) error {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.CreateFeed(ctx, f)
}

// Feed is Store.Feed, reading as failing while the node cannot store
// its polls (NoteUnstored).
func (b *Backend) Feed(id uint64) (storage.Feed, error) {
	ctx, cancel := b.call()
	defer cancel()
	return b.noted(b.s.Feed(ctx, id))
}

// FeedByURL is Store.FeedByURL, as Feed.
func (b *Backend) FeedByURL(url string) (storage.Feed, error) {
	ctx, cancel := b.call()
	defer cancel()
	return b.noted(b.s.FeedByURL(ctx, url))
}

// FeedBySlug is Store.FeedBySlug, as Feed.
func (b *Backend) FeedBySlug(kind storage.Kind, slug string) (storage.Feed, error) {
	ctx, cancel := b.call()
	defer cancel()
	return b.noted(b.s.FeedBySlug(ctx, kind, slug))
}

// Feeds is Store.Feeds, as Feed.
func (b *Backend) Feeds() ([]storage.Feed, error) {
	ctx, cancel := b.call()
	defer cancel()
	fs, err := b.s.Feeds(ctx)
	for i := range fs {
		b.unstored.Apply(&fs[i], b.s.opt.Now())
	}
	return fs, err
}

// noted is f with the note of NoteUnstored applied.
func (b *Backend) noted(f storage.Feed, err error) (storage.Feed, error) {
	if err == nil {
		b.unstored.Apply(&f, b.s.opt.Now())
	}
	return f, err
}

// NoteUnstored records that this node cannot store feed id's polls
// (storage.Unstored.Note): its reads through this Backend, and only
// those, say so until a poll of it is stored here, the feed is deleted
// here, or until.
func (b *Backend) NoteUnstored(id uint64, msg string, since, until time.Time) {
	b.unstored.Note(id, msg, since, until)
}

// UpdateFeed is Store.UpdateFeed.
func (b *Backend) UpdateFeed(id uint64, fn func(*storage.Feed) error) (storage.Feed, error) {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.UpdateFeed(ctx, id, fn)
}

// DeleteFeed is Store.DeleteFeed.
func (b *Backend) DeleteFeed(id uint64) error {
	ctx, cancel := b.call()
	defer cancel()
	if err := b.s.DeleteFeed(ctx, id); err != nil {
		return err
	}
	b.unstored.Clear(id)
	return nil
}

// RecordPoll is Store.RecordPoll.
func (b *Backend) RecordPoll(feedID uint64, o storage.Observation, fn func(*storage.Feed) error) (storage.Feed, error) {
	ctx, cancel := b.call()
	defer cancel()
	f, err := b.s.RecordPoll(ctx, feedID, o, fn)
	if err == nil {
		b.unstored.Clear(feedID)
	}
	return f, err
}

// Observations is Store.Observations.
func (b *Backend) Observations(feedID uint64, limit int) ([]storage.Observation, error) {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.Observations(ctx, feedID, limit)
}

// AddItems is Store.AddItems with the feed's own retention.
func (b *Backend) AddItems(feedID uint64, items []storage.Item) ([]storage.Item, error) {
	ctx, cancel := b.call()
	defer cancel()
	f, err := b.s.Feed(ctx, feedID)
	if err != nil {
		return nil, err
	}
	return b.s.AddFeedItems(ctx, f, items)
}

// CountItems is Store.CountItems.
func (b *Backend) CountItems(feedID uint64) (int, error) {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.CountItems(ctx, feedID)
}

// Items answers q as the bbolt store does. A query with a Limit, or
// within Since and Until, reads the items of the feed's subject the
// node's index of the feed names (Store.queryItems); other queries read
// the subject (at most MaxItemsPerFeed messages) and filter and order in
// memory.
func (b *Backend) Items(feedID uint64, q storage.ItemQuery) ([]storage.Item, error) {
	if err := checkQuery(q); err != nil {
		return nil, fmt.Errorf("items of feed %d: %w", feedID, err)
	}
	ctx, cancel := b.call()
	defer cancel()
	if _, err := b.s.Feed(ctx, feedID); err != nil {
		return nil, err
	}
	return b.s.queryItems(ctx, feedID, q)
}

func checkQuery(q storage.ItemQuery) error {
	switch {
	case q.Order < storage.ByArrival || q.Order > storage.ByArrivalAsc:
		return fmt.Errorf("%w: unknown order %d", storage.ErrInvalid, q.Order)
	case q.BeforeSeq > 0 && (q.Order != storage.ByArrival || q.AfterSeq > 0):
		return fmt.Errorf("%w: BeforeSeq needs newest-first arrival order", storage.ErrInvalid)
	case q.AfterSeq > 0 && q.Order == storage.ByPublished:
		return fmt.Errorf("%w: AfterSeq needs arrival order", storage.ErrInvalid)
	case !q.Since.IsZero() && !q.Until.IsZero() && q.Until.Before(q.Since):
		return fmt.Errorf("%w: Until %v is before Since %v", storage.ErrInvalid, q.Until, q.Since)
	}
	return nil
}

// itemTime is what ByPublished, Since and Until look at: the publish
// time, the fetch time for items without one.
func itemTime(it *storage.Item) time.Time {
	if it.Published.IsZero() {
		return it.Fetched
	}
	return it.Published
}

// inWindow reports whether it's time (itemTime) is in q's [Since, Until).
func inWindow(q storage.ItemQuery, it *storage.Item) bool {
	t := itemTime(it)
	return (q.Since.IsZero() || !t.Before(q.Since)) && (q.Until.IsZero() || t.Before(q.Until))
}

// query filters and orders items (in Seq order, all above q.AfterSeq) as
// the bbolt store answers q.
func query(items []storage.Item, q storage.ItemQuery) []storage.Item {
	items = slices.DeleteFunc(items, func(it storage.Item) bool {
		return q.BeforeSeq > 0 && it.Seq >= q.BeforeSeq || !inWindow(q, &it)
	})
	switch {
	case q.Order == storage.ByPublished:
		slices.SortStableFunc(items, func(x, y storage.Item) int {
			if c := itemTime(&y).Compare(itemTime(&x)); c != 0 {
				return c
			}
			return cmp.Compare(y.Seq, x.Seq)
		})
	case q.AfterSeq == 0 && q.Order == storage.ByArrival:
		slices.Reverse(items)
	}
	if q.Limit > 0 && len(items) > q.Limit {
		items = items[:q.Limit]
	}
	return items
}

// FeedByURL returns the remote feed polled from url, or
// storage.ErrFeedNotFound, through the unique-index key CreateFeed wrote.
func (s *Store) FeedByURL(ctx context.Context, url string) (storage.Feed, error) {
	return s.feedByIndex(ctx, &storage.Feed{Kind: storage.KindRemote, URL: url})
}

// FeedBySlug returns the feed of kind with this slug, or
// storage.ErrFeedNotFound.
func (s *Store) FeedBySlug(ctx context.Context, kind storage.Kind, slug string) (storage.Feed, error) {
	if kind == storage.KindRemote || kind == "" {
		return storage.Feed{}, fmt.Errorf("feed %s/%s: %w", kind, slug, storage.ErrFeedNotFound)
	}
	return s.feedByIndex(ctx, &storage.Feed{Kind: kind, Slug: slug})
}

func (s *Store) feedByIndex(ctx context.Context, key *storage.Feed) (storage.Feed, error) {
	e, err := s.get(ctx, s.index, IndexBucket, indexKeyOf(key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return storage.Feed{}, fmt.Errorf("feed %s: %w", describe(key), storage.ErrFeedNotFound)
	}
	if err != nil {
		return storage.Feed{}, fmt.Errorf("feed %s: %w", describe(key), err)
	}
	id, err := strconv.ParseUint(string(e.Value()), 10, 64)
	if err != nil {
		return storage.Feed{}, fmt.Errorf("feed %s: %w: index value %q", describe(key), storage.ErrCorrupt, e.Value())
	}
	f, err := s.Feed(ctx, id)
	if err != nil {
		return storage.Feed{}, err
	}
	// The index is written before the feed and deleted after it: a key
	// whose feed is gone or names another feed is a half-done write.
	if f.Kind != key.Kind && !(key.Kind == storage.KindRemote && f.Kind == "") || f.URL != key.URL || f.Slug != key.Slug {
		return storage.Feed{}, fmt.Errorf("feed %s: %w", describe(key), storage.ErrFeedNotFound)
	}
	return f, nil
}

// HasItems is Store.HasItems: the aggregator asks it of every document
// it fetches, in place of one Item call (a consumer) per item.
func (b *Backend) HasItems(feedID uint64, ids []string) ([]bool, error) {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.HasItems(ctx, feedID, ids)
}

// Item returns the item of feedID with this ID, or storage.ErrFeedNotFound
// or storage.ErrItemNotFound, from the Store's index of the feed and one
// message get (Store.item).
func (b *Backend) Item(feedID uint64, itemID string) (storage.Item, error) {
	ctx, cancel := b.call()
	defer cancel()
	if _, err := b.s.Feed(ctx, feedID); err != nil {
		return storage.Item{}, err
	}
	return b.s.item(ctx, feedID, itemID)
}

// ItemCounts returns CountItems of each feed of ids that exists.
func (b *Backend) ItemCounts(ids []uint64) (map[uint64]int, error) {
	ctx, cancel := b.call()
	defer cancel()
	out := make(map[uint64]int, len(ids))
	for _, id := range ids {
		if _, err := b.s.Feed(ctx, id); errors.Is(err, storage.ErrFeedNotFound) {
			continue
		} else if err != nil {
			return nil, err
		}
		n, err := b.s.CountItems(ctx, id)
		if err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, nil
}

// LastSeq returns the items stream's last sequence: the highest Seq given
// to an item so far (0 when none); it never goes down, purges included.
func (b *Backend) LastSeq() (uint64, error) {
	ctx, cancel := b.call()
	defer cancel()
	info, err := leaderInfo(ctx, b.s.items)
	if err != nil {
		return 0, fmt.Errorf("last item sequence: %w", err)
	}
	return info.State.LastSeq, nil
}

// RecentLatencies returns the latencies recorded by the newest polls
// observations of each feed of ids (every feed when ids is nil), oldest
// first; feeds without any are absent. polls ≤ 0 means every kept
// observation. It reads each feed's observations in turn, not at one
// moment as the bbolt store does. It is read for pages (the feed list)
// and does not wait for the cluster: without a quorum it fails at once
// with an error Unavailable reports.
func (b *Backend) RecentLatencies(ids []uint64, polls int) (map[uint64][]float64, error) {
	ctx, cancel := b.call()
	defer cancel()
	ctx = failFast(ctx)
	if ids == nil {
		feeds, err := b.s.Feeds(ctx)
		if err != nil {
			return nil, err
		}
		for _, f := range feeds {
			ids = append(ids, f.ID)
		}
	}
	out := make(map[uint64][]float64)
	for _, id := range ids {
		// A passing "no responders" is asked again (Observations); the
		// cluster's "temporarily unavailable" ends the read at once.
		obs, err := b.s.Observations(ctx, id, polls)
		if err != nil {
			return nil, err
		}
		var lat []float64
		for _, o := range obs {
			lat = append(lat, o.LatencyS...)
		}
		if len(lat) > 0 {
			out[id] = lat
		}
	}
	return out, nil
}
