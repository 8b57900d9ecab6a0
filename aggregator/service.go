package aggregator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/reader/parser"
	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
)

// Error backoff: a feed that fails waits min(ErrorBackoffBase·2^(n−1),
// ErrorBackoffMax) after its n-th error in a row (or the server's
// Retry-After, if longer), and is never disabled.
const (
	ErrorBackoffBase = time.Minute
	ErrorBackoffMax  = 24 * time.Hour
)

// Store retry: a poll whose fetch succeeded but whose write failed (a
// full disk, a cluster electing a new leader) is not the feed's fault,
// unless the store refused what it brought (storage.ErrInvalid: then it
// is a fetch error with its backoff). Nothing is recorded on the feed,
// and it is polled again
// min(StoreRetryBase·2^(n−1), StoreRetryMax) after the n-th such failure
// in a row, which fetches the same document again (its validators were
// not stored) and stores what the failed write lost.
const (
	StoreRetryBase = 2 * time.Second
	StoreRetryMax  = time.Minute
)

// Service errors.
var (
	// ErrBadURL: a subscription URL that is not absolute http(s).
	ErrBadURL = errors.New("aggregator: feed URL must be an absolute http or https URL")
	// ErrNotRemote: the operation needs a fetched (remote) feed.
	ErrNotRemote = errors.New("aggregator: not a remote feed")
	// ErrBadSettings: a subscription's settings cannot work (a negative
	// retention, an extraction rule that does not compile).
	ErrBadSettings = errors.New("aggregator: invalid feed settings")
)

// ServiceOptions configure the live aggregator.
type ServiceOptions struct {
	// Store holds the feeds. On a store that keeps policy states
	// (storage.Store), NewService installs Learn as its learner.
	Store   Store
	Fetcher *fetcher.Fetcher
	// Scheduler is the fetch budget: global rate (fetches per second, 0 =
	// unlimited), per-host concurrency and workers; Clock is set from Clock.
	// Workers is the number of fetch slots (schedule.DefaultWorkers when
	// 0): documents being fetched and parsed at once. Polls whose write
	// waits for its group commit hold no fetch slot (see PendingWrites);
	// the per-host limit counts them until they complete.
	Scheduler schedule.Config
	// PendingWrites bounds, with Workers, the polls in flight: at most
	// Workers of them fetching and parsing, and at most Workers +
	// PendingWrites in all, the rest waiting for their write to be
	// durable (DefaultPendingWrites when 0). A fetch slot whose poll
	// waits for its write is free for the next fetch; with that many
	// polls in flight, no fetch starts until one completes.
	PendingWrites int

	Clock   schedule.Clock // default schedule.RealClock
	Logger  *slog.Logger
	Metrics *Metrics // optional
	// OnNewItems is told about every fetch that stored new items (pipes
	// subscribe here), once the fetch's write is on disk. It runs on
	// the goroutine that completes the poll: keep it short.
	OnNewItems func(feed storage.Feed, items []storage.Item)
	// MaxItems caps the items taken from one fetch (default 1000).
	MaxItems int
	// Sources are the source adapters feeds with a Source use in place of
	// the feed parser (plugins.Sources()); nil for none.
	Sources Sources
	// Owner says which feeds this node polls (a cluster node's shards);
	// nil means cluster.Everything, a single slogfeed that polls all.
	// The service follows its Changed: it schedules feeds it comes to
	// own at their learned prediction and stops polling those it lost;
	// a fetch asks OwnsFeed again just before it starts.
	Owner cluster.Owner
	// Resync is how often a clustered service lists the store's feeds
	// to pick up those created or deleted on other nodes; zero means
	// DefaultResync with an Owner other than cluster.Everything, never
	// without one; negative means never.
	Resync time.Duration
	// DigestEvery is how often a clustered service writes the schedule
	// digests of its shards (digest.go) with a store that keeps them;
	// zero means DefaultDigestEvery, negative never. A node taking a
	// shard over queues its feeds from the digest before their records
	// are read.
	DigestEvery time.Duration
	// SnapshotEvery is how often a clustered service writes the state
	// snapshot of each of its shards (snapshot.go) with a store that
	// keeps them; zero means DefaultSnapshotEvery, negative never. A
	// node taking a shard over gives the feeds not written since their
	// policies from the snapshot instead of reading their records.
	SnapshotEvery time.Duration
}

// Service is the live loop: the scheduler pops the feed whose predicted
// publish time has come, the fetcher fetches it (conditional GET), new
// items are stored, and an observation goes back to the feed's policy,
// which returns the next fetch time. Policies are rebuilt after a restart
// from the policy states stored with the observations (load.go), or by
// replaying the stored observations.
type Service struct {
	opt   ServiceOptions
	sched *schedule.Scheduler
	log   *slog.Logger
	// failures writes the fetch failures to the log at a bounded rate.
	failures failureLog

	mu     sync.Mutex
	guards map[uint64]*feedGuard
	push   pushState // watchers (push.go)
	own    ownState  // a clustered service's listing (owner.go)
	load   loadState // the start-up's progress (load.go)

	// The live loop (loop.go): fetch slots, and wake, signalled when the
	// scheduler may have a grant for a free slot (a feed added or
	// brought forward, a poll completed).
	fetchers int
	wake     chan struct{}
	running  atomic.Bool

	// The records of feeds queued from schedule digests (digest.go):
	// read by the restorer; restored is signalled when the last deferred
	// feed has its policy.
	restoreQ restoreQueue
	restored chan struct{}

	// fresh paces the first fetches of feeds never polled: those
	// subscribed in bulk or imported (SubscribePaced) and those a load
	// finds, one pacer for the node (FirstFetchRate).
	fresh firstFetches
}

