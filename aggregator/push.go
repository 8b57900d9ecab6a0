package aggregator

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/reader/parser"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// Push: what the aggregator offers a WebSub subscriber (plugins/websub).
//
//   - Discovery: Parse reports the hubs and the self URL a document
//     advertises (Parsed.Hubs, Parsed.Self), and Watch hears of every poll
//     with them.
//   - Content distribution: Ingest stores a pushed document exactly as a
//     poll would store the same document: deduplicated items, publish-time
//     estimates (the Slogfeed-Phase header first), an observation for the
//     feed's policy, OnNewItems.
//   - Fallback polling: SetPushed makes a feed's polling a low-rate check
//     while its subscription lasts: the next poll after any poll is at
//     least PushFallback(period) away, period being the policy's learned
//     median interval. The check catches pushes a hub failed to deliver.

// Fallback polling of a pushed feed: max(PushFallbackFactor × the learned
// period, PushFallbackMin), at most PushFallbackMax.
const (
	PushFallbackFactor = 4
	PushFallbackMin    = 5 * time.Minute
	PushFallbackMax    = time.Hour
)

// PushFallback returns how long a pushed feed waits between fallback polls
// given its policy's learned period (zero when unknown).
func PushFallback(period time.Duration) time.Duration {
	d := PushFallbackMin
	if period > 0 && period < PushFallbackMax {
		d = max(d, PushFallbackFactor*period)
	} else if period >= PushFallbackMax {
		d = PushFallbackMax
	}
	return min(d, PushFallbackMax)
}

// Fetched is what one poll of a remote feed saw, for a Watcher.
type Fetched struct {
	// Feed is the feed as updated by the poll.
	Feed storage.Feed
	// At is when the response arrived.
	At time.Time
	// NotModified reports a 304 (or an unchanged 200): no document, so no
	// Hubs or Self either.
	NotModified bool
	// Hubs and Self are the document's WebSub links (Parsed.Hubs, .Self).
	Hubs []string
	Self string
	// Added are the items the poll stored (none were pushed before it).
	Added []storage.Item
}

// A Watcher hears of what the live aggregator does besides storing new
// items (which OnNewItems reports). Its functions run on the aggregator's
// goroutines: they must return quickly. Either may be nil.
type Watcher struct {
	// Fetched is called after every successful poll of a remote feed (not
	// after an Ingest).
	Fetched func(Fetched)
	// Removed is called after a feed is unsubscribed.
	Removed func(id uint64)
}

// pushState is the Service's push bookkeeping.
type pushState struct {
	mu       sync.Mutex                // serialises Watch
	watchers atomic.Pointer[[]Watcher] // replaced whole by Watch, never changed in place
}

// Watch adds w to the watchers. Call it before Run.
func (s *Service) Watch(w Watcher) {
	s.push.mu.Lock()
	defer s.push.mu.Unlock()
	var ws []Watcher
	if old := s.push.watchers.Load(); old != nil {
		ws = slices.Clone(*old)
	}
	ws = append(ws, w)
	s.push.watchers.Store(&ws)
}

// watchers returns the watchers: read by every poll, so without a lock
// or a copy (Watch replaces the slice, never changes it).
func (s *Service) watchers() []Watcher {
	if ws := s.push.watchers.Load(); ws != nil {
		return *ws
	}
	return nil
}

// fetched tells the watchers of a successful poll.
func (s *Service) fetched(f storage.Feed, at time.Time, parsed *parser.Parsed, added []storage.Item) {
	ws := s.watchers()
	if len(ws) == 0 {
		return
	}
	ev := Fetched{Feed: f, At: at, NotModified: parsed == nil, Added: added}
	if parsed != nil {
		ev.Hubs, ev.Self = slices.Clone(parsed.Hubs), parsed.Self
	}
	for _, w := range ws {
		if w.Fetched != nil {
			w.Fetched(ev)
		}
	}
}

// removed tells the watchers that feed id is gone.
func (s *Service) removed(id uint64) {
	for _, w := range s.watchers() {
		if w.Removed != nil {
			w.Removed(id)
		}
	}
}

