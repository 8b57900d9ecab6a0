package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
)

// RecordFetch stores what one fetch of feedID brought: its items (as
// AddItems, with the feed's retention), its observation and the feed's
// update fn makes knowing the items added. fn may run more than once and
// must only assign, as for the bbolt store.
//
// JetStream has no transaction over a stream and a bucket, so the steps
// are ordered to keep the bbolt contract where it matters:
//
//  1. fn first runs on copies, with the items the feed does not hold yet
//     (by the node's set of known item IDs): when it refuses, nothing at
//     all is written and its error is returned.
//  2. the items are published (each ID once, message-ID de-duplicated);
//  3. fn runs again with the items actually added, the observation it
//     completed is published (message ID from the feed and o.At, so a
//     retry stores it once), then the feed is written at the revision
//     read; on a conflict steps 3 repeat from a fresh read.
//
// A crash after step 2 keeps the items without the observation and the
// counters of that poll (the next poll finds the items known); that is
// the at-least-once side of polling, never a duplicate item.
func (s *Store) RecordFetch(ctx context.Context, feedID uint64, items []storage.Item, o storage.Observation, fn func(f *storage.Feed, o *storage.Observation, added []storage.Item) error) (storage.Fetched, error) {
	// The record read here is the one the first write expects: only a
	// conflict reads it again. A feed this node owns needs no read: its
	// record is the one the node wrote last (SetOwner), and the write's
	// compare-and-set refuses it if anyone wrote since.
	mark, owned := s.markOwned(feedID)
	rec, rev, ok := s.takeOwnedRecord(feedID)
	if !ok {
		var err error
		if rec, rev, err = s.recentRecord(ctx, feedID); err != nil {
			return storage.Fetched{}, err
		}
	}
	f := rec.Feed
	if err := s.syncKnownRecent(ctx, feedID); err != nil {
		return storage.Fetched{}, err
	}
	var fresh []storage.Item
	refused := false
	seen := make(map[string]bool, len(items))
	listed := len(items)
	var dropped func(string) bool // the items retention dropped (dropped.go)
	if rec.Dropped != nil {
		dropped = droppedLookup(&rec)
		items = slices.Clone(items)
	}
	for i := 0; i < len(items); i++ {
		it := items[i]
		if it.ID == "" || len(it.ID) > storage.MaxIDLen {
			refused = true // addSynced says why
			continue
		}
		if seen[it.ID] || s.known.has(feedID, MsgID(feedID, it.ID)) {
			continue
		}
		if dropped != nil && it.IsUndated() && dropped(it.ID) {
			// Not given to addSynced either (the indexes of its
			// ItemErrors count the items it is given).
			items = slices.Delete(items, i, i+1)
			i--
			continue
		}
		seen[it.ID] = true
		it.FeedID = feedID
		fresh = append(fresh, it)
	}
	dryFeed, dryObs := f, o
	if err := fn(&dryFeed, &dryObs, fresh); err != nil {
		return storage.Fetched{}, err
	}
	dryData, err := encodeObservation(feedID, &dryObs, s.maxData)
	if err != nil {
		return storage.Fetched{}, err
	}
	// Retention remembers the items it drops in the record before it
	// deletes them (dropped.go), as many as the feed's documents list:
	// as the fetch's update sets Listed (the dry run), and at least this
	// call's items. The record written there is the one this fetch then
	// writes on.
	rf := f
	rf.Listed = max(dryFeed.Listed, listed)
	s.dropped.put(feedID, rec, rev)
	// A document without new items costs no items call; retention has
	// nothing new to cut, but for a remote feed with MaxAge: its items
	// past their age are removed now (one message delete each, and the
	// record write that remembers them), not left to their messages' TTL,
	// so that they are remembered as dropped. Without such items it costs
	// nothing (the index says so).
	var added []storage.Item
	var itemErr error
	if len(fresh) > 0 || refused || len(items) > 0 && s.reducer() != nil {
		added, itemErr = s.addSynced(ctx, rf, items)
	} else if f.Retention.MaxAge > 0 && f.Kind == storage.KindRemote {
		if _, err := s.retain(ctx, rf, s.opt.Now()); err != nil {
			itemErr = err
		}
	}
	if r, rv, ok := s.dropped.take(feedID); ok {
		rec, rev = r, rv
	}
	if added == nil && itemErr != nil && len(items) > 0 && !isItemRefusal(itemErr) {
		return storage.Fetched{}, fmt.Errorf("record fetch of feed %d: %w", feedID, itemErr)
	}
	published := false
	cur := rec
	for try := range maxRetries {
		if try > 0 {
			var err error
			if cur, rev, err = s.record(ctx, feedID); err != nil {
				return storage.Fetched{}, err
			}
		}
		nf, no := cur.Feed, o
		if err := fn(&nf, &no, added); err != nil {
			return storage.Fetched{}, fmt.Errorf("record fetch of feed %d: %d items stored, then the update failed: %w", feedID, len(added), err)
		}
		if nf.ID != cur.ID || nf.Kind != cur.Kind || nf.URL != cur.URL || nf.Slug != cur.Slug {
			return storage.Fetched{}, fmt.Errorf("record fetch of feed %d: %w: id, kind, URL and slug are fixed", feedID, storage.ErrInvalid)
		}
		nf.Created, nf.Updated = cur.Created, s.opt.Now()
		// The policy state learns the observation as stored, in the
		// record's compare-and-set.
		nrec := feedRecord{Feed: nf, State: cur.State, Dropped: cur.Dropped}
		if nf.Policy != cur.Policy {
			nrec.State = nil
		}
		s.learn(&nrec, &no)
		data, err := s.encodeRecord(&nrec)
		if err != nil {
			return storage.Fetched{}, err
		}
		var newRev uint64
		if !published && s.group != nil {
			// The usual case: the observation and the record go with
			// the group of fetches being stored now.
			// The observation is encoded once when the write completed
			// it as the dry run did (the usual case: the items added
			// are those found new).
			obsData := dryData
			if !reflect.DeepEqual(no, dryObs) {
				if obsData, err = encodeObservation(feedID, &no, s.maxData); err != nil {
					return storage.Fetched{}, err
				}
			}
			msg, opts := s.obsMessage(feedID, no.At, obsData)
			start := time.Now()
			w := &groupWrite{obs: msg, obsOpts: opts, rec: kvUpdate(DefsBucket, feedKey(feedID), data, rev)}
			if cerr := s.group.commit(ctx, w); cerr != nil {
				return storage.Fetched{}, fmt.Errorf("record fetch of feed %d: %w", feedID, cerr)
			}
			if w.obsErr != nil {
				return storage.Fetched{}, fmt.Errorf("observation of feed %d: %w", feedID, w.obsErr)
			}
			s.opt.Metrics.published("observation", start)
			published, err, newRev = true, w.recErr, w.recRev
		} else {
			if !published {
				if err := s.publishObservation(ctx, feedID, &no); err != nil {
					return storage.Fetched{}, err
				}
				published = true
			}
			newRev, err = s.defs.Update(ctx, feedKey(feedID), data, rev)
		}
		if s.opt.Metrics.kvWrite(DefsBucket, err) == nil {
			if owned {
				s.keepOwnedRecord(&nrec, data, newRev, mark)
			}
			return storage.Fetched{Feed: nf, Added: added, Observation: no, ItemErr: itemErr}, nil
		}
		if !IsConflict(err) {
			return storage.Fetched{}, fmt.Errorf("record fetch of feed %d: %w", feedID, err)
		}
	}
	return storage.Fetched{}, fmt.Errorf("record fetch of feed %d: %w", feedID, ErrStale)
}