// feedGuard wraps a feed's policy with what the service decides on its own:
// error backoff and Retry-After, the publisher's cache lifetime as a lower
// bound (unless the feed opts out), and sleep windows, which a fetch may
// reveal (RSS skipHours/skipDays) at any time.
type feedGuard struct {
	mu      sync.Mutex
	policy  schedule.Policy
	respect bool
	sleep   schedule.SleepPlan
	// override, when set, is the next time regardless of the policy (an
	// error's backoff, a fetch skipped because the feed sleeps).
	override stamp
	prevPoll stamp
	next     stamp // the last answer: the feed's next fetch
	// planned is the last answer before the sleep windows moved it
	// (SetSleep plans from it again when windows go).
	planned   stamp
	notBefore stamp // the publisher's cache lifetime ends (when respected)
	// pushedUntil: a hub pushes the feed until then, polls are fallback
	// checks (SetPushed); fedAt is the newest observation the policy has
	// seen (polls and pushes reach it in time order).
	pushedUntil stamp
	fedAt       stamp
	took        time.Duration // how long the last fetch took, stored items included
	storeFails  int           // polls in a row whose write failed (see StoreRetryBase)
	// storeFailedAt: the first of those failed then.
	storeFailedAt stamp
	// seen are the sorted item hashes (Parsed.ItemHashes) of the last
	// document a poll stored: the next poll does not parse those again,
	// as long as the feed's retention is still seenRet (items it refused
	// may be admitted under another).
	seen    []uint64
	seenRet storage.Retention
	// deferred: queued from a schedule digest, the policy not read yet
	// (digest.go); policy is nil until then.
	deferred bool
	// slept: override is the end of a sleep window that skipped the
	// fetch planned for then (kept in planned).
	slept bool
	// resleep: SetSleep ran while the feed was not waiting in the
	// queue (a poll under way, whose end may plan from, or store, the
	// old windows): done applies the stored windows again after it.
	resleep bool
}

// isDeferred reports whether the guard waits for its record (deferred).
func (g *feedGuard) isDeferred() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.deferred
}

// seenFunc returns ParseOptions.Seen for the feed's next poll under
// retention ret (nil when there is nothing to skip, or the hashes were
// stored under another retention).
func (g *feedGuard) seenFunc(ret storage.Retention) func(uint64) bool {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	seen := g.seen
	if g.seenRet != ret {
		seen, g.seen = nil, nil
	}
	g.mu.Unlock()
	if len(seen) == 0 {
		return nil
	}
	return func(h uint64) bool {
		_, ok := slices.BinarySearch(seen, h)
		return ok
	}
}

// setSeen remembers the item hashes of a document whose poll is stored
// under retention ret.
func (g *feedGuard) setSeen(hashes []uint64, ret storage.Retention) {
	if g == nil {
		return
	}
	seen := slices.Clone(hashes)
	slices.Sort(seen)
	seen = slices.Compact(seen)
	g.mu.Lock()
	g.seen, g.seenRet = seen, ret
	g.mu.Unlock()
}

// Next implements schedule.Policy.
func (g *feedGuard) Next(o schedule.Observation) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	var next time.Time
	floorAt := o.At
	slept := false
	if !g.override.isZero() {
		next, g.override = g.override.time(), 0
		slept, g.slept = g.slept, false
		// The fallback interval counts from the last poll: a fetch
		// skipped because the feed is pushed set the override to that
		// floor already, and must not wait another interval.
		floorAt = g.prevPoll.time()
	} else if g.policy == nil {
		// Deferred, its record not read yet (digest.go): try soon.
		next = o.At.Add(deferredRetry)
	} else {
		if fed := g.fedAt.time(); o.At.Before(fed) {
			o.At = fed // a push reached the policy meanwhile
		}
		g.fedAt = stampOf(o.At)
		next = g.policy.Next(o)
		g.notBefore = 0
		if g.respect {
			next = schedule.Respect(next, o)
			if o.Hints.CacheFor > 0 {
				g.notBefore = stampOf(o.At.Add(o.Hints.CacheFor))
			}
		}
	}
	next = g.pushFloor(next, floorAt)
	if !slept {
		g.planned = stampOf(next)
	}
	if !g.sleep.IsZero() {
		next = g.sleep.Wake(next)
	}
	g.next = stampOf(next)
	return next
}

// PredictedPublish forwards the policy's prediction to the scheduler.
func (g *feedGuard) PredictedPublish() (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if p, ok := g.policy.(schedule.Predictor); ok {
		return p.PredictedPublish()
	}
	return time.Time{}, false
}

// State returns the tracking state of policies that have one.
func (g *feedGuard) State() (schedule.State, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s, ok := g.policy.(interface{ State() schedule.State }); ok {
		return s.State(), true
	}
	return schedule.State{}, false
}

// NewService builds the live aggregator.
func NewService(opt ServiceOptions) (*Service, error) {
	if opt.Store == nil || opt.Fetcher == nil {
		return nil, errors.New("aggregator: service needs a store and a fetcher")
	}
	if opt.Clock == nil {
		opt.Clock = schedule.RealClock{}
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.MaxItems <= 0 {
		opt.MaxItems = 1000
	}
	if opt.Owner == nil {
		opt.Owner = cluster.Everything
	}
	if opt.Resync == 0 && opt.Owner != cluster.Everything {
		opt.Resync = DefaultResync
	}
	if opt.DigestEvery == 0 {
		opt.DigestEvery = DefaultDigestEvery
	}
	if opt.SnapshotEvery == 0 {
		opt.SnapshotEvery = DefaultSnapshotEvery
	}
	if opt.PendingWrites <= 0 {
		opt.PendingWrites = DefaultPendingWrites
	}
	cfg := opt.Scheduler
	cfg.Clock = opt.Clock
	fetchers := cfg.Workers
	if fetchers == 0 {
		fetchers = schedule.DefaultWorkers
	}
	// A poll stays granted (in flight for the scheduler: the feed is not
	// granted again) until its write is durable: the fetch slots plus the
	// pending writes.
	cfg.Workers = fetchers + opt.PendingWrites
	sched, err := schedule.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("aggregator: %w", err)
	}
	if ss, ok := opt.Store.(interface{ SetLearner(storage.Learner) }); ok {
		// Every observation written folds into its feed's policy state
		// (a bbolt store, a JetStream feed record).
		ss.SetLearner(Learn)
	}
	return &Service{
		opt: opt, sched: sched, log: opt.Logger, guards: map[uint64]*feedGuard{},
		fetchers: fetchers, wake: make(chan struct{}, 1),
		restoreQ: restoreQueue{wake: make(chan struct{}, 1)}, restored: make(chan struct{}, 1),
	}, nil
}

