package storage

import (
	"bytes"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// CreateFeed stores a new feed. It assigns f.ID (the next feed sequence
// number; any ID given is ignored), sets f.Created and f.Updated, and
// gives a feed without a Retention the store's default
// (Options.DefaultRetention). A
// remote feed needs an absolute URL that no other remote feed has (URLs
// are compared byte for byte: normalise them first); a sensor or pipe
// feed needs a slug that no other feed of its kind has. It fails with
// ErrInvalid or ErrFeedExists and then leaves f unchanged.
func (s *Store) CreateFeed(f *Feed) error {
	now := s.now()
	nf := *f
	nf.Created, nf.Updated = now, now
	s.withDefaultRetention(&nf)
	if _, err := validateFeed(&nf); err != nil {
		return fmt.Errorf("storage: create feed: %w", err)
	}
	// Group-committed: subscriptions made together (a bulk import) share
	// their fsyncs. The function repeats its assignments if its group is
	// rolled back (see update).
	err := s.update(func(tx *bolt.Tx) error {
		feeds, err := bucket(tx, bucketFeeds)
		if err != nil {
			return err
		}
		id, err := feeds.NextSequence()
		if err != nil {
			return err
		}
		nf.ID = id
		if err := indexFeed(tx, &nf); err != nil {
			return err
		}
		if err := createFeedBuckets(tx, id); err != nil {
			return err
		}
		if err := putFreshState(feeds, &nf); err != nil {
			return err
		}
		return s.putFeed(tx, &nf)
	})
	if err != nil {
		return fmt.Errorf("storage: create feed: %w", err)
	}
	*f = nf
	return nil
}

// UpdateFeed reads feed id, calls fn on it and writes the result, all in
// one transaction, so concurrent updates never lose each other's changes.
// fn may change anything but the ID and Created (changes to them are
// ignored); an error from fn aborts the update and is returned wrapped.
// Updated is set to Options.Now. The URL and slug indexes follow changes
// of URL, slug and kind, with the same uniqueness rules as CreateFeed.
func (s *Store) UpdateFeed(id uint64, fn func(*Feed) error) (Feed, error) {
	var out Feed
	err := s.dbUpdate(func(tx *bolt.Tx) error {
		f, err := s.updateFeedTx(tx, id, fn)
		out = f
		return err
	})
	if err != nil {
		return Feed{}, fmt.Errorf("storage: update feed %d: %w", id, err)
	}
	return out, nil
}

// updateFeedTx is UpdateFeed inside tx.
func (s *Store) updateFeedTx(tx *bolt.Tx, id uint64, fn func(*Feed) error) (Feed, error) {
	f, _, err := s.updateFeedRawTx(tx, id, fn)
	return f, err
}

// updateFeedRawTx is updateFeedTx also returning the record's new bytes
// (the caller's own: they are not bbolt's memory).
func (s *Store) updateFeedRawTx(tx *bolt.Tx, id uint64, fn func(*Feed) error) (Feed, []byte, error) {
	old, err := s.memoFeed(tx, id, true)
	if err != nil {
		return Feed{}, nil, err
	}
	nf := old
	// fn gets its own copy of the category slice and sleep windows, so a
	// failed update cannot leak into old.
	nf.Category = append([]string(nil), old.Category...)
	nf.Sleep.Daily = append(nf.Sleep.Daily[:0:0], old.Sleep.Daily...)
	nf.Sleep.Windows = append(nf.Sleep.Windows[:0:0], old.Sleep.Windows...)
	if old.Extract != nil {
		e := *old.Extract
		nf.Extract = &e
	}
	if err := fn(&nf); err != nil {
		return Feed{}, nil, err
	}
	nf.ID, nf.Created, nf.Updated = old.ID, old.Created, s.now()
	raw, err := validateFeed(&nf)
	if err != nil {
		return Feed{}, nil, err
	}
	// The index entry moves only when the key changes (a poll's update
	// never changes it).
	oi, ok := indexKey(&old)
	ni, nk := indexKey(&nf)
	if !bytes.Equal(oi, ni) || !bytes.Equal(ok, nk) {
		if err := s.unindexFeed(tx, &old); err != nil {
			return Feed{}, nil, err
		}
		if err := indexFeed(tx, &nf); err != nil {
			return Feed{}, nil, err
		}
	}
	feeds, err := bucket(tx, bucketFeeds)
	if err != nil {
		return Feed{}, nil, err
	}
	if err := feeds.Put(u64(nf.ID), raw); err != nil { // validated and encoded above
		return Feed{}, nil, err
	}
	if RetentionWidened(old.Retention, nf.Retention) {
		// The feed has room for the items it dropped: a document that
		// lists them brings them back.
		if err := feeds.Delete(droppedKey(nf.ID)); err != nil {
			return Feed{}, nil, err
		}
	}
	s.feedStored(tx, &nf)
	return nf, raw, nil
}

// Feed returns feed id, or ErrFeedNotFound. After a poll's write, and
// until any other write, it returns the feed as that write stored it
// without reading the record (feedMemo); like any read, one that runs
// while a write of the feed is under way may return the feed as it was
// before that write.
func (s *Store) Feed(id uint64) (Feed, error) {
	if f, ok := s.feedMemo.current(id, s.feedGen.Load()); ok {
		// As the feed's last poll stored it, and no other write since.
		s.unstored.Apply(&f, s.now())
		return f, nil
	}
	var f Feed
	err := s.db.View(func(tx *bolt.Tx) error {
		k, v, err := feedRecord(tx, id)
		if err != nil {
			return err
		}
		if m, ok := s.feedMemo.get(id, v, false); ok {
			// Stored or read by the feed's last poll, unchanged since.
			f = cloneFeed(&m)
			return nil
		}
		if f, err = decodeFeed(k, v); err != nil {
			return err
		}
		s.feedMemo.put(id, v, &f, s.feedGen.Load()) // for the poll's write that follows
		return nil
	})
	if err == nil {
		s.unstored.Apply(&f, s.now())
	}
	if err != nil {
		return Feed{}, fmt.Errorf("storage: feed %d: %w", id, err)
	}
	return f, nil
}

// FeedByURL returns the remote feed with this exact URL, or
// ErrFeedNotFound.
func (s *Store) FeedByURL(url string) (Feed, error) {
	return s.feedByIndex(bucketFeedURL, []byte(url), fmt.Sprintf("url %q", shortID(url)))
}

// FeedBySlug returns the feed of this kind with this slug, or
// ErrFeedNotFound.
func (s *Store) FeedBySlug(kind Kind, slug string) (Feed, error) {
	return s.feedByIndex(bucketFeedSlug, slugKey(kind, slug), fmt.Sprintf("%s slug %q", kind, shortID(slug)))
}

func (s *Store) feedByIndex(index, key []byte, what string) (Feed, error) {
	var f Feed
	err := s.db.View(func(tx *bolt.Tx) error {
		b, err := bucket(tx, index)
		if err != nil {
			return err
		}
		if len(key) == 0 || len(key) > bolt.MaxKeySize {
			return ErrFeedNotFound
		}
		id, ok := getU64(b.Get(key))
		if !ok {
			return ErrFeedNotFound
		}
		f, err = getFeed(tx, id)
		return err
	})
	if err != nil {
		return Feed{}, fmt.Errorf("storage: feed with %s: %w", what, err)
	}
	s.unstored.Apply(&f, s.now())
	return f, nil
}

// Feeds returns all feeds in order of ID.
func (s *Store) Feeds() ([]Feed, error) {
	var out []Feed
	err := s.db.View(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketFeeds)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			if !isFeedKey(k) {
				return nil // an observation tail, a policy state, a dropped set
			}
			f, err := decodeFeed(k, v)
			if err != nil {
				return err
			}
			s.unstored.Apply(&f, s.now())
			out = append(out, f)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("storage: feeds: %w", err)
	}
	return out, nil
}

