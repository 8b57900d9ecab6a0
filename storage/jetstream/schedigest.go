package jetstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
)

// DigestBucket keeps each shard's schedule digest (storage.ScheduleDigest):
// key shard.<shard>.<part>, one value per key. A digest is a hint a node
// taking a shard over queues the shard's feeds from at once; the feed
// records stay the truth.
const DigestBucket = "slogfeed_sched"

// digestReaders bounds the digest parts read at once.
const digestReaders = 8

func digestKey(shard, part int) string {
	return "shard." + strconv.Itoa(shard) + "." + strconv.Itoa(part)
}

// PutScheduleDigest stores d, one shard's digest whole, in as many parts
// as the message size needs (parts of an earlier, longer writing are
// left: they carry another written time and are not read with this one).
func (s *Store) PutScheduleDigest(ctx context.Context, d storage.ScheduleDigest) error {
	kv, err := s.digests(ctx, true)
	if err != nil {
		return err
	}
	parts, err := storage.SplitDigest(d, s.maxData)
	if err == nil {
		err = putShardParts(ctx, kv, parts, func(part int) string { return digestKey(d.Shard, part) })
	}
	if err != nil {
		return fmt.Errorf("schedule digest of shard %d: %w", d.Shard, err)
	}
	return nil
}

// putShardParts stores the parts of one shard's writing under key(part),
// the parts after the first first: a reader that sees the new part 0
// finds the parts it names.
func putShardParts(ctx context.Context, kv jetstream.KeyValue, parts [][]byte, key func(part int) string) error {
	for i := len(parts) - 1; i >= 0; i-- {
		if _, err := kv.Put(ctx, key(i), parts[i]); err != nil {
			return err
		}
	}
	return nil
}

// readShardParts reads, for each shard of shards, up to digestReaders
// shards at once, the part 0 of its newest writing under key and then
// the other parts its count names, each decoded by decode (which
// returns the part, its writing's part count and whether it can be
// used). A shard whose part 0 is missing or unusable is left out; a
// part after it that is, is skipped. The error is the first read error
// other than a missing key.
func readShardParts[P any](ctx context.Context, kv jetstream.KeyValue, shards []int, key func(shard, part int) string,
	decode func(shard, part int, b []byte) (p P, parts int, ok bool)) (map[int][]P, error) {
	var (
		mu    sync.Mutex
		out   = map[int][]P{}
		first error
	)
	get := func(shard, part int) (P, int, bool) {
		// ctx may be a whole load's: each get is bounded on its own.
		e, err := RetryUnanswered(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return kv.Get(ctx, key(shard, part)) })
		if err != nil {
			if !errors.Is(err, jetstream.ErrKeyNotFound) {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
			}
			var zero P
			return zero, 0, false
		}
		return decode(shard, part, e.Value())
	}
	sem := make(chan struct{}, digestReaders)
	var wg sync.WaitGroup
	for _, shard := range shards {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			head, n, ok := get(shard, 0)
			if !ok {
				return
			}
			got := []P{head}
			for p := 1; p < n; p++ {
				if d, _, ok := get(shard, p); ok {
					got = append(got, d)
				}
			}
			mu.Lock()
			out[shard] = got
			mu.Unlock()
		})
	}
	wg.Wait()
	return out, first
}

// ScheduleDigests returns the newest digest of each shard of shards that
// has one (storage.ScheduleDigester), reading up to digestReaders shards
// at once. A part that cannot be read or decoded leaves its entries out.
func (s *Store) ScheduleDigests(ctx context.Context, shards []int) ([]storage.ScheduleDigest, error) {
	kv, err := s.digests(ctx, false)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil // no node wrote one yet
	}
	if err != nil {
		return nil, err
	}
	byShard, first := readShardParts(ctx, kv, shards, digestKey, func(shard, part int, b []byte) (storage.ScheduleDigest, int, bool) {
		d, err := storage.DecodeDigest(b)
		if err != nil || d.Shard != shard || d.Part != part {
			return storage.ScheduleDigest{}, 0, false
		}
		return d, d.Parts, true
	})
	var parts []storage.ScheduleDigest
	for _, got := range byShard {
		parts = append(parts, got...)
	}
	if len(parts) == 0 && first != nil {
		return nil, fmt.Errorf("schedule digests: %w", first)
	}
	return storage.JoinDigests(parts), nil
}

// digests opens the digest bucket; the first write creates it (a
// writer's path, not a takeover's).
func (s *Store) digests(ctx context.Context, create bool) (jetstream.KeyValue, error) {
	s.digestMu.Lock()
	defer s.digestMu.Unlock()
	if s.digestKV != nil {
		return s.digestKV, nil
	}
	var kv jetstream.KeyValue
	var err error
	if create {
		kv, err = KeyValue(ctx, s.js, jetstream.KeyValueConfig{
			Bucket: DigestBucket, Description: "slogfeed schedule digests, one per shard",
			History: 1, Storage: jetstream.FileStorage, Replicas: s.opt.Replicas,
		})
	} else {
		kv, err = s.js.KeyValue(ctx, DigestBucket)
	}
	if err != nil {
		return nil, fmt.Errorf("schedule digests: %w", err)
	}
	s.digestKV = kv
	return kv, nil
}

// PutScheduleDigest is Store.PutScheduleDigest.
func (b *Backend) PutScheduleDigest(d storage.ScheduleDigest) error {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.PutScheduleDigest(ctx, d)
}

// ScheduleDigests is Store.ScheduleDigests.
func (b *Backend) ScheduleDigests(shards []int) ([]storage.ScheduleDigest, error) {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.ScheduleDigests(ctx, shards)
}