// isItemRefusal reports whether err holds only refusals of single items
// and errors of retention, which leave what was stored in place.
func isItemRefusal(err error) bool {
	var ie *storage.ItemError
	var re *retentionError
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !isItemRefusal(e) {
				return false
			}
		}
		return true
	}
	return errors.As(err, &ie) || errors.As(err, &re)
}

// checkObservation refuses, with storage.ErrInvalid, an observation JSON
// cannot hold or larger than storage.MaxObservationSize or one message.
func checkObservation(feedID uint64, o *storage.Observation, maxData int) error {
	_, err := encodeObservation(feedID, o, maxData)
	return err
}

// encodeObservation is o's JSON, refused as checkObservation does.
func encodeObservation(feedID uint64, o *storage.Observation, maxData int) ([]byte, error) {
	data, err := json.Marshal(o)
	if err != nil || len(data) > storage.MaxObservationSize || len(data) > maxData {
		return nil, fmt.Errorf("observation of feed %d: %w: %d bytes, %v", feedID, storage.ErrInvalid, len(data), err)
	}
	return data, nil
}

// obsMessage is the message of an observation made at at, encoded as
// data, on the feed's observation subject, with a message ID from the
// feed and at, so that a retry stores it once.
func (s *Store) obsMessage(feedID uint64, at time.Time, data []byte) (*nats.Msg, []jetstream.PublishOpt) {
	msgID := strconv.FormatUint(feedID, 10) + "/" + strconv.FormatInt(at.UnixNano(), 10)
	return &nats.Msg{Subject: s.obsSubjectOf(feedID), Data: data}, []jetstream.PublishOpt{jetstream.WithMsgID(msgID)}
}

// publishObservation publishes o to the feed's observation subject.
func (s *Store) publishObservation(ctx context.Context, feedID uint64, o *storage.Observation) error {
	data, err := encodeObservation(feedID, o, s.maxData)
	if err != nil {
		return err
	}
	msg, opts := s.obsMessage(feedID, o.At, data)
	start := time.Now()
	if _, err := s.js.PublishMsg(ctx, msg, opts...); err != nil {
		return fmt.Errorf("observation of feed %d: %w", feedID, err)
	}
	s.opt.Metrics.published("observation", start)
	return nil
}

// RecordFetch is Store.RecordFetch.
func (b *Backend) RecordFetch(feedID uint64, items []storage.Item, o storage.Observation, fn func(f *storage.Feed, o *storage.Observation, added []storage.Item) error) (storage.Fetched, error) {
	ctx, cancel := b.call()
	defer cancel()
	res, err := b.s.RecordFetch(ctx, feedID, items, o, fn)
	if err == nil {
		b.unstored.Clear(feedID)
	}
	return res, err
}
