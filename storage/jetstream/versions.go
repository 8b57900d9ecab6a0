package jetstream

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
)

// Versions of feeds (storage.Version) in the JetStream store. LastSeq is
// the stream sequence of the feed's newest item, Count its number of
// items, and Sum a hash of the feed record and of its newest depth items
// as stored. Unlike the bbolt store's process-keyed Sum, the hash is
// SHA-256 (truncated to 64 bits) of the stored bytes, so every node
// computes the same Version, hence the same ETag, for the same content.

// snapshot reads the feed, its newest n items (newest first; all when
// n ≤ 0) and their version. Reads are not one transaction: the version is
// read again after the items and the whole read retried when it changed,
// so what is returned was the feed's state at one moment.
func (s *Store) snapshot(ctx context.Context, feedID uint64, n int) (storage.Feed, []storage.Item, storage.Version, error) {
	for range maxRetries {
		f, rev, err := s.feed(ctx, feedID)
		if err != nil {
			return storage.Feed{}, nil, storage.Version{}, err
		}
		last, count, err := s.subjectState(ctx, feedID)
		if err != nil {
			return storage.Feed{}, nil, storage.Version{}, err
		}
		all, err := s.queryItems(ctx, feedID, storage.ItemQuery{Limit: n, Order: storage.ByArrival})
		if err != nil {
			return storage.Feed{}, nil, storage.Version{}, err
		}
		_, rev2, err := s.feed(ctx, feedID)
		if err != nil {
			return storage.Feed{}, nil, storage.Version{}, err
		}
		last2, count2, err := s.subjectState(ctx, feedID)
		if err != nil {
			return storage.Feed{}, nil, storage.Version{}, err
		}
		if rev != rev2 || last != last2 || count != count2 {
			continue
		}
		v, err := version(&f, all, last, count)
		if err != nil {
			return storage.Feed{}, nil, storage.Version{}, err
		}
		if n <= 0 {
			// The Sum of depth 0 covers no item, as in the bbolt store.
			if v, err = version(&f, nil, last, count); err != nil {
				return storage.Feed{}, nil, storage.Version{}, err
			}
		}
		return f, all, v, nil
	}
	return storage.Feed{}, nil, storage.Version{}, fmt.Errorf("snapshot of feed %d: %w", feedID, ErrStale)
}

// subjectState returns the sequence of the feed's newest item (0 when it
// has none) and its number of items.
func (s *Store) subjectState(ctx context.Context, feedID uint64) (last, count uint64, err error) {
	m, err := s.items.GetLastMsgForSubject(ctx, itemSubject(feedID))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, 0, nil
	case err != nil:
		return 0, 0, fmt.Errorf("version of feed %d: %w", feedID, err)
	}
	n, err := s.CountItems(ctx, feedID)
	if err != nil {
		return 0, 0, err
	}
	return m.Sequence, uint64(n), nil
}

func version(f *storage.Feed, newest []storage.Item, last, count uint64) (storage.Version, error) {
	h := sha256.New()
	rec, err := json.Marshal(f)
	if err != nil {
		return storage.Version{}, fmt.Errorf("version of feed %d: %w", f.ID, err)
	}
	var buf [8]byte
	put := func(b []byte) {
		binary.BigEndian.PutUint64(buf[:], uint64(len(b)))
		h.Write(buf[:])
		h.Write(b)
	}
	put(rec)
	for i := range newest {
		raw, err := json.Marshal(&newest[i])
		if err != nil {
			return storage.Version{}, fmt.Errorf("version of feed %d: %w", f.ID, err)
		}
		put(raw)
	}
	sum := binary.BigEndian.Uint64(h.Sum(nil))
	if sum == 0 {
		sum = 1 // the zero Version is never returned for a feed
	}
	return storage.Version{FeedID: f.ID, LastSeq: last, Count: count, Sum: sum}, nil
}

// FeedSnapshot returns the sensor or pipe feed of kind and slug, its
// newest n items by arrival (newest first; all when n ≤ 0) and their
// Version of depth n, read at one moment.
func (s *Store) FeedSnapshot(ctx context.Context, kind storage.Kind, slug string, n int) (storage.Feed, []storage.Item, storage.Version, error) {
	f, err := s.FeedBySlug(ctx, kind, slug)
	if err != nil {
		return storage.Feed{}, nil, storage.Version{}, err
	}
	return s.snapshot(ctx, f.ID, n)
}

// FeedVersionBySlug is FeedVersion of the sensor or pipe feed of kind and
// slug.
func (s *Store) FeedVersionBySlug(ctx context.Context, kind storage.Kind, slug string, depth int) (storage.Version, error) {
	_, _, v, err := s.FeedSnapshot(ctx, kind, slug, depth)
	return v, err
}

// FeedVersionBySlug is Store.FeedVersionBySlug.
func (b *Backend) FeedVersionBySlug(kind storage.Kind, slug string, depth int) (storage.Version, error) {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.FeedVersionBySlug(ctx, kind, slug, depth)
}

// FeedSnapshot is Store.FeedSnapshot.
func (b *Backend) FeedSnapshot(kind storage.Kind, slug string, n int) (storage.Feed, []storage.Item, storage.Version, error) {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.FeedSnapshot(ctx, kind, slug, n)
}