// SetMetrics attaches metrics (built after the service, since they read
// its scheduler) and registers the gauges of the service's Ownership
// with them. Call it before Run.
func (s *Service) SetMetrics(m *Metrics) {
	s.opt.Metrics = m
	m.watchOwnership(s.Ownership)
}

// Scheduler returns the scheduler (for metrics and tests).
func (s *Service) Scheduler() *schedule.Scheduler { return s.sched }

// Load schedules every remote feed of the store that this node owns,
// rebuilding each policy from its stored state (a store that keeps policy
// states, see load.go) or else from its stored observations. Call it once
// before Run, or use LoadInBackground. A clustered service reads the owned feeds' records and
// observations in passes (loadStates: on JetStream two passes, not a get
// and a consumer per feed); a single node, whose bbolt reads are local,
// reads feed by feed.
func (s *Service) Load() error { return s.loadAll(context.Background()) }

// loadAll is Load; ctx ends a clustered service's batched read.
func (s *Service) loadAll(ctx context.Context) error {
	if !s.clustered() {
		if ss, ok := s.opt.Store.(stateStore); ok {
			return s.loadStored(context.Background(), ss)
		}
		return s.loadEach()
	}
	// A start counts as a change of the owned shards (Ownership): the
	// first reconcile of Run marks it loaded. While the load runs,
	// Pending is the feeds it listed (a store whose records carry policy
	// states) and has not scheduled yet.
	s.own.changeSeen(s.opt.Clock.Now())
	defer s.own.setPending(0)
	replays, _, ok, err := s.loadStates(ctx, nil, s.ownsNow())
	if !ok {
		return s.loadEach()
	}
	if err != nil {
		return fmt.Errorf("aggregator: load feeds: %w", err)
	}
	ids := make([]uint64, 0, len(replays))
	for id := range replays {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	now := s.opt.Clock.Now()
	for _, id := range ids {
		if err := s.install(replays[id], now, true); err != nil {
			// One bad feed must not stop the others.
			s.log.Error("cannot schedule feed", "feed", id, "url", sanitize.RedactURL(replays[id].f.URL), "err", err)
			continue
		}
		s.own.scheduled()
	}
	return nil
}

// loadEach is Load for a store without a StateLoader: it lists the
// feeds and reads each one's observations.
func (s *Service) loadEach() error {
	feeds, err := s.opt.Store.Feeds()
	if err != nil {
		return fmt.Errorf("aggregator: load feeds: %w", err)
	}
	now := s.opt.Clock.Now()
	for _, f := range feeds {
		if f.Kind != storage.KindRemote || !s.owns(f.ID) {
			continue
		}
		if err := s.schedule(f, now, true); err != nil {
			s.log.Error("cannot schedule feed", "feed", f.ID, "url", sanitize.RedactURL(f.URL), "err", err)
			continue
		}
		if s.clustered() {
			s.own.scheduled()
		}
	}
	return nil
}

// schedule adds feed f to the scheduler; with replay, its policy first
// relearns the stored observations.
func (s *Service) schedule(f storage.Feed, now time.Time, replay bool) error {
	var obs []storage.Observation
	if replay {
		var err error
		if obs, err = s.opt.Store.Observations(f.ID, 0); err != nil {
			return err
		}
	}
	return s.scheduleFrom(f, obs, now, replay)
}

// scheduleFrom is schedule with the feed's stored observations (oldest
// first) already read.
func (s *Service) scheduleFrom(f storage.Feed, obs []storage.Observation, now time.Time, replay bool) error {
	r, err := newReplay(f)
	if err != nil {
		return err
	}
	for _, o := range obs {
		r.add(o)
	}
	return s.install(r, now, replay)
}

// starter gives the scheduler the first poll time of a (re)loaded feed.
type starter struct {
	*feedGuard
	first time.Time
}

// Start implements schedule.Starter.
func (s starter) Start(now time.Time) time.Time {
	s.feedGuard.mu.Lock()
	s.feedGuard.next = stampOf(s.first)
	if s.first.Before(now) {
		s.feedGuard.next = stampOf(now)
	}
	s.feedGuard.mu.Unlock()
	return s.first
}

// Subscribe validates and stores a new remote feed and schedules its first
// fetch now (on a cluster node that does not own the feed's shard, its
// owner picks it up at its next Resync). The policy defaults to schedule.DefaultPolicy. A URL whose
// host is a loopback, private or link-local address (in any numeric form)
// that the fetcher's allow-list does not cover is refused with an error
// wrapping ErrBlocked.
func (s *Service) Subscribe(f storage.Feed) (storage.Feed, error) {
	return s.subscribe(f, time.Time{})
}

func (s *Service) subscribe(f storage.Feed, first time.Time) (storage.Feed, error) {
	u, err := url.Parse(f.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return storage.Feed{}, fmt.Errorf("%w: %q", ErrBadURL, sanitize.RedactURL(f.URL))
	}
	// Two spellings of one address are one feed.
	u = canonicalURL(u)
	// The SSRF guard, now rather than at the first fetch, for a host
	// that is an address in any form (no DNS query is sent).
	if f.URL, err = s.opt.Fetcher.CheckURL(u.String()); err != nil {
		return storage.Feed{}, err
	}
	f.Kind = storage.KindRemote
	if f.Retention.MaxItems < 0 || f.Retention.MaxAge < 0 {
		return storage.Feed{}, fmt.Errorf("%w: retention must not be negative", ErrBadSettings)
	}
	if f.Extract != nil {
		if err := parser.ValidateRule(*f.Extract); err != nil {
			return storage.Feed{}, fmt.Errorf("%w: extract: %w", ErrBadSettings, err)
		}
	}
	if f.Policy == "" {
		f.Policy = schedule.DefaultPolicy
	}
	if err := schedule.CheckNewPolicy(f.Policy); err != nil {
		return storage.Feed{}, err
	}
	if err := s.prepareSource(&f, s.opt.Clock.Now()); err != nil {
		return storage.Feed{}, err
	}
	if err := s.opt.Store.CreateFeed(&f); err != nil {
		return storage.Feed{}, err
	}
	if !s.owns(f.ID) {
		return f, nil
	}
	r, err := newReplay(f)
	if err == nil {
		now := s.opt.Clock.Now()
		start := now
		if first.After(now) {
			start = first
		}
		err = s.installAt(r, now, start)
	}
	if errors.Is(err, schedule.ErrFeedExists) {
		return f, nil // the cluster's listing found it first and scheduled it
	}
	if err != nil {
		_ = s.opt.Store.DeleteFeed(f.ID)
		return storage.Feed{}, err
	}
	return f, nil
}

// SubscribeAt is Subscribe with the first fetch at first rather than now
// (now if first has passed): a bulk subscription spreads its feeds' first
// fetches (Pacer) instead of firing them all at once.
func (s *Service) SubscribeAt(f storage.Feed, first time.Time) (storage.Feed, error) {
	return s.subscribe(f, first)
}

// SubscribePaced is Subscribe with the first fetch in the next of the
// node's first-fetch slots, FirstFetchRate a second shared by every bulk
// request, import and load at once, so that many feeds subscribed
// together do not fire every first fetch at the same moment. A feed
// refused gives its slot back when it was the last handed out.
func (s *Service) SubscribePaced(f storage.Feed) (storage.Feed, error) {
	first := s.fresh.next(s.opt.Clock.Now())
	nf, err := s.subscribe(f, first)
	if err != nil {
		s.fresh.unused(first)
	}
	return nf, err
}

// firstFetches is the node's Pacer of first fetches, safe for concurrent
// use.
type firstFetches struct {
	mu sync.Mutex
	p  Pacer
}

func (ff *firstFetches) next(now time.Time) time.Time {
	ff.mu.Lock()
	defer ff.mu.Unlock()
	ff.p.Rate = FirstFetchRate
	return ff.p.Next(now)
}

func (ff *firstFetches) unused(t time.Time) {
	ff.mu.Lock()
	defer ff.mu.Unlock()
	ff.p.Unused(t)
}

// Pacer hands out first-fetch times for feeds subscribed in bulk, at
// most Rate a second from the time asked, so that an import of many
// feeds does not fire every first fetch at once. It is pure and not safe
// for concurrent use.
type Pacer struct {
	Rate float64 // first fetches a second; ≤ 0: no pacing
	next time.Time
}

// Next is the first fetch of the next feed subscribed at now: now, or the
// slot after the last one handed out when that is later.
func (p *Pacer) Next(now time.Time) time.Time {
	if p.Rate <= 0 {
		return now
	}
	t := now
	if p.next.After(t) {
		t = p.next
	}
	p.next = t.Add(time.Duration(float64(time.Second) / p.Rate))
	return t
}

// Unused gives back slot t, which Next handed out for a subscription that
// failed, when it is the last one handed out (so that refused feeds do not
// push later ones back); an earlier slot stays taken.
func (p *Pacer) Unused(t time.Time) {
	if p.Rate > 0 && p.next.Equal(t.Add(time.Duration(float64(time.Second)/p.Rate))) {
		p.next = t
	}
}

// Unsubscribe removes a feed, its items and its observations.
func (s *Service) Unsubscribe(id uint64) error {
	s.drop(id)
	if err := s.opt.Store.DeleteFeed(id); err != nil {
		return err
	}
	s.removed(id)
	return nil
}

// State returns the tracking state of a feed's policy (median, σ, mode),
// when its policy tracks one.
func (s *Service) State(id uint64) (schedule.State, bool) {
	g := s.guard(id)
	if g == nil {
		return schedule.State{}, false
	}
	return g.State()
}

// guard returns the guard of feed id, nil when the service does not
// schedule it.
func (s *Service) guard(id uint64) *feedGuard {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.guards[id]
}

// NextFetch returns when feed id is next fetched (false for feeds the
// service does not schedule).
func (s *Service) NextFetch(id uint64) (time.Time, bool) {
	g := s.guard(id)
	if g == nil {
		return time.Time{}, false
	}
	if due, ok := s.sched.Waiting(int(id)); ok {
		return due, true // the queue's time: an expedite or the cap moves it
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.next.time(), true
}

// Margins of PlannedFetch: the least time a planned fetch is given to
// fetch, parse and store, and the longest a plan lets it take.
const (
	minFetchMargin = time.Second
	maxFetchMargin = time.Minute
)

// PlannedFetch returns when what the next fetch of feed id finds is
// expected to be stored, as of now: the fetch's scheduled time (now, when
// it is due or under way) plus a margin of twice the last fetch's duration,
// at least a second and at most a minute. A pipe reading the feed plans its
// own next update from it (runner.Options.PlannedFetch). It is false when
// the feed's next items are not expected from a scheduled fetch: the
// service does not schedule it, or a hub pushes it (WebSub).
func (s *Service) PlannedFetch(id uint64, now time.Time) (time.Time, bool) {
	g := s.guard(id)
	if g == nil {
		return time.Time{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.next.isZero() || g.pushedUntil.time().After(now) {
		return time.Time{}, false
	}
	at := g.next.time()
	if at.Before(now) {
		at = now
	}
	return at.Add(min(max(2*g.took, minFetchMargin), maxFetchMargin)), true
}

// Expedite brings feed id's next fetch forward to at (never later), as
// far as politeness allows: not during an error backoff or Retry-After,
// not before the publisher's cache lifetime ends (unless the feed ignores
// it), not into a sleep window. It reports whether the fetch moved.
func (s *Service) Expedite(id uint64, at time.Time) bool {
	g := s.guard(id)
	if g == nil {
		return false
	}
	g.mu.Lock()
	blocked := !g.override.isZero()
	if nb := g.notBefore.time(); nb.After(at) {
		at = nb
	}
	g.mu.Unlock()
	if blocked {
		return false
	}
	if !s.sched.Expedite(int(id), at) {
		return false
	}
	s.signal()
	return true
}

// SetSleep applies feed id's new sleep plan (already stored) from now on:
// a fetch that falls inside it is skipped and moved to the wake-up.
//
// A fetch that windows removed or shortened since held back comes
// forward: to its plan before the windows, or the new windows' end.
func (s *Service) SetSleep(id uint64, p schedule.SleepPlan) {
	g := s.guard(id)
	if g == nil {
		return
	}
	g.mu.Lock()
	g.sleep, g.resleep = p, true
	planned := g.planned.time()
	g.mu.Unlock()
	due, waiting := s.sched.Waiting(int(id))
	if !waiting {
		return // done applies the stored windows after the poll
	}
	g.mu.Lock()
	g.resleep = false
	g.mu.Unlock()
	if planned.IsZero() {
		return
	}
	if !p.IsZero() {
		planned = p.Wake(planned)
	}
	if planned.Before(due) {
		s.Expedite(id, planned)
	}
}

// resleep applies feed id's stored sleep windows again after a poll
// during which SetSleep ran (feedGuard.resleep).
func (s *Service) resleep(id uint64) {
	g := s.guard(id)
	if g == nil {
		return
	}
	g.mu.Lock()
	again := g.resleep
	g.resleep = false
	g.mu.Unlock()
	if !again {
		return
	}
	if f, err := s.opt.Store.Feed(id); err == nil {
		s.SetSleep(id, f.Sleep)
	}
}

// FetchNow fetches one feed outside the schedule (tests, "refresh" in the
// UI) and returns what it saw. The feed's policy does not learn from it.
func (s *Service) FetchNow(ctx context.Context, id uint64) (storage.Observation, error) {
	f, err := s.opt.Store.Feed(id)
	if err != nil {
		return storage.Observation{}, err
	}
	if f.Kind != storage.KindRemote {
		return storage.Observation{}, ErrNotRemote
	}
	o, _, _ := s.poll(ctx, f, time.Time{})
	return o, nil
}

// pendingPoll is a scheduled poll whose document is fetched and parsed,
// with its write still to do.
type pendingPoll struct {
	p     polled
	g     *feedGuard
	began time.Time // when the poll began (for feedGuard.took)
}

// begin is the first half of a scheduled poll of feed id, the part that
// holds a fetch slot: it decides whether the feed is polled at all and,
// if so, fetches and parses it. It returns either the poll's observation
// (pd nil: skipped, nothing to store) or the pending write (pd), which
// complete finishes. ok is false when the fetch was abandoned because ctx
// ended: the feed keeps its turn.
func (s *Service) begin(ctx context.Context, id uint64) (obs schedule.Observation, pd *pendingPoll, ok bool) {
	g := s.guard(id)
	if g != nil && s.putOff(id, g) {
		// Its shard's lease lapsed: parked, nothing read (lapse.go).
		return schedule.Observation{At: s.opt.Clock.Now()}, nil, true
	}
	f, err := s.opt.Store.Feed(id)
	switch {
	case g == nil:
	case errors.Is(err, storage.ErrFeedNotFound):
		// Deleted on another node since the last resync: forget it.
		s.drop(id)
	case errors.Is(err, storage.ErrCorrupt) && g.isDeferred():
		// Queued from a digest, its record unreadable: dropped, not
		// left deferred (which would keep the change loading); the
		// next reconcile reads it alone and counts it failed.
		s.log.Error("cannot read the record of a feed queued from a schedule digest", "feed", id, "err", err)
		s.dropGuard(id, g)
	}
	if err != nil || g == nil {
		// Deleted meanwhile: an empty observation; Remove forgets it.
		return schedule.Observation{At: s.opt.Clock.Now()}, nil, true
	}
	if !s.owns(id) {
		// Another node's now: it polls the feed from here on.
		s.drop(id)
		return schedule.Observation{At: s.opt.Clock.Now()}, nil, true
	}
	now := s.opt.Clock.Now()
	g.mu.Lock()
	deferred := g.deferred
	g.mu.Unlock()
	if deferred && !s.restoreBeforeFetch(ctx, g, id, now) {
		// Queued from a schedule digest, its record not read: soon
		// (unless the background read gave it its policy meanwhile).
		g.mu.Lock()
		still := g.deferred
		if still {
			g.override = stampOf(now.Add(deferredRetry))
		}
		g.mu.Unlock()
		if still {
			return schedule.Observation{At: now}, nil, true
		}
		if s.guard(id) != g {
			// Dropped by its read: not a remote feed, or a policy this
			// version lacks (logged).
			return schedule.Observation{At: now}, nil, true
		}
	}
	g.mu.Lock()
	// Held: a record read after the feed was queued from a digest says
	// it is not due yet (digest.go); Next answers the override.
	held := !g.override.isZero() && g.override.time().After(now)
	asleep := !g.sleep.IsZero() && g.sleep.Asleep(now)
	prev := g.prevPoll.time()
	// A hub began pushing the feed after this fetch was planned: it waits
	// for the fallback interval since the last poll instead.
	fallback := g.pushFloor(now, prev)
	g.mu.Unlock()
	switch {
	case held:
		return schedule.Observation{At: now}, nil, true
	case asleep:
		// The 48 h cap, or windows set since the fetch was planned,
		// brought the feed inside a sleep: skip to its end.
		g.mu.Lock()
		g.override, g.slept, g.planned = stampOf(g.sleep.Wake(now)), true, stampOf(now)
		g.mu.Unlock()
		return schedule.Observation{At: now}, nil, true
	case !prev.IsZero() && fallback.After(now):
		g.mu.Lock()
		g.override = stampOf(fallback)
		g.mu.Unlock()
		return schedule.Observation{At: now}, nil, true
	}
	p, ok := s.fetchDoc(ctx, f, prev)
	if !ok {
		return schedule.Observation{}, nil, false
	}
	return schedule.Observation{}, &pendingPoll{p: p, g: g, began: now}, true
}

// complete is the second half of a scheduled poll: it stores what begin
// fetched (returning once the write is durable), updates the feed's
// guard and returns the observation for the scheduler.
func (s *Service) complete(pd *pendingPoll) schedule.Observation {
	o, backoff, f2 := s.storePoll(pd.p)
	took := s.opt.Clock.Now().Sub(pd.began)
	g := pd.g
	g.mu.Lock()
	if g.storeFails == 0 {
		// A poll whose write failed stored nothing: the next one
		// estimates publish times from the last poll that was stored.
		g.prevPoll = stampOf(o.At)
	}
	g.took = max(took, 0)
	if backoff > 0 {
		g.override = stampOf(o.At.Add(backoff))
	}
	if f2.ID == pd.p.f.ID {
		g.sleep = f2.Sleep
	}
	g.mu.Unlock()
	return o.Schedule()
}

// poll fetches, parses and stores one feed, records the observation and
// updates the feed. It returns the observation, after an error the
// backoff before the next try, and the feed as updated (zero when the
// update was not stored). A poll abandoned because ctx ended returns a
// zero observation.
func (s *Service) poll(ctx context.Context, f storage.Feed, prev time.Time) (storage.Observation, time.Duration, storage.Feed) {
	p, ok := s.fetchDoc(ctx, f, prev)
	if !ok {
		return storage.Observation{}, 0, storage.Feed{}
	}
	return s.storePoll(p)
}

// polled is what a poll's fetch brought, for its write: the response and
// parsed document, or the error that ended the fetch.
type polled struct {
	f      storage.Feed
	prev   time.Time // the previous poll
	start  time.Time // the fetch began
	resp   *fetcher.Response
	parsed *parser.Parsed // nil when nothing changed
	err    error          // the fetch or parse failed (at errAt)
	errAt  time.Time
}

// fetchDoc fetches and parses feed f (conditional GET, older pages when
// the document shows a gap). ok is false when ctx ended the fetch.
func (s *Service) fetchDoc(ctx context.Context, f storage.Feed, prev time.Time) (p polled, ok bool) {
	p = polled{f: f, prev: prev, start: s.opt.Clock.Now()}
	etag, lastModified := s.validators(f)
	resp, err := s.opt.Fetcher.Fetch(ctx, fetcher.Request{URL: f.URL, ETag: etag, LastModified: lastModified})
	if err != nil {
		if ctx.Err() != nil {
			return p, false
		}
		p.err, p.errAt = err, s.opt.Clock.Now()
		return p, true
	}
	if resp.ReceivedAt.IsZero() {
		resp.ReceivedAt = s.opt.Clock.Now()
	}
	p.resp = resp
	if resp.NotModified {
		return p, true
	}
	parsed, err := s.parseBody(f, resp.Body, resp.ContentType, parser.Options{
		MaxItems: s.opt.MaxItems, Extract: f.Extract, Now: resp.ReceivedAt, BaseURL: resp.FinalURL,
		Seen: s.guard(f.ID).seenFunc(f.Retention),
	})
	if err != nil {
		p.err, p.errAt = err, s.opt.Clock.Now()
		return p, true
	}
	s.follow(ctx, f, resp, parsed) // older pages, when the document shows a gap
	p.parsed = parsed
	return p, true
}

// storePoll stores what fetchDoc brought: the items, the observation and
// the feed's counters in one transaction, or the fetch's error. It
// returns once the write is on disk, with what poll returns.
func (s *Service) storePoll(p polled) (storage.Observation, time.Duration, storage.Feed) {
	if p.err != nil {
		if p.resp != nil {
			// The document came but did not parse: the next poll
			// parses it whole, whatever the last stored one held.
			s.guard(p.f.ID).setSeen(nil, p.f.Retention)
		}
		return s.failed(p.f, p.errAt, p.err)
	}
	obs, _, updated, err := s.record(p.f, p.resp, p.parsed, p.prev, p.start, false)
	g := s.guard(p.f.ID)
	switch {
	case errors.Is(err, storage.ErrInvalid), errors.Is(err, storage.ErrFeedNotFound):
		// What the feed brought cannot be stored (or the feed is gone):
		// trying again soon would fail the same way.
		return s.failed(p.f, s.opt.Clock.Now(), err)
	case err != nil:
		return s.storeFailed(p.f, g, s.opt.Clock.Now(), err)
	}
	if g != nil {
		g.mu.Lock()
		failing := g.storeFails > 0
		g.storeFails, g.storeFailedAt = 0, 0
		g.mu.Unlock()
		if n, ok := s.opt.Store.(unstoredNoter); ok && failing {
			n.NoteUnstored(p.f.ID, "", time.Time{}, time.Time{}) // stores clear it themselves too
		}
	}
	switch {
	case p.parsed == nil:
	case len(p.parsed.Repairs.BadDates) > 0:
		// Items whose dates needed repair are parsed again each fetch, so
		// the feed's warning keeps naming them while the document has them.
		g.setSeen(nil, p.f.Retention)
	default:
		g.setSeen(p.parsed.ItemHashes, p.f.Retention)
	}
	return obs, 0, updated
}

// estimatePublished estimates, in document order (newest first), the
// publish times of the items of feed id not stored yet (fresh, their
// indexes in items, as freshItems returns them), writing them into items
// that carry no date of their own (and readings with no time), and
// returns them as the poll's publish times (see PublishTimes). Items
// already stored are left alone: their estimates were stored with them.
func (s *Service) estimatePublished(resp *fetcher.Response, items []storage.Item, fresh []int, prev time.Time) []time.Time {
	if len(fresh) == 0 {
		return nil
	}
	if len(fresh) == len(items) { // all new (fresh lists them in order)
		return PublishTimes(resp, items, prev)
	}
	sub := make([]storage.Item, len(fresh))
	for j, i := range fresh {
		sub[j] = items[i]
	}
	published := PublishTimes(resp, sub, prev)
	for j, i := range fresh {
		items[i].Published, items[i].OwnDate, items[i].Undated = sub[j].Published, sub[j].OwnDate, sub[j].Undated // a reading's time is set through its pointer
	}
	return published
}

// maxRefusalLen bounds what a feed's warning says of the items the store
// refused.
const maxRefusalLen = storage.MaxWarningLen / 4

// refuseInvalid takes out of items those of its fresh ones (indexes in
// items, in order) the store would refuse (an item larger than
// storage.MaxItemSize), and returns the items left, their fresh indexes,
// and what the feed's warning says of the refused ones ("" when none
// was): the first one's id, link and why, and how many more there were.
// Only fresh items are checked: an item stored already was valid then.
func refuseInvalid(feedID uint64, items []storage.Item, fresh []int, at time.Time) ([]storage.Item, []int, string) {
	if len(fresh) == 0 {
		return items, fresh, ""
	}
	sub := make([]storage.Item, len(fresh))
	for j, i := range fresh {
		sub[j] = items[i]
	}
	err := storage.ValidateItems(feedID, sub, at)
	if err == nil {
		return items, fresh, ""
	}
	var refused []*storage.ItemError
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			var ie *storage.ItemError
			if errors.As(e, &ie) && ie.Index >= 0 && ie.Index < len(fresh) {
				refused = append(refused, ie)
			}
		}
	}
	if len(refused) == 0 {
		return items, fresh, ""
	}
	out := make(map[int]bool, len(refused))
	for _, ie := range refused {
		out[fresh[ie.Index]] = true
	}
	kept := make([]storage.Item, 0, len(items)-len(out))
	var keptFresh []int
	j := 0 // fresh[j] is the next fresh index
	for i := range items {
		isFresh := j < len(fresh) && fresh[j] == i
		if isFresh {
			j++
		}
		if out[i] {
			continue
		}
		if isFresh {
			keptFresh = append(keptFresh, len(kept))
		}
		kept = append(kept, items[i])
	}
	first := refused[0]
	why := strings.TrimPrefix(first.Err.Error(), storage.ErrInvalid.Error()+": ")
	msg := fmt.Sprintf("item %q", first.ID)
	if link := items[fresh[first.Index]].Link; link != "" {
		msg += " (" + link + ")"
	}
	msg += " not stored: " + why
	if more := len(refused) - 1; more > 0 {
		msg += fmt.Sprintf("; %d more items not stored", more)
	}
	return kept, keptFresh, sanitize.Truncate(msg, maxRefusalLen)
}

// record stores what one document brought, for a poll (push false) and for
// a WebSub push (Ingest): the new items (deduplicated, with publish-time
// estimates), the observation, the feed's counters, then OnNewItems. resp
// is the fetch's response (a push's headers for Ingest) with ReceivedAt
// set; parsed is nil when nothing changed. A push leaves the poll state
// alone (poll count, validators, errors). It returns the observation and
// the items added and the feed as updated; the error is a storage failure
// that stored nothing.
func (s *Service) record(f storage.Feed, resp *fetcher.Response, parsed *parser.Parsed, prev, start time.Time, push bool) (storage.Observation, []storage.Item, storage.Feed, error) {
	obs := storage.Observation{At: resp.ReceivedAt, Status: resp.Status, Hints: resp.Hints}
	if !f.IgnoreCache {
		obs.Hints.CacheFor = max(obs.Hints.CacheFor, resp.CacheFor)
	}
	obs.MoreData = resp.More
	// The stated update interval (sy:updatePeriod) is a period hint for
	// the policy: the document's, or as stored when nothing changed.
	obs.Hints.Period = f.UpdateHint
	var items []storage.Item
	var published []time.Time // the new items' publish times (PublishTimes)
	refusal := ""             // the feed's warning of items the store refuses
	if parsed != nil {
		if parsed.Truncated {
			obs.MoreData = true
		}
		// <ttl> counts in whole minutes: a lower bound only when HTTP
		// gave no cache lifetime of its own (Cache-Control, Expires) and
		// the publisher is not a slogfeed, whose headers say it exactly.
		if !f.IgnoreCache && resp.CacheFor == 0 && !resp.Hints.HasPhase && parsed.TTL > obs.Hints.CacheFor {
			obs.Hints.CacheFor = parsed.TTL
		}
		obs.Hints.Period = parsed.UpdateHint
		items = parsed.Items
		fresh := s.freshItems(f.ID, items)
		items, fresh, refusal = refuseInvalid(f.ID, items, fresh, obs.At)
		if refusal != "" && !push {
			// The refused items are parsed again at the next poll, so
			// that the warning keeps naming them while the document
			// has them.
			parsed.ItemHashes = nil
		}
		published = s.estimatePublished(resp, items, fresh, prev)
		timeOrder(items) // stored, and read by pipes, oldest first
		for i := range items {
			items[i].Fetched = obs.At
		}
	}
	// The items, the observation and the feed's counters commit in one
	// transaction (grouped with concurrent polls' by the store): a crash
	// keeps all of them or none. The closure escapes (the store may run
	// it on its writer), so it captures the two fields it reads rather
	// than the feed and observation whole.
	created, at := f.Created, obs.At
	rec, err := s.opt.Store.RecordFetch(f.ID, items, obs, func(x *storage.Feed, o *storage.Observation, added []storage.Item) error {
		o.Hit = len(added) > 0
		o.Published, o.LatencyS = nil, nil
		if o.Hit {
			o.Published = published
		}
		for _, it := range added {
			// Use latency counts from the subscription on: the backlog a
			// new subscription finds was published before anyone asked.
			if !it.Published.IsZero() && !it.Published.After(o.At) && !it.Published.Before(created) {
				o.LatencyS = append(o.LatencyS, o.At.Sub(it.Published).Seconds())
			}
		}
		if !push {
			x.Polls++
			x.LastFetch = o.At
			x.LastError, x.ErrorCount, x.RetryAfter = "", 0, time.Time{}
			x.ETag, x.LastModified = resp.ETag, resp.LastModified
		}
		if parsed != nil {
			if x.Title == "" {
				x.Title = parsed.Title
			}
			if x.Site == "" {
				x.Site = parsed.Site
			}
			x.UpdateHint = parsed.UpdateHint
			// As many of the items retention drops are remembered, so
			// that the document does not bring them back as new.
			if !push {
				x.Listed = min(max(len(parsed.ItemHashes), len(parsed.Items)), storage.MaxDroppedIDs)
			}
			x.Warning = parsed.Warning()
			if refusal != "" {
				x.Warning = strings.TrimPrefix(x.Warning+"\n"+refusal, "\n")
			}
			recordRepairs(x, parsed.Repairs, added, at)
			// The publisher's sleep plan, beside the user's own windows.
			x.Sleep.SkipHours, x.Sleep.SkipDays = parsed.Sleep.SkipHours, parsed.Sleep.SkipDays
		}
		if o.Hit {
			if !push {
				x.Hits++
			}
			x.LastHit = o.At
			x.Items += int64(len(added))
			for _, l := range o.LatencyS {
				x.LatencySumS += l
				x.LatencyCount++
			}
		}
		return nil
	})
	if err != nil {
		return obs, nil, storage.Feed{}, fmt.Errorf("store fetch: %w", err)
	}
	if rec.ItemErr != nil {
		s.log.Warn("some items were not stored", "feed", f.ID, "err", rec.ItemErr)
	}
	obs, added := rec.Observation, rec.Added
	f = rec.Feed
	if !push {
		s.opt.Metrics.observe(obs, resp.NotModified)
		if s.log.Enabled(context.Background(), slog.LevelDebug) {
			// Checked first: the arguments alone (boxed into a slice)
			// cost every poll a few allocations when nobody logs them.
			s.log.Debug("fetched", "feed", f.ID, "status", resp.Status, "new", len(added), "took", s.opt.Clock.Now().Sub(start))
		}
		s.fetched(f, obs.At, parsed, added)
	}
	if len(added) > 0 && s.opt.OnNewItems != nil {
		s.opt.OnNewItems(f, added)
	}
	return obs, added, f, nil
}

// failed records a fetch error that happened at now on the feed and
// returns the observation (a miss the policy does not learn from: the
// guard overrides it) and the backoff, and the feed as updated (zero when
// the update failed).
func (s *Service) failed(f storage.Feed, now time.Time, ferr error) (storage.Observation, time.Duration, storage.Feed) {
	n := f.ErrorCount + 1
	backoff := ErrorBackoffBase << min(n-1, 20)
	backoff = min(backoff, ErrorBackoffMax)
	var he *fetcher.HTTPError
	if errors.As(ferr, &he) && he.RetryAfter > backoff {
		backoff = he.RetryAfter
	}
	obs := storage.Observation{At: now, Err: ferr.Error()}
	if he != nil {
		obs.Status = he.Status
	}
	updated, err := s.opt.Store.RecordPoll(f.ID, obs, func(x *storage.Feed) error {
		x.Polls++
		x.LastFetch = now
		x.LastError = ferr.Error()
		x.LastErrorAt = now
		x.ErrorCount = n
		x.RetryAfter = now.Add(backoff)
		return nil
	})
	if err != nil {
		s.log.Warn("cannot record fetch error", "feed", f.ID, "err", err)
	}
	s.opt.Metrics.failed()
	s.failures.failed(s.log, now, "fetch failed", "feed", f.ID, "url", sanitize.RedactURL(f.URL), "err", ferr, "errors_in_a_row", n, "retry_in", backoff)
	return obs, backoff, updated
}

// storeFailed handles a poll of feed f (guard g, nil for a poll outside
// the schedule) whose fetch succeeded and whose write failed at now: the
// store, not the feed, failed (see StoreRetryBase). It returns an
// observation the policy does not learn from, the short backoff, and a
// zero feed (nothing was updated).
func (s *Service) storeFailed(f storage.Feed, g *feedGuard, now time.Time, err error) (storage.Observation, time.Duration, storage.Feed) {
	n, since := 1, now
	if g != nil {
		g.mu.Lock()
		g.storeFails++
		n = g.storeFails
		if n == 1 || g.storeFailedAt.isZero() {
			g.storeFailedAt = stampOf(now)
		}
		since = g.storeFailedAt.time()
		g.mu.Unlock()
	}
	backoff := min(StoreRetryBase<<min(n-1, 20), StoreRetryMax)
	if noter, ok := s.opt.Store.(unstoredNoter); ok {
		// The feed's record cannot take the error (the store refuses
		// writes): the store shows it in memory until a poll is stored.
		// It expires unless a later failure sets it again: the next
		// poll is due within StoreRetryMax.
		noter.NoteUnstored(f.ID, unstoredError(n, err), since, now.Add(StoreRetryMax+unstoredMargin))
	}
	s.opt.Metrics.failed()
	s.log.Warn("cannot store poll; polling again", "feed", f.ID, "err", err, "failures_in_a_row", n, "retry_in", backoff)
	return storage.Observation{At: now, Err: err.Error()}, backoff, storage.Feed{}
}

// unstoredNoter is a store that shows the feeds whose polls it cannot
// store as failing (storage.Store, the JetStream Backend).
type unstoredNoter interface {
	NoteUnstored(id uint64, msg string, since, until time.Time)
}

// unstoredMargin is how long a note of NoteUnstored outlives the next
// poll's retry (StoreRetryMax at most) before the store ignores it.
const unstoredMargin = time.Minute

// clearUnstored clears the note of feed id's unstored polls: this
// service no longer polls it.
func (s *Service) clearUnstored(id uint64) {
	if n, ok := s.opt.Store.(unstoredNoter); ok {
		n.NoteUnstored(id, "", time.Time{}, time.Time{})
	}
}

// unstoredError is a feed's error while n polls in a row could not be
// stored, the last with err.
func unstoredError(n int, err error) string {
	polls := "the last poll was"
	if n > 1 {
		polls = fmt.Sprintf("the last %d polls were", n)
	}
	return fmt.Sprintf("%s fetched but could not be stored (trying again soon): %v", polls, err)
}

// RecentPolls returns the newest n observations of a feed, newest first.
func (s *Service) RecentPolls(id uint64, n int) ([]storage.Observation, error) {
	obs, err := s.opt.Store.Observations(id, n)
	if err != nil {
		return nil, err
	}
	slices.Reverse(obs)
	return obs, nil
}