// SetPushed marks remote feed id as pushed by a hub until the lease ends:
// until then its polls are fallback checks, PushFallback(period) apart at
// least. A zero or past until ends it, and the feed is polled again at
// once (as far as politeness allows) and then on its policy's schedule.
// It reports whether the service schedules the feed.
func (s *Service) SetPushed(id uint64, until time.Time) bool {
	g := s.guard(id)
	if g == nil {
		return false
	}
	now := s.opt.Clock.Now()
	g.mu.Lock()
	was := g.pushedUntil.time()
	g.pushedUntil = stampOf(until)
	g.mu.Unlock()
	if !until.After(now) && was.After(now) {
		s.Expedite(id, now)
	}
	return true
}

// Pushed returns until when feed id is marked pushed (zero when it is not).
func (s *Service) Pushed(id uint64) time.Time {
	g := s.guard(id)
	if g == nil {
		return time.Time{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pushedUntil.time()
}

// pushFloor raises next, the time chosen after an observation at at, to
// the fallback interval while the feed is pushed. The caller holds g.mu.
func (g *feedGuard) pushFloor(next, at time.Time) time.Time {
	if !at.Before(g.pushedUntil.time()) {
		return next
	}
	var period time.Duration
	if st, ok := g.policy.(interface{ State() schedule.State }); ok {
		period = st.State().Median
	}
	if floor := at.Add(PushFallback(period)); floor.After(next) {
		return floor
	}
	return next
}

// Ingest stores a document pushed for remote feed id (a WebSub content
// distribution) as a poll that got the same document would: new items
// are deduplicated against the stored ones, their publish times estimated
// (the Slogfeed-Phase header of header first, then the items' own
// dates), an observation recorded and given to the feed's policy, and
// OnNewItems told. header is the push request's header (Content-Type,
// slogfeed's hint headers); received is when the push arrived. The poll
// state (poll count, validators, errors) is left alone. It returns how
// many items were new.
//
// Errors: storage.ErrFeedNotFound, ErrNotRemote, ErrTooLarge (a body over
// the fetcher's MaxBody), ErrNotFeed or ErrMalformed from the parser, or
// a storage failure.
func (s *Service) Ingest(ctx context.Context, id uint64, body []byte, header http.Header, received time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	f, err := s.opt.Store.Feed(id)
	if err != nil {
		return 0, err
	}
	if f.Kind != storage.KindRemote {
		return 0, ErrNotRemote
	}
	if limit := s.opt.Fetcher.MaxBody(); int64(len(body)) > limit {
		return 0, fmt.Errorf("push to feed %d: %w: %d bytes, the limit is %d", id, fetcher.ErrTooLarge, len(body), limit)
	}
	if received.IsZero() {
		received = s.opt.Clock.Now()
	}
	if header == nil {
		header = http.Header{}
	}
	resp := fetcher.Delivered(body, header, received, f.URL)
	parsed, err := s.parseBody(f, body, resp.ContentType, parser.Options{
		MaxItems: s.opt.MaxItems, Extract: f.Extract, Now: received, BaseURL: f.URL,
	})
	if err != nil {
		return 0, fmt.Errorf("push to feed %d: %w", id, err)
	}
	g := s.guard(id)
	var prev time.Time
	if g != nil {
		g.mu.Lock()
		prev = g.prevPoll.time()
		g.mu.Unlock()
	}
	obs, added, _, err := s.record(f, resp, parsed, prev, received, true)
	if err != nil {
		return 0, fmt.Errorf("push to feed %d: %w", id, err)
	}
	if g != nil {
		// The policy learns from the push as from a poll that came just
		// in time (observations reach it in time order: a push older than
		// what it has seen is stored but not given to it).
		// A deferred feed's policy reads the push from its record; one
		// given its record just now has the push already (fedAt is its
		// time).
		g.mu.Lock()
		if g.policy != nil && obs.At.After(g.fedAt.time()) {
			g.policy.Next(obs.Schedule())
			g.fedAt = stampOf(obs.At)
			g.prevPoll = g.fedAt
		}
		g.mu.Unlock()
	}
	return len(added), nil
}
