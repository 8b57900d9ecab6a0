package jetstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
)

// State snapshots (storage.StateSnapshot) live in the digest bucket
// beside the schedule digests, under state.<shard>.<part>.
func snapshotKey(shard, part int) string {
	return "state." + strconv.Itoa(shard) + "." + strconv.Itoa(part)
}

// PutStateSnapshot stores d, one shard's snapshot whole, in as many
// parts as the message size needs (putShardParts; parts of an earlier,
// longer writing are left, with another written time).
func (s *Store) PutStateSnapshot(ctx context.Context, d storage.StateSnapshot) error {
	kv, err := s.digests(ctx, true)
	if err != nil {
		return err
	}
	parts, err := storage.SplitStateSnapshot(d, s.maxData)
	if err == nil {
		err = putShardParts(ctx, kv, parts, func(part int) string { return snapshotKey(d.Shard, part) })
	}
	if err != nil {
		return fmt.Errorf("state snapshot of shard %d: %w", d.Shard, err)
	}
	return nil
}

// StateSnapshots returns the newest snapshot of each shard of shards
// whose parts can all be read and decoded, reading up to digestReaders
// shards at once; a shard with a part missing, unreadable or of another
// writing is left out (its feeds' records are read instead).
func (s *Store) StateSnapshots(ctx context.Context, shards []int) ([]storage.StateSnapshot, error) {
	kv, err := s.digests(ctx, false)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	byShard, first := readShardParts(ctx, kv, shards, snapshotKey, func(shard, part int, b []byte) (storage.StateSnapshot, int, bool) {
		d, err := storage.DecodeStateSnapshot(b)
		if err != nil || d.Shard != shard || d.Part != part {
			return storage.StateSnapshot{}, 0, false
		}
		return d, d.Parts, true
	})
	var out []storage.StateSnapshot
	for _, parts := range byShard {
		whole := parts[0]
		otherWriting := func(d storage.StateSnapshot) bool { return !d.Written.Equal(whole.Written) || d.Parts != whole.Parts }
		if len(parts) != whole.Parts || slices.ContainsFunc(parts[1:], otherWriting) {
			continue
		}
		for _, d := range parts[1:] {
			whole.Entries = append(whole.Entries, d.Entries...)
		}
		whole.Parts = 1
		out = append(out, whole)
	}
	if len(out) == 0 && first != nil {
		return nil, fmt.Errorf("state snapshots: %w", first)
	}
	return out, nil
}

// writtenTries bounds the fetches of FeedsWrittenSince that return
// nothing while the consumer has messages pending.
const writtenTries = 8

// FeedsWrittenSince returns the feeds whose records were written
// (created, updated, deleted) at or after t by the defs stream's clock,
// with the time of each one's newest write: one headers-only consumer of
// the bucket's feed keys from t, read up to what it had pending when it
// was created. Its cost grows with the writes since t, not with the
// feeds.
func (s *Store) FeedsWrittenSince(ctx context.Context, t time.Time) (map[uint64]time.Time, error) {
	stream, err := RetryUnanswered(ctx, func(ctx context.Context) (jetstream.Stream, error) { return s.js.Stream(ctx, "KV_"+DefsBucket) })
	if err != nil {
		return nil, fmt.Errorf("feeds written since %v: %w", t, err)
	}
	prefix := "$KV." + DefsBucket + "." + feedKeyPrefix
	// A consumer whose create went unanswered is left to its
	// inactivity threshold.
	cons, err := RetryUnanswered(ctx, func(ctx context.Context) (jetstream.Consumer, error) {
		return stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
			DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &t,
			FilterSubject: prefix + "*", HeadersOnly: true, AckPolicy: jetstream.AckNonePolicy,
			InactiveThreshold: 10 * time.Second, Replicas: 1, MemoryStorage: true,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("feeds written since %v: %w", t, err)
	}
	defer s.release(stream, cons)
	pending := cons.CachedInfo().NumPending
	out := map[uint64]time.Time{}
	var got uint64
	for empty := 0; got < pending; {
		batch, err := cons.FetchNoWait(fetchBatch)
		n := 0
		if err == nil {
			for m := range batch.Messages() {
				n++
				got++
				md, err := m.Metadata()
				if err != nil {
					return nil, fmt.Errorf("feeds written since %v: %w", t, err)
				}
				id, err := strconv.ParseUint(strings.TrimPrefix(m.Subject(), prefix), 10, 64)
				if err != nil {
					continue
				}
				if md.Timestamp.After(out[id]) {
					out[id] = md.Timestamp
				}
			}
			err = batch.Error()
		}
		if err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !unanswered(err) {
			return nil, fmt.Errorf("feeds written since %v: %w", t, err)
		}
		// A fetch "no responders" from a consumer not answering yet, or
		// timed out, is tried again as an empty one is.
		if n > 0 {
			empty = 0
			continue
		}
		if empty++; empty > writtenTries {
			return nil, fmt.Errorf("feeds written since %v: read %d of the %d writes pending, fetches return none", t, got, pending)
		}
		if err := sleepCtx(ctx, backoff(empty, 20*time.Millisecond, time.Second)); err != nil {
			return nil, fmt.Errorf("feeds written since %v: %w", t, err)
		}
	}
	return out, nil
}

// PutStateSnapshot is Store.PutStateSnapshot.
func (b *Backend) PutStateSnapshot(d storage.StateSnapshot) error {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.PutStateSnapshot(ctx, d)
}

// StateSnapshots is Store.StateSnapshots, bounded by DefaultLoadTimeout
// (a third of a million feeds' snapshots are hundreds of megabytes).
func (b *Backend) StateSnapshots(shards []int) ([]storage.StateSnapshot, error) {
	ctx, cancel := context.WithTimeout(b.ctx, DefaultLoadTimeout)
	defer cancel()
	return b.s.StateSnapshots(ctx, shards)
}

// FeedsWrittenSince is Store.FeedsWrittenSince, answered from the writes
// the watch of the feed IDs (FeedIDs) saw when it has followed the
// bucket since t: a takeover then reads nothing (creating the consumer
// waits on the cluster's meta leader, which the dead node's server may
// have been, and reading a few minutes of writes took seconds at a
// million feeds). A write the watch has not delivered yet (its lag is
// milliseconds) is missed: it would have to land in the instant before
// the takeover's read.
func (b *Backend) FeedsWrittenSince(t time.Time) (map[uint64]time.Time, error) {
	if out, ok := b.ids.writtenSince(t); ok {
		return out, nil
	}
	ctx, cancel := b.call()
	defer cancel()
	return b.s.FeedsWrittenSince(ctx, t)
}
