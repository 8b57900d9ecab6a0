package jetstream

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
)

const (
	feedKeyPrefix = "feed."
	feedSeqKey    = "seq.feed"
)

func feedKey(id uint64) string { return feedKeyPrefix + strconv.FormatUint(id, 10) }

// indexKeyOf is the unique-index key of a feed: its URL for remote feeds,
// its kind and slug otherwise, hashed (URLs and slugs may hold characters
// KV keys may not).
func indexKeyOf(f *storage.Feed) string {
	if f.Kind == storage.KindRemote || f.Kind == "" {
		return "url." + hashKey(f.URL)
	}
	return "slug." + hashKey(string(f.Kind)+"/"+f.Slug)
}

func hashKey(s string) string {
	h := sha256.Sum256([]byte(s))
	return base64.RawURLEncoding.EncodeToString(h[:24])
}

// CreateFeed stores a new feed and sets f.ID, f.Created and f.Updated. Its
// ID comes from the seq.feed key, reserved in blocks (nextID); its
// URL (remote feeds) or kind and slug must be unique, else
// storage.ErrFeedExists. The unique-index key is created first, then the
// feed; if the second write fails the first is deleted again.
func (s *Store) CreateFeed(ctx context.Context, f *storage.Feed) error {
	if f.Kind == storage.KindRemote && f.URL == "" || f.Kind != storage.KindRemote && f.Slug == "" {
		return fmt.Errorf("create feed: %w: a remote feed needs a URL, others a slug", storage.ErrInvalid)
	}
	id, err := s.nextFeedID(ctx)
	if err != nil {
		return err
	}
	now := s.opt.Now()
	nf := *f
	nf.ID, nf.Created, nf.Updated = id, now, now
	rec := feedRecord{Feed: nf}
	if statedFeed(nf.Kind) {
		rec.State = &recordState{} // nothing learned yet
	}
	data, err := s.encodeRecord(&rec)
	if err != nil {
		return err
	}
	ik := indexKeyOf(&nf)
	if _, err := s.index.Create(ctx, ik, []byte(strconv.FormatUint(id, 10))); s.opt.Metrics.kvWrite(IndexBucket, err) != nil {
		if IsConflict(err) {
			return fmt.Errorf("create feed %s: %w", describe(&nf), storage.ErrFeedExists)
		}
		return fmt.Errorf("create feed %s: %w", describe(&nf), err)
	}
	if _, err := s.defs.Create(ctx, feedKey(id), data); s.opt.Metrics.kvWrite(DefsBucket, err) != nil {
		_ = s.opt.Metrics.kvWrite(IndexBucket, s.index.Delete(ctx, ik))
		return fmt.Errorf("create feed %s: %w", describe(&nf), err)
	}
	*f = nf
	return nil
}

func describe(f *storage.Feed) string {
	if f.URL != "" {
		return f.URL
	}
	return string(f.Kind) + "/" + f.Slug
}

func (s *Store) encodeFeed(f *storage.Feed) ([]byte, error) {
	data, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("feed %d: %w: %v", f.ID, storage.ErrInvalid, err)
	}
	if len(data) > storage.MaxFeedSize || len(data) > s.maxData {
		return nil, fmt.Errorf("feed %d: %w: record of %d bytes", f.ID, storage.ErrInvalid, len(data))
	}
	return data, nil
}

func (s *Store) nextFeedID(ctx context.Context) (uint64, error) {
	return s.nextID(ctx, feedSeqKey)
}

// Feed returns the feed with this ID, or storage.ErrFeedNotFound.
//
// A feed this node owns (SetOwner) is answered from the record the node
// wrote at its last poll, without a read: an edit on any node drops that
// copy, announced to the owner over NATS.
func (s *Store) Feed(ctx context.Context, id uint64) (storage.Feed, error) {
	if rec, ok := s.ownedRecord(id); ok {
		return rec.Feed, nil
	}
	rec, rev, err := s.record(ctx, id)
	if err == nil && rec.Kind == storage.KindRemote {
		s.recent.put(rec, rev, s.opt.Now())
	}
	return rec.Feed, err
}

func (s *Store) feed(ctx context.Context, id uint64) (storage.Feed, uint64, error) {
	rec, rev, err := s.record(ctx, id)
	return rec.Feed, rev, err
}

