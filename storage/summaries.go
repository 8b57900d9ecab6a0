package storage

import (
	"fmt"
	"hash/maphash"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// FeedSummary is what a list of many feeds filters, counts and sorts on:
// the part of a feed record that changes when it is polled, and the
// names it is searched by.
type FeedSummary struct {
	ID               uint64
	Kind             Kind
	Policy           string
	Title, Slug, URL string
	Polls, Hits      int64
	LatencySumS      float64
	LatencyCount     int64
	LastError        string
	ErrorCount       int
}

// SummaryOf is f's summary.
func SummaryOf(f *Feed) FeedSummary {
	return FeedSummary{
		ID: f.ID, Kind: f.Kind, Policy: f.Policy, Title: f.Title, Slug: f.Slug, URL: f.URL,
		Polls: f.Polls, Hits: f.Hits, LatencySumS: f.LatencySumS, LatencyCount: f.LatencyCount,
		LastError: f.LastError, ErrorCount: f.ErrorCount,
	}
}

// summaryCache keeps every feed's summary with a hash of the record it
// was decoded from, in order of ID. A read walks the feed records (no
// decoding) beside the cache and decodes only the records whose bytes
// changed since: those polled since the last read. Decoding is what a
// full read of 10^6 feeds spends its time on (about 10 µs a record).
type summaryCache struct {
	mu      sync.Mutex
	seed    maphash.Seed
	entries []summaryEntry
}

type summaryEntry struct {
	sum uint64 // maphash of the record's bytes
	s   FeedSummary
}

// EachFeedSummary calls fn with the summary of every feed, in order of
// ID, as of one read transaction, until fn returns false. fn must not
// keep the pointer or call the store's summaries again. Reads are
// serialised: one walk at a time.
func (s *Store) EachFeedSummary(fn func(*FeedSummary) bool) error {
	c := &s.summaries
	c.mu.Lock()
	defer c.mu.Unlock()
	err := s.db.View(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketFeeds)
		if err != nil {
			return err
		}
		return c.refresh(b)
	})
	if err != nil {
		return fmt.Errorf("storage: feed summaries: %w", err)
	}
	for i := range c.entries {
		if !fn(&c.entries[i].s) {
			break
		}
	}
	return nil
}

// refresh brings the cache to the records of bucket b: a merge walk of
// the records and the cache, both in order of ID.
func (c *summaryCache) refresh(b *bolt.Bucket) error {
	if c.seed == (maphash.Seed{}) {
		c.seed = maphash.MakeSeed()
	}
	old := c.entries
	next := old[:0:0] // rebuilt only when feeds came or went
	same := true      // the records so far are old's, in place
	i := 0
	cur := b.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		if !isFeedKey(k) {
			continue // an observation tail
		}
		id, _ := getU64(k)
		for i < len(old) && old[i].s.ID < id { // deleted since
			if same {
				same = false
				next = append(make([]summaryEntry, 0, len(old)+64), old[:i]...)
			}
			i++
		}
		h := maphash.Bytes(c.seed, v)
		var e summaryEntry
		switch {
		case i < len(old) && old[i].s.ID == id && old[i].sum == h:
			e = old[i]
			i++
		default:
			if i < len(old) && old[i].s.ID == id {
				i++ // changed in place
			} else if same { // new since
				same = false
				next = append(make([]summaryEntry, 0, len(old)+64), old[:i]...)
			}
			f, err := decodeFeed(k, v)
			if err != nil {
				return err
			}
			e = summaryEntry{sum: h, s: SummaryOf(&f)}
		}
		if same {
			old[i-1] = e
		} else {
			next = append(next, e)
		}
	}
	if i < len(old) && same { // the last feeds were deleted
		same = false
		next = old[:i]
	}
	if !same {
		c.entries = next
	}
	return nil
}