// DeleteFeed removes feed id with all its items and observations, or
// fails with ErrFeedNotFound.
func (s *Store) DeleteFeed(id uint64) error {
	err := s.dbUpdate(func(tx *bolt.Tx) error {
		f, err := getFeed(tx, id)
		if err != nil {
			return err
		}
		if f.Kind == KindPipe {
			if ps := tx.Bucket(bucketPipeSlug); ps != nil && ps.Get([]byte(f.Slug)) != nil {
				return fmt.Errorf("%w: feed %d is the output of pipe %q; delete the pipe", ErrPipeOutput, id, f.Slug)
			}
		}
		if err := s.unindexFeed(tx, &f); err != nil {
			return err
		}
		feeds, err := bucket(tx, bucketFeeds)
		if err != nil {
			return err
		}
		if err := feeds.Delete(u64(id)); err != nil {
			return err
		}
		if err := feeds.Delete(tailKey(id)); err != nil {
			return err
		}
		if err := feeds.Delete(stateKey(id)); err != nil {
			return err
		}
		if err := feeds.Delete(droppedKey(id)); err != nil {
			return err
		}
		return deleteFeedData(tx, id)
	})
	if err != nil {
		return fmt.Errorf("storage: delete feed %d: %w", id, err)
	}
	s.unstored.Clear(id)
	return nil
}

