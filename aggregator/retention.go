package aggregator

import (
	"context"
	"errors"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// RetentionSweep is how often the service applies the age limits
// (Retention.MaxAge) of the feeds it owns. Limits apply as items arrive
// too; the sweep is for the feeds that stopped publishing, or whose
// publisher answers "not modified", whose items would otherwise outlive
// their age.
const RetentionSweep = 10 * time.Minute

// retainer is a store that applies a feed's retention on demand.
type retainer interface {
	ApplyRetention(feedID uint64) (int, error)
}

// sweepRetention applies the age limits of the owned feeds every
// RetentionSweep until ctx ends.
func (s *Service) sweepRetention(ctx context.Context) {
	st, ok := s.opt.Store.(retainer)
	if !ok {
		return
	}
	for {
		t := s.opt.Clock.NewTimer(RetentionSweep)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		s.sweepRetentionOnce(ctx, st)
	}
}

// agedFeeds lists the feeds with an age limit that the sweep applies:
// owned, and not a pipe's output, which the pipe's runs keep. They come
// from the store's in-memory summaries; a store without them (JetStream,
// where listing every record each time would cost a read per feed)
// applies age limits as items arrive only.
func (s *Service) agedFeeds() ([]uint64, error) {
	sum, ok := s.opt.Store.(storage.Summaries)
	if !ok {
		return nil, nil
	}
	var ids []uint64
	err := sum.EachFeedSummary(func(f *storage.FeedSummary) bool {
		if f.Aged && f.Kind != storage.KindPipe && s.opt.Owner.OwnsFeed(f.ID) {
			ids = append(ids, f.ID)
		}
		return true
	})
	return ids, err
}

// sweepRetentionOnce applies the retention of every owned feed with an
// age limit, and returns how many items it removed.
func (s *Service) sweepRetentionOnce(ctx context.Context, st retainer) int {
	ids, err := s.agedFeeds()
	if err != nil {
		s.log.Warn("cannot list the feeds to apply their age limits", "err", err)
		return 0
	}
	removed := 0
	for _, id := range ids {
		if ctx.Err() != nil {
			break
		}
		n, err := st.ApplyRetention(id)
		if err != nil && !errors.Is(err, storage.ErrFeedNotFound) {
			s.log.Warn("cannot apply a feed's age limit", "feed", id, "err", err)
			continue
		}
		removed += n
	}
	if removed > 0 {
		s.log.Debug("age limits applied", "removed", removed)
	}
	return removed
}