// record reads feed id's record with its policy state, and its revision.
func (s *Store) record(ctx context.Context, id uint64) (feedRecord, uint64, error) {
	s.opt.Metrics.read("record")
	e, err := s.get(ctx, s.defs, DefsBucket, feedKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return feedRecord{}, 0, fmt.Errorf("feed %d: %w", id, storage.ErrFeedNotFound)
	}
	if err != nil {
		return feedRecord{}, 0, fmt.Errorf("feed %d: %w", id, err)
	}
	rec, err := decodeRecord(id, e.Value())
	if err != nil {
		return feedRecord{}, 0, err
	}
	return rec, e.Revision(), nil
}

// Feeds returns every feed, by ID.
func (s *Store) Feeds(ctx context.Context) ([]storage.Feed, error) {
	ids, err := s.listIDs(ctx, feedKeyPrefix)
	if err != nil {
		return nil, fmt.Errorf("list feeds: %w", err)
	}
	out := make([]storage.Feed, 0, len(ids))
	for _, id := range ids {
		f, err := s.Feed(ctx, id)
		if errors.Is(err, storage.ErrFeedNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// listIDs returns, in order, the IDs of the defs keys <prefix><id>,
// including keys deleted since their last write (callers skip those when
// their Get finds nothing). It asks the bucket's stream leader for its
// subjects rather than listing keys through a watcher: on a replicated
// bucket the watcher's consumer can lag behind a write that was already
// acknowledged, and the list would miss a feed just created.
func (s *Store) listIDs(ctx context.Context, prefix string) ([]uint64, error) {
	keys, err := s.keysFromLeader(ctx, DefsBucket, prefix)
	if err != nil {
		return nil, err
	}
	ids := make([]uint64, 0, len(keys))
	for _, k := range keys {
		if id, err := strconv.ParseUint(k, 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// keysFromLeader returns the keys of bucket under prefix (without it), in
// no order, from the subjects of the bucket's stream as its leader knows
// them: every key written, deleted ones included.
func (s *Store) keysFromLeader(ctx context.Context, bucket, prefix string) ([]string, error) {
	stream, err := s.js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		return nil, err
	}
	subjPrefix := "$KV." + bucket + "." + prefix
	info, err := leaderInfo(ctx, stream, jetstream.WithSubjectFilter(subjPrefix+"*"))
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		keys = append(keys, strings.TrimPrefix(subj, subjPrefix))
	}
	return keys, nil
}

// UpdateFeed applies fn to the stored feed and writes it back at the
// revision it read; when another node wrote the feed meanwhile, it reads
// again and re-applies fn (fn must be repeatable), up to 16 times, then
// fails with ErrStale. fn may not change the ID, kind, URL or slug
// (storage.ErrInvalid). An error of fn is returned as it is and nothing is
// written. The feed's policy state is kept, unless fn changes its policy
// (the feed is then rebuilt by replay at a takeover).
func (s *Store) UpdateFeed(ctx context.Context, id uint64, fn func(*storage.Feed) error) (storage.Feed, error) {
	return s.updateRecord(ctx, id, fn, nil)
}

// updateRecord is UpdateFeed; with o, the record's policy state also
// learns observation o (RecordPoll).
func (s *Store) updateRecord(ctx context.Context, id uint64, fn func(*storage.Feed) error, o *storage.Observation) (storage.Feed, error) {
	for range maxRetries {
		rec, rev, err := s.record(ctx, id)
		if err != nil {
			return storage.Feed{}, err
		}
		f := rec.Feed
		nf := f
		if err := fn(&nf); err != nil {
			return storage.Feed{}, err
		}
		if nf.ID != f.ID || nf.Kind != f.Kind || nf.URL != f.URL || nf.Slug != f.Slug {
			return storage.Feed{}, fmt.Errorf("update feed %d: %w: id, kind, URL and slug are fixed", id, storage.ErrInvalid)
		}
		nf.Created, nf.Updated = f.Created, s.opt.Now()
		nrec := feedRecord{Feed: nf, State: rec.State, Dropped: rec.Dropped}
		if storage.RetentionWidened(f.Retention, nf.Retention) {
			nrec.Dropped = nil // as in the bbolt store
		}
		if nf.Policy != f.Policy {
			nrec.State = nil
		}
		if o != nil {
			s.learn(&nrec, o)
		}
		data, err := s.encodeRecord(&nrec)
		if err != nil {
			return storage.Feed{}, err
		}
		_, err = s.defs.Update(ctx, feedKey(id), data, rev)
		if s.opt.Metrics.kvWrite(DefsBucket, err) == nil {
			s.recent.forget(id)
			s.announceChanged(id)
			return nf, nil
		}
		if !IsConflict(err) {
			return storage.Feed{}, fmt.Errorf("update feed %d: %w", id, err)
		}
	}
	return storage.Feed{}, fmt.Errorf("update feed %d: %w", id, ErrStale)
}

// DeleteFeed deletes the feed, its unique-index key, its items and its
// observations.
func (s *Store) DeleteFeed(ctx context.Context, id uint64) error {
	f, rev, err := s.feed(ctx, id)
	if err != nil {
		return err
	}
	if err := s.opt.Metrics.kvWrite(DefsBucket, s.defs.Delete(ctx, feedKey(id), jetstream.LastRevision(rev))); err != nil {
		if IsConflict(err) {
			return fmt.Errorf("delete feed %d: %w", id, ErrStale)
		}
		return fmt.Errorf("delete feed %d: %w", id, err)
	}
	s.known.forget(id)
	s.recent.forget(id)
	s.announceChanged(id)
	var errs []error
	if err := s.opt.Metrics.kvWrite(IndexBucket, s.index.Delete(ctx, indexKeyOf(&f))); err != nil {
		errs = append(errs, err)
	}
	if err := s.items.Purge(ctx, jetstream.WithPurgeSubject(itemSubject(id))); err != nil {
		errs = append(errs, err)
	}
	for _, subject := range s.obsSubjectsOf(id) {
		if err := s.obs.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delete feed %d: %w", id, err)
	}
	return nil
}

// RecordPoll stores one poll's observation and applies fn to the feed (its
// learned schedule state, validators and counters) so that a node taking
// the feed over polls at the learned prediction. The observation is
// published first, with a message ID from the feed and the poll time so a
// retry stores it once, then the feed is updated as UpdateFeed does; a
// crash between the two leaves an observation newer than the feed's
// state, which a takeover replays.
func (s *Store) RecordPoll(ctx context.Context, feedID uint64, o storage.Observation, fn func(*storage.Feed) error) (storage.Feed, error) {
	if err := checkObservation(feedID, &o, s.maxData); err != nil {
		return storage.Feed{}, err
	}
	if _, err := s.Feed(ctx, feedID); err != nil {
		return storage.Feed{}, err
	}
	if err := s.publishObservation(ctx, feedID, &o); err != nil {
		return storage.Feed{}, fmt.Errorf("record poll of feed %d: %w", feedID, err)
	}
	if fn == nil {
		fn = func(*storage.Feed) error { return nil }
	}
	return s.updateRecord(ctx, feedID, fn, &o)
}

// Observations returns the newest limit observations of the feed, oldest
// first (limit ≤ 0: all that are kept).
func (s *Store) Observations(ctx context.Context, feedID uint64, limit int) ([]storage.Observation, error) {
	return retryNoResponders(ctx, func() ([]storage.Observation, error) { return s.readObservations(ctx, feedID, limit) })
}

func (s *Store) readObservations(ctx context.Context, feedID uint64, limit int) ([]storage.Observation, error) {
	// ctx may be a whole load's (minutes): each request is bounded on
	// its own and asked again when unanswered.
	// Only the subjects that hold observations are filtered on: a
	// consumer on two subjects is not served from the per-subject index
	// and reads the stream.
	var subjects []string
	total := 0
	for _, subject := range s.obsSubjectsOf(feedID) {
		info, err := RetryUnanswered(ctx, func(ctx context.Context) (*jetstream.StreamInfo, error) {
			return leaderInfo(ctx, s.obs, jetstream.WithSubjectFilter(subject))
		})
		if err != nil {
			return nil, fmt.Errorf("observations of feed %d: %w", feedID, err)
		}
		if n := int(info.State.Subjects[subject]); n > 0 {
			total += n
			subjects = append(subjects, subject)
		}
	}
	if total == 0 {
		return nil, nil
	}
	if limit <= 0 || limit > total {
		limit = total
	}
	cons, err := RetryUnanswered(ctx, func(ctx context.Context) (jetstream.Consumer, error) {
		return s.obs.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: subjects, InactiveThreshold: 10 * time.Second})
	})
	if err != nil {
		return nil, fmt.Errorf("observations of feed %d: %w", feedID, err)
	}
	defer s.release(s.obs, cons)
	out, err := fetchAll(ctx, cons, total, fmt.Sprintf("observations of feed %d", feedID), func(m jetstream.Msg) (storage.Observation, error) {
		var o storage.Observation
		if err := json.Unmarshal(m.Data(), &o); err != nil {
			return o, fmt.Errorf("%w: %v", storage.ErrCorrupt, err)
		}
		return o, nil
	})
	if err != nil {
		return nil, err
	}
	return out[max(0, len(out)-limit):], nil
}