// bucket returns a top-level bucket, which migrations guarantee.
func bucket(tx *bolt.Tx, name []byte) (*bolt.Bucket, error) {
	b := tx.Bucket(name)
	if b == nil {
		return nil, corruptf("bucket %s missing", name)
	}
	return b, nil
}

func getFeed(tx *bolt.Tx, id uint64) (Feed, error) {
	k, v, err := feedRecord(tx, id)
	if err != nil {
		return Feed{}, err
	}
	return decodeFeed(k, v)
}

// feedRecord returns the key and stored bytes of feed id's record, or
// ErrFeedNotFound.
func feedRecord(tx *bolt.Tx, id uint64) (k, v []byte, err error) {
	feeds, err := bucket(tx, bucketFeeds)
	if err != nil {
		return nil, nil, err
	}
	k = u64(id)
	if v = feeds.Get(k); v == nil {
		return nil, nil, ErrFeedNotFound
	}
	return k, v, nil
}

// memoFeed is getFeed for a write: it uses the feed Store.Feed decoded
// from the same bytes when there is one (see feedMemo), and takes it out
// of the memo when the write rewrites the feed (take). Without take, the
// feed returned is the memo's own: read it, do not change it.
func (s *Store) memoFeed(tx *bolt.Tx, id uint64, take bool) (Feed, error) {
	k, v, err := feedRecord(tx, id)
	if err != nil {
		return Feed{}, err
	}
	if f, ok := s.feedMemo.get(id, v, take); ok {
		return f, nil
	}
	return decodeFeed(k, v)
}

func decodeFeed(k, v []byte) (Feed, error) {
	var f Feed
	if err := json.Unmarshal(v, &f); err != nil {
		return Feed{}, corruptf("feed record %x: %v", k, err)
	}
	if id, _ := getU64(k); f.ID != id {
		return Feed{}, corruptf("feed record %x holds id %d", k, f.ID)
	}
	return f, nil
}

func (s *Store) putFeed(tx *bolt.Tx, f *Feed) error {
	raw, err := validateFeed(f)
	if err != nil {
		return err
	}
	feeds, err := bucket(tx, bucketFeeds)
	if err != nil {
		return err
	}
	s.feedStored(tx, f)
	return feeds.Put(u64(f.ID), raw)
}

// indexKey returns the index bucket and key of a feed: the URL of a remote
// feed, the kind/slug of a sensor or pipe feed.
func indexKey(f *Feed) (index, key []byte) {
	if f.Kind == KindRemote {
		return bucketFeedURL, []byte(f.URL)
	}
	return bucketFeedSlug, slugKey(f.Kind, f.Slug)
}

// indexFeed adds f to its index, failing with ErrFeedExists when another
// feed holds the key.
func indexFeed(tx *bolt.Tx, f *Feed) error {
	name, key := indexKey(f)
	b, err := bucket(tx, name)
	if err != nil {
		return err
	}
	if v := b.Get(key); v != nil {
		if id, _ := getU64(v); id != f.ID {
			if f.Kind == KindRemote {
				return fmt.Errorf("%w: feed %d has URL %q", ErrFeedExists, id, shortID(f.URL))
			}
			return fmt.Errorf("%w: %s feed %d has slug %q", ErrFeedExists, f.Kind, id, f.Slug)
		}
	}
	return b.Put(key, u64(f.ID))
}

// unindexFeed removes f's index entry if it points at f.
func (s *Store) unindexFeed(tx *bolt.Tx, f *Feed) error {
	name, key := indexKey(f)
	b, err := bucket(tx, name)
	if err != nil {
		return err
	}
	s.feedRemoved(tx, f.ID)
	if v := b.Get(key); v != nil && bytes.Equal(v, u64(f.ID)) {
		return b.Delete(key)
	}
	return nil
}
