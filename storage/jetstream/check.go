package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
)

// Check verifies that the records agree with each other: every feed's
// unique-index key names it, every pipe's slug key names it and its
// output feed exists, is a pipe feed and carries the pipe's slug. Each
// disagreement is an error wrapping storage.ErrCorrupt; they are joined.
// It reads every record: an operator's tool, not a hot path.
func (s *Store) Check(ctx context.Context) error {
	var errs []error
	feeds, err := s.Feeds(ctx)
	if err != nil {
		return err
	}
	for i := range feeds {
		if err := s.indexNames(ctx, indexKeyOf(&feeds[i]), feeds[i].ID); err != nil {
			errs = append(errs, fmt.Errorf("feed %d (%s): %w", feeds[i].ID, describe(&feeds[i]), err))
		}
	}
	pipes, err := s.Pipes(ctx)
	if err != nil {
		return err
	}
	for _, p := range pipes {
		if err := s.indexNames(ctx, pipeSlugKey(p.Slug), p.ID); err != nil {
			errs = append(errs, fmt.Errorf("pipe %d (%s): %w", p.ID, p.Slug, err))
		}
		f, err := s.Feed(ctx, p.FeedID)
		switch {
		case errors.Is(err, storage.ErrFeedNotFound):
			errs = append(errs, fmt.Errorf("pipe %d: %w: output feed %d missing", p.ID, storage.ErrCorrupt, p.FeedID))
		case err != nil:
			return err
		case f.Kind != storage.KindPipe || f.Slug != p.Slug:
			errs = append(errs, fmt.Errorf("pipe %d: %w: output feed %d is %s feed %q", p.ID, storage.ErrCorrupt, f.ID, f.Kind, f.Slug))
		}
	}
	return errors.Join(errs...)
}

// indexNames checks that the index key names id.
func (s *Store) indexNames(ctx context.Context, key string, id uint64) error {
	e, err := s.index.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("%w: unique-index key missing", storage.ErrCorrupt)
	}
	if err != nil {
		return err
	}
	if got := string(e.Value()); got != strconv.FormatUint(id, 10) {
		return fmt.Errorf("%w: unique-index key names %q", storage.ErrCorrupt, got)
	}
	return nil
}

// Check is Store.Check, bounded by the call timeout.
func (b *Backend) Check() error {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.Check(ctx)
}
