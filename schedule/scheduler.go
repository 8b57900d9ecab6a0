package schedule

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Limits on a Scheduler's configuration and feeds.
const (
	// MaxWeight is the largest feed weight.
	MaxWeight = 1e6
	// MaxWeightClasses bounds the number of distinct weights (see Add).
	MaxWeightClasses = 64
	// MaxHostLen bounds the length of a host key.
	MaxHostLen = 1024
	// MaxBurst bounds Config.Burst.
	MaxBurst = 1 << 20
	// MinRate and MaxRate bound a limited Config.Rate (fetches per second).
	MinRate = 1e-3
	MaxRate = 1e9
	// DefaultWorkers is the size of Run's worker pool when Config.Workers
	// is 0.
	DefaultWorkers = 8
)

// Errors returned by the Scheduler. They are wrapped with the offending
// value; test with errors.Is.
var (
	ErrConfig          = errors.New("schedule: invalid scheduler configuration")
	ErrNilPolicy       = errors.New("schedule: feed has no policy")
	ErrWeight          = errors.New("schedule: invalid feed weight")
	ErrWeightClasses   = errors.New("schedule: too many distinct feed weights")
	ErrHost            = errors.New("schedule: invalid host key")
	ErrFeedExists      = errors.New("schedule: feed already scheduled")
	ErrFeedBusy        = errors.New("schedule: removed feed is still being fetched")
	ErrUnknownFeed     = errors.New("schedule: feed not scheduled")
	ErrNotInFlight     = errors.New("schedule: feed was not granted")
	ErrObservationTime = errors.New("schedule: observation time out of range")
	ErrRunning         = errors.New("schedule: scheduler is already running")
)

// Order is how the Scheduler grants feeds that are due when the fetch budget
// cannot serve them all at once. Feeds that are not granted stay due and
// keep their place: nothing is skipped, only delayed.
type Order uint8

const (
	// OrderPriority grants by best-effort priority (Olston & Widom). A feed
	// is modelled as diverging from the copy slogfeed holds from the moment
	// its next item is expected to be published, t_pub (the policy's
	// prediction, see Predictor; otherwise the time the policy asked to
	// poll). Its divergence is the lag D(t) = max(0, t − t_pub), the age of
	// the oldest unseen item, i.e. the use latency that item accumulates.
	// The priority is
	//
	//	P = W · D(t_now) = W · (t_now − t_pub)
	//
	// the rate at which the feed adds weighted latency W·∫D dt while it
	// waits: granting the feed with the largest P removes the fastest
	// growing term of Σ W·latency, which the weighted mean latency
	// measures. Olston & Widom's general P = W·((t_now − t_last)·D(t_now) −
	// ∫D dt) is not used as such: with the staleness divergence (D = 0 or
	// 1) it reduces to W·(t_pub − t_last), which does not grow while a feed
	// waits, so a low-weight feed could wait forever; with the lag it is
	// W·a·(L − a/2) (a = t_now − t_pub, L = t_now − t_last), quadratic in
	// the wait and needing t_last, and feeds of one weight change order
	// as time passes. The linear form keeps feeds of one weight in t_pub
	// order for good, so the queue holds one heap per distinct weight and
	// compares their heads; every waiting feed gains priority at the rate
	// of its weight, so none starves. A feed that has not reached t_pub
	// has P ≤ 0. Ties go to the earlier t_pub, then the lower id.
	//
	// Olston & Widom refresh every source whose priority exceeds a
	// threshold that they raise and lower until the refresh rate matches
	// the bandwidth. Here the bandwidth is a token bucket: whenever k tokens
	// are available the k highest priorities are granted, which is exactly
	// the threshold the adaptive one converges to (the k-th highest
	// priority), reached at every grant instead of after a feedback lag.
	// Priorities are recomputed at every grant.
	OrderPriority Order = iota
	// OrderRoundRobin grants due feeds in cyclic order of their ids,
	// resuming after the last feed granted.
	OrderRoundRobin
	// OrderFIFO grants due feeds earliest due time first.
	OrderFIFO
)

// String returns the eval name of the order.
func (o Order) String() string {
	switch o {
	case OrderPriority:
		return "priority"
	case OrderRoundRobin:
		return "round-robin"
	case OrderFIFO:
		return "fifo"
	default:
		return fmt.Sprintf("order(%d)", uint8(o))
	}
}

// Predictor is implemented by policies that can tell when they expect the
// feed's next item to be published. The scheduler asks right after Next and
// uses the answer as t_pub for OrderPriority; ok false means no prediction,
// and the poll time the policy returned is used instead.
type Predictor interface {
	PredictedPublish() (t time.Time, ok bool)
}

// Config is a Scheduler's fetch budget and grant order. The zero Config is
// an unlimited budget in priority order on the real clock.
type Config struct {
	// Rate is the global fetch rate in fetches per second (a token bucket
	// refilled at Rate); 0 means unlimited. A limited rate must lie in
	// [MinRate, MaxRate].
	Rate float64
	// Burst is the bucket size: how many fetches may start at once after a
	// quiet spell (0 means 1). It is ignored when Rate is 0.
	Burst int
	// PerHost is the most fetches of one host key in flight at a time; 0
	// means unlimited. Feeds with an empty host key are not limited. A due
	// feed whose host is at its limit waits in the host's list (still due);
	// each fetch of that host that ends lets the best waiting feed of the
	// host compete again, found by a scan of that host's list only.
	PerHost int
	// Workers is the most fetches in flight in total and the size of Run's
	// worker pool; 0 means unlimited for the clock-free core and
	// DefaultWorkers for Run.
	Workers int
	// Order is the grant order under a binding budget.
	Order Order
	// Clock drives Run; nil means RealClock.
	Clock Clock
}

func (c *Config) validate() error {
	switch {
	case c.Rate != 0 && !(c.Rate >= MinRate && c.Rate <= MaxRate):
		return fmt.Errorf("%w: rate %v", ErrConfig, c.Rate)
	case c.Burst < 0 || c.Burst > MaxBurst:
		return fmt.Errorf("%w: burst %d", ErrConfig, c.Burst)
	case c.PerHost < 0 || c.PerHost > math.MaxInt32:
		return fmt.Errorf("%w: per-host limit %d", ErrConfig, c.PerHost)
	case c.Workers < 0 || c.Workers > 1<<20:
		return fmt.Errorf("%w: workers %d", ErrConfig, c.Workers)
	case c.Order > OrderFIFO:
		return fmt.Errorf("%w: order %d", ErrConfig, c.Order)
	}
	return nil
}

// Feed is how one feed is to be scheduled.
type Feed struct {
	// Policy decides when to poll; the Scheduler owns it from Add on.
	Policy Policy
	// Host groups feeds for Config.PerHost (e.g. the URL's host name);
	// empty means no per-host limit.
	Host string
	// Weight is the feed's importance under a binding budget; 0 means 1.
	// There may be at most MaxWeightClasses distinct weights.
	Weight float64
	// Sleep holds the times the feed must not be polled.
	Sleep SleepPlan
	// RespectHints makes the feed honour the publisher's cache lifetime
	// (Hints.CacheFor, see Respect).
	RespectHints bool
	// Fresh marks a feed never polled yet: under OrderPriority it waits
	// at its weight divided by FreshDivisor until its first Done, so that
	// a burst of new subscriptions the budget cannot serve at once does
	// not hold back the feeds already polled.
	Fresh bool
}

// FreshDivisor divides the priority weight of a Fresh feed until its
// first poll. Under a backlog of new feeds, a polled feed of the same
// weight then waits at most about 1/64 of the backlog's age: 19 s behind
// 20 minutes of first fetches rather than the 20 minutes.
const FreshDivisor = 64

// A feed's class byte: its weight class, with freshBit set while it is
// Fresh (it then waits ready in its class's fresh heap). A fresh feed
// takes no weight class of its own.
const (
	freshBit  = 0x80
	classMask = freshBit - 1
)

// Grant is a feed the Scheduler allows to be fetched now. The feed is in
// flight until Done (or Cancel) is called for it.
type Grant struct {
	ID  int
	Due time.Time // when the feed became due
}

// Feed states.
const (
	stAbsent   uint8 = iota
	stWaiting        // in the waiting heap, keyed by due time
	stReady          // due, in a ready heap
	stParked         // due, held back by its host's limit
	stInFlight       // granted
	stLearning       // fetched; Done is consulting the policy, unlocked
	stGone           // removed while in flight or learning
)

// feed is the scheduler's per-feed state: 40 bytes, plus 4 for its slot
// and 12 for its heap entry. Sleep plans are rare and live in a side map.
type feed struct {
	policy  Policy
	due     int64 // next poll, Unix ns
	ref     int64 // t_pub for OrderPriority, Unix ns
	host    int32 // index in hosts, -1 for none
	class   uint8 // weight class
	state   uint8
	respect bool
	sleeps  bool // has an entry in Scheduler.sleeps
}

type host struct {
	name     string
	refs     int32 // feeds with this host
	inflight int32
	parked   []int32
}

// bucket is a token bucket in its GCRA form, in integer nanoseconds: a
// fetch is allowed at n when tat − n ≤ tau, and each fetch moves tat on by
// one emission interval. In any window of length L at most
// Burst + L/interval fetches are allowed.
type bucket struct {
	limited  bool
	interval int64 // ns per token
	tau      int64 // (burst − 1) · interval
	tat      int64 // theoretical arrival time
	fresh    bool  // tat not yet set
}

func newBucket(rate float64, burst int) bucket {
	if rate == 0 {
		return bucket{}
	}
	if burst < 1 {
		burst = 1
	}
	iv := int64(math.Round(1e9 / rate))
	if iv < 1 {
		iv = 1
	}
	return bucket{limited: true, interval: iv, tau: int64(burst-1) * iv, fresh: true}
}

func (b *bucket) ok(n int64) bool {
	return !b.limited || b.fresh || b.tat <= n || b.tat-n <= b.tau
}

func (b *bucket) take(n int64) {
	if !b.limited {
		return
	}
	if b.fresh || b.tat < n {
		b.tat, b.fresh = n, false
	}
	b.tat += b.interval
}

// next is the earliest time a fetch is allowed.
func (b *bucket) next() int64 { return b.tat - b.tau }

// Scheduler decides which feeds to fetch when. Its core (Add, Remove, Due,
// NextWakeup, Done, Cancel) is clock-free: time is passed in, so the same
// code drives a discrete-event simulation and, through Run, the live loop.
// Feed ids are dense non-negative ints (at most MaxFeedID): they index flat
// arrays, which keeps a million feeds at a few dozen bytes each on top of
// their policies. All methods are safe for concurrent use.
type Scheduler struct {
	mu  sync.Mutex
	cfg Config

	feeds []feed
	pos   []int32 // slot of each feed in its heap, parked list or flying

	waiting heap4   // stWaiting, keyed by due
	fresh   []heap4 // stReady and Fresh, one per weight class (OrderPriority)
	ready   []heap4 // stReady, one per weight class (OrderPriority) or one
	weights []float64
	rrLap   int64 // OrderRoundRobin: current lap
	rrNext  int32 // OrderRoundRobin: first id of the rest of the lap
	nready  int

	sleeps   map[int32]*SleepPlan
	hosts    []host
	hostIdx  map[string]int32
	freeHost []int32

	bucket   bucket
	maxIn    int // in-flight cap, 0 = none
	inflight int
	feedsN   int
	last     int64 // latest time given to Due

	// flying holds the granted feeds not yet released (stInFlight, or
	// stGone when removed in flight), and nparked counts the parked
	// feeds, for Overdue.
	flying  []int32
	nparked int

	notify  chan struct{}
	running bool
}

// New returns a Scheduler with the given budget.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	s := &Scheduler{
		cfg:     cfg,
		hostIdx: make(map[string]int32),
		sleeps:  make(map[int32]*SleepPlan),
		bucket:  newBucket(cfg.Rate, cfg.Burst),
		maxIn:   cfg.Workers,
		notify:  make(chan struct{}, 1),
	}
	if cfg.Order != OrderPriority {
		s.ready = make([]heap4, 1)
		s.weights = []float64{1}
	}
	return s, nil
}

// Grow makes room for feed ids below n, so that adding them does not
// reallocate (use it before adding a million feeds).
func (s *Scheduler) Grow(n int) {
	if n <= 0 {
		return
	}
	n = min(n, MaxFeedID+1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if n > cap(s.feeds) {
		nf := make([]feed, len(s.feeds), n)
		copy(nf, s.feeds)
		s.feeds = nf
	}
	if n > cap(s.pos) {
		np := make([]int32, len(s.pos), n)
		copy(np, s.pos)
		s.pos = np
	}
	if n > cap(s.waiting.keys) {
		s.waiting.keys = append(make([]int64, 0, n), s.waiting.keys...)
		s.waiting.ids = append(make([]int32, 0, n), s.waiting.ids...)
	}
}

// Len returns the number of scheduled feeds (including feeds in flight).
func (s *Scheduler) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.feedsN
}

// InFlight returns the number of granted feeds not yet Done.
func (s *Scheduler) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight
}

// nanoLimit bounds the Unix seconds nanos accepts (years 1684–2255), well
// inside what int64 nanoseconds hold, so sums of a time and MaxDelay or a
// week cannot overflow.
const nanoLimit = 9e9

// nanos converts t to Unix nanoseconds, rejecting times int64 nanoseconds
// cannot hold.
func nanos(t time.Time) (int64, bool) {
	if sec := t.Unix(); sec < -nanoLimit || sec > nanoLimit {
		return 0, false
	}
	return t.UnixNano(), true
}

// Add schedules feed id, added at now: its first poll is at
// First(f.Policy, now), moved out of its sleeps.
func (s *Scheduler) Add(id int, f Feed, now time.Time) error {
	if id < 0 || id > MaxFeedID {
		return fmt.Errorf("%w: %d", ErrFeedID, id)
	}
	if f.Policy == nil {
		return fmt.Errorf("feed %d: %w", id, ErrNilPolicy)
	}
	w := f.Weight
	if w == 0 {
		w = 1
	}
	if !(w > 0 && w <= MaxWeight) {
		return fmt.Errorf("feed %d: %w: %v", id, ErrWeight, f.Weight)
	}
	if len(f.Host) > MaxHostLen {
		return fmt.Errorf("feed %d: %w: %d bytes", id, ErrHost, len(f.Host))
	}
	if err := f.Sleep.Validate(); err != nil {
		return fmt.Errorf("feed %d: %w", id, err)
	}
	first := First(f.Policy, now)
	ref, ok := nanos(first)
	if !ok {
		return fmt.Errorf("feed %d: %w: %v", id, ErrObservationTime, now)
	}
	var sleep *SleepPlan
	if !f.Sleep.IsZero() {
		sp := SleepPlan{
			SkipHours: f.Sleep.SkipHours, SkipDays: f.Sleep.SkipDays,
			Daily:   append([]DailyWindow(nil), f.Sleep.Daily...),
			Windows: append([]Window(nil), f.Sleep.Windows...),
		}
		sleep = &sp
		first = sleep.Wake(first)
	}
	due, ok := nanos(first)
	if !ok {
		return fmt.Errorf("feed %d: %w: %v", id, ErrObservationTime, first)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if id < len(s.feeds) {
		switch s.feeds[id].state {
		case stAbsent:
		case stGone:
			return fmt.Errorf("feed %d: %w", id, ErrFeedBusy)
		default:
			return fmt.Errorf("feed %d: %w", id, ErrFeedExists)
		}
	}
	class := 0
	if s.cfg.Order == OrderPriority {
		if class = s.classOf(w); class < 0 {
			return fmt.Errorf("feed %d: %w (%d)", id, ErrWeightClasses, MaxWeightClasses)
		}
		if f.Fresh {
			class |= freshBit
		}
	}
	s.growFeeds(id)
	s.feeds[id] = feed{
		policy: f.Policy, due: due, ref: ref,
		host: s.hostRef(f.Host), class: uint8(class), state: stWaiting,
		respect: f.RespectHints, sleeps: sleep != nil,
	}
	if sleep != nil {
		s.sleeps[int32(id)] = sleep
	}
	s.waiting.push(s.pos, int32(id), due)
	s.feedsN++
	s.signal()
	return nil
}

func (s *Scheduler) growFeeds(id int) {
	if id < len(s.feeds) {
		return
	}
	if id >= cap(s.feeds) {
		c := max(2*cap(s.feeds), id+1, 16)
		c = min(c, MaxFeedID+1)
		nf := make([]feed, len(s.feeds), c)
		copy(nf, s.feeds)
		s.feeds = nf
	}
	s.feeds = s.feeds[:id+1]
	s.pos = growPos(s.pos, id)
}

// classOf returns the weight class of w, creating it; -1 when there are
// too many classes.
func (s *Scheduler) classOf(w float64) int {
	for i, x := range s.weights {
		if x == w {
			return i
		}
	}
	if len(s.weights) >= MaxWeightClasses {
		return -1
	}
	s.weights = append(s.weights, w)
	s.ready = append(s.ready, heap4{})
	s.fresh = append(s.fresh, heap4{})
	return len(s.weights) - 1
}

func (s *Scheduler) hostRef(name string) int32 {
	if name == "" {
		return -1
	}
	if i, ok := s.hostIdx[name]; ok {
		s.hosts[i].refs++
		return i
	}
	var i int32
	if n := len(s.freeHost); n > 0 {
		i = s.freeHost[n-1]
		s.freeHost = s.freeHost[:n-1]
	} else {
		s.hosts = append(s.hosts, host{})
		i = int32(len(s.hosts) - 1)
	}
	s.hosts[i] = host{name: name, refs: 1}
	s.hostIdx[name] = i
	return i
}

func (s *Scheduler) hostUnref(i int32) {
	if i < 0 {
		return
	}
	h := &s.hosts[i]
	h.refs--
	if h.refs == 0 && h.inflight == 0 {
		delete(s.hostIdx, h.name)
		*h = host{}
		s.freeHost = append(s.freeHost, i)
	}
}

// Waiting returns feed id's due time while it waits in the queue: when
// it will be granted, expedites and caps included. It is false while the
// feed is in flight, held back by the budget or not scheduled.
func (s *Scheduler) Waiting(id int) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id < 0 || id >= len(s.feeds) || s.feeds[id].state != stWaiting {
		return time.Time{}, false
	}
	return time.Unix(0, s.feeds[id].due), true
}

// Placement returns what the scheduler holds of feed id besides its
// policy: its due time (the next poll while it waits; the poll under way
// while in flight), and the host and weight it was added with (weight 1
// for 0, and for every feed unless the order is OrderPriority, which
// alone weighs feeds). ok is false when the feed is not scheduled.
func (s *Scheduler) Placement(id int) (due time.Time, host string, weight float64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id < 0 || id >= len(s.feeds) {
		return time.Time{}, "", 0, false
	}
	f := &s.feeds[id]
	if f.state == stAbsent || f.state == stGone {
		return time.Time{}, "", 0, false
	}
	if f.host >= 0 {
		host = s.hosts[f.host].name
	}
	return time.Unix(0, f.due), host, s.weights[f.class&classMask], true
}

// Expedite moves feed id's next poll forward to at, when the feed is
// waiting for a later time; it never delays a poll, and a feed whose sleep
// plan covers at is left alone. It reports whether the poll moved. MDPT
// uses it: once some sources of a round have published, the others are
// polled at their expected arrival rather than on their own schedules.
func (s *Scheduler) Expedite(id int, at time.Time) bool {
	n, ok := nanos(at)
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id < 0 || id >= len(s.feeds) {
		return false
	}
	f := &s.feeds[id]
	if f.state != stWaiting || f.due <= n {
		return false
	}
	if f.sleeps {
		if sp := s.sleeps[int32(id)]; sp != nil && sp.Wake(at).After(at) {
			return false
		}
	}
	f.due = n
	s.waiting.update(s.pos, int(s.pos[id]), n)
	s.signal()
	return true
}

// Remove unschedules feed id and reports whether it was scheduled. A feed
// in flight is forgotten when its fetch ends (Done or Cancel), and its id
// can be added again only then.
func (s *Scheduler) Remove(id int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id < 0 || id >= len(s.feeds) {
		return false
	}
	f := &s.feeds[id]
	switch f.state {
	case stWaiting:
		s.waiting.removeAt(s.pos, int(s.pos[id]))
	case stReady:
		s.readyHeap(f.class).removeAt(s.pos, int(s.pos[id]))
		s.nready--
	case stParked:
		s.unparkAt(f.host, int(s.pos[id]))
	case stInFlight, stLearning:
		f.state = stGone
		f.policy = nil
		s.feedsN--
		s.signal()
		return true
	default:
		return false
	}
	s.forget(id)
	s.signal()
	return true
}

// forget clears a feed that is in no queue.
func (s *Scheduler) forget(id int) {
	f := &s.feeds[id]
	h, gone := f.host, f.state == stGone
	if f.sleeps {
		delete(s.sleeps, int32(id))
	}
	*f = feed{}
	s.pos[id] = -1
	if !gone { // a feed removed in flight was counted out by Remove
		s.feedsN--
	}
	s.hostUnref(h)
}

// unparkAt takes the feed at index i out of host h's parked list.
func (s *Scheduler) unparkAt(h int32, i int) int32 {
	p := s.hosts[h].parked
	id := p[i]
	last := len(p) - 1
	if i != last {
		p[i] = p[last]
		s.pos[p[i]] = int32(i)
	}
	s.hosts[h].parked = p[:last]
	s.pos[id] = -1
	s.nparked--
	return id
}

// pushReady makes a due feed ready.
func (s *Scheduler) pushReady(id int32) {
	f := &s.feeds[id]
	f.state = stReady
	s.nready++
	var key int64
	switch s.cfg.Order {
	case OrderPriority:
		key = f.ref
	case OrderFIFO:
		key = f.due
	case OrderRoundRobin:
		lap := s.rrLap
		if id < s.rrNext {
			lap++
		}
		key = lap<<32 | int64(id)
	}
	s.readyHeap(f.class).push(s.pos, id, key)
}

// readyHeap is the heap a ready feed of class byte class waits in.
func (s *Scheduler) readyHeap(class uint8) *heap4 {
	if class&freshBit != 0 {
		return &s.fresh[class&classMask]
	}
	return &s.ready[class]
}

// weightOf is the priority weight of a feed of class byte class.
func (s *Scheduler) weightOf(class uint8) float64 {
	if class&freshBit != 0 {
		return s.weights[class&classMask] / FreshDivisor
	}
	return s.weights[class]
}

// best returns the ready heap whose head is granted next at n.
func (s *Scheduler) best(n int64) *heap4 {
	if s.cfg.Order != OrderPriority {
		return &s.ready[0]
	}
	var b *heap4
	var bp float64
	consider := func(h *heap4, w float64) {
		if h.len() == 0 {
			return
		}
		p := w * float64(n-h.keys[0])
		if b == nil || p > bp || (p == bp && (h.keys[0] < b.keys[0] ||
			(h.keys[0] == b.keys[0] && h.ids[0] < b.ids[0]))) {
			b, bp = h, p
		}
	}
	for c := range s.ready {
		consider(&s.ready[c], s.weights[c])
		consider(&s.fresh[c], s.weights[c]/FreshDivisor)
	}
	return b
}

// Due grants the feeds to fetch at now, within the budget, in the
// configured order. It is AppendDue(nil, now).
func (s *Scheduler) Due(now time.Time) []Grant { return s.AppendDue(nil, now) }

// AppendDue appends to dst the feeds granted at now and returns it. Every
// feed due by now is considered; those the budget cannot serve yet stay due
// and are considered again at the next call. Granted feeds are in flight
// until Done or Cancel.
func (s *Scheduler) AppendDue(dst []Grant, now time.Time) []Grant {
	return s.AppendDueN(dst, now, 0)
}

// AppendDueN is AppendDue granting at most max feeds (max ≤ 0: no limit).
// Feeds due beyond max stay due, in their place, and are granted by the
// next calls: a caller that drains a large burst (a million feeds due at
// once) in batches of max needs no memory for the whole burst.
func (s *Scheduler) AppendDueN(dst []Grant, now time.Time, max int) []Grant {
	n, ok := nanos(now)
	if !ok {
		return dst
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n > s.last {
		s.last = n
	}
	room := func() bool { return true }
	if max > 0 {
		limit := len(dst) + max
		room = func() bool { return len(dst) < limit }
	}
	direct := !s.bucket.limited && s.cfg.PerHost == 0 && s.maxIn == 0 && s.nready == 0
	for s.waiting.len() > 0 && s.waiting.keys[0] <= n && room() {
		id := s.waiting.ids[0]
		s.waiting.removeAt(s.pos, 0)
		if direct {
			dst = s.grant(dst, id)
			continue
		}
		s.pushReady(id)
	}
	for s.nready > 0 && room() {
		if s.maxIn > 0 && s.inflight >= s.maxIn {
			break
		}
		if !s.bucket.ok(n) {
			break
		}
		h := s.best(n)
		id := h.ids[0]
		key := h.keys[0]
		h.removeAt(s.pos, 0)
		s.nready--
		f := &s.feeds[id]
		if f.host >= 0 && s.cfg.PerHost > 0 && int(s.hosts[f.host].inflight) >= s.cfg.PerHost {
			hs := &s.hosts[f.host]
			f.state = stParked
			s.pos[id] = int32(len(hs.parked))
			hs.parked = append(hs.parked, id)
			s.nparked++
			continue
		}
		if s.cfg.Order == OrderRoundRobin {
			s.rrLap, s.rrNext = key>>32, id+1
		}
		s.bucket.take(n)
		dst = s.grant(dst, id)
	}
	return dst
}

func (s *Scheduler) grant(dst []Grant, id int32) []Grant {
	f := &s.feeds[id]
	f.state = stInFlight
	s.pos[id] = int32(len(s.flying))
	s.flying = append(s.flying, id)
	s.inflight++
	if f.host >= 0 {
		s.hosts[f.host].inflight++
	}
	return append(dst, Grant{ID: int(id), Due: time.Unix(0, f.due)})
}

// NextWakeup returns the earliest time at which Due may grant something:
// the next due time, or, while due feeds wait for the budget, when the
// bucket next has a token. ok is false when only the end of a fetch (Done,
// Cancel) or a new feed can make progress.
func (s *Scheduler) NextWakeup() (t time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nready > 0 {
		if s.maxIn > 0 && s.inflight >= s.maxIn {
			return time.Time{}, false
		}
		n := s.last
		if s.bucket.limited && !s.bucket.fresh {
			n = max(n, s.bucket.next())
		}
		return time.Unix(0, n), true
	}
	if s.waiting.len() > 0 {
		return time.Unix(0, s.waiting.keys[0]), true
	}
	return time.Time{}, false
}

// release ends feed id's flight; it must be in flight or gone.
func (s *Scheduler) release(id int, at int64) {
	f := &s.feeds[id]
	s.unfly(id)
	s.inflight--
	if f.host < 0 {
		return
	}
	hs := &s.hosts[f.host]
	hs.inflight--
	free := s.cfg.PerHost - int(hs.inflight)
	// Let the best parked feeds of the host (one per free slot) compete
	// again. The scan is linear in the parked feeds of this host only.
	for ; free > 0 && len(hs.parked) > 0; free-- {
		bi := 0
		for i := 1; i < len(hs.parked); i++ {
			if s.beats(hs.parked[i], hs.parked[bi], at) {
				bi = i
			}
		}
		s.pushReady(s.unparkAt(f.host, bi))
		hs = &s.hosts[f.host]
	}
}

// beats reports whether parked feed a goes before parked feed b at n.
func (s *Scheduler) beats(a, b int32, n int64) bool {
	fa, fb := &s.feeds[a], &s.feeds[b]
	switch s.cfg.Order {
	case OrderPriority:
		pa := s.weightOf(fa.class) * float64(n-fa.ref)
		pb := s.weightOf(fb.class) * float64(n-fb.ref)
		if pa != pb {
			return pa > pb
		}
		if fa.ref != fb.ref {
			return fa.ref < fb.ref
		}
	case OrderFIFO:
		if fa.due != fb.due {
			return fa.due < fb.due
		}
	case OrderRoundRobin:
		ka, kb := a < s.rrNext, b < s.rrNext // next lap
		if ka != kb {
			return !ka
		}
	}
	return a < b
}

// Done records the result of fetching feed id, which must have been
// granted: the feed's policy learns obs and returns the next poll, which is
// clamped to [obs.At, obs.At+MaxDelay] (a time in the past means "now"),
// held back by the publisher's cache lifetime when the feed respects hints
// (never beyond obs.At+MaxDelay), and moved out of the feed's sleeps. It
// returns that time. For a feed removed while in flight it returns the zero
// time and a nil error: the feed is simply forgotten.
//
// The policy runs outside the scheduler's lock, so Done calls for
// different feeds (the live loop's workers, a parallel simulation) learn
// concurrently.
func (s *Scheduler) Done(id int, obs Observation) (time.Time, error) {
	at, ok := nanos(obs.At)
	if !ok {
		return time.Time{}, fmt.Errorf("feed %d: %w: %v", id, ErrObservationTime, obs.At)
	}
	s.mu.Lock()
	if id < 0 || id >= len(s.feeds) || s.feeds[id].state == stAbsent {
		s.mu.Unlock()
		return time.Time{}, fmt.Errorf("feed %d: %w", id, ErrUnknownFeed)
	}
	f := &s.feeds[id]
	switch f.state {
	case stGone:
		s.release(id, at)
		s.forget(id)
		s.signal()
		s.mu.Unlock()
		return time.Time{}, nil
	case stInFlight:
	default:
		s.mu.Unlock()
		return time.Time{}, fmt.Errorf("feed %d: %w", id, ErrNotInFlight)
	}
	f.state = stLearning
	policy, respect := f.policy, f.respect
	var sleep *SleepPlan
	if f.sleeps {
		sleep = s.sleeps[int32(id)]
	}
	s.release(id, at)
	s.mu.Unlock()

	next := clampNext(obs.At, policy.Next(obs))
	ref := next
	if p, ok := policy.(Predictor); ok {
		if t, ok := p.PredictedPublish(); ok {
			if _, ok := nanos(t); ok {
				ref = t
			}
		}
	}
	if respect {
		next = clampNext(obs.At, Respect(next, obs))
	}
	if sleep != nil {
		next = sleep.Wake(next)
	}
	due, ok := nanos(next)
	if !ok { // unreachable: next is within weeks of obs.At
		due = at
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	f = &s.feeds[id] // the array may have grown meanwhile
	if f.state == stGone {
		s.forget(id)
		s.signal()
		return time.Time{}, nil
	}
	f.ref = ref.UnixNano()
	f.due = due
	f.state = stWaiting
	f.class &^= freshBit // polled: its own weight from now on
	s.waiting.push(s.pos, int32(id), due)
	s.signal()
	return time.Unix(0, due), nil
}

// Cancel returns a granted feed whose fetch did not happen (the fetch was
// abandoned at shutdown): the policy learns nothing and the feed is due
// again at its old due time, keeping its turn.
func (s *Scheduler) Cancel(id int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id < 0 || id >= len(s.feeds) || s.feeds[id].state == stAbsent {
		return fmt.Errorf("feed %d: %w", id, ErrUnknownFeed)
	}
	f := &s.feeds[id]
	switch f.state {
	case stGone:
		s.release(id, s.last)
		s.forget(id)
	case stInFlight:
		s.release(id, s.last)
		f = &s.feeds[id]
		f.state = stWaiting
		s.waiting.push(s.pos, int32(id), f.due)
	default:
		return fmt.Errorf("feed %d: %w", id, ErrNotInFlight)
	}
	s.signal()
	return nil
}

func (s *Scheduler) signal() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// FetchFunc fetches feed id and reports what the poll saw. It must return
// when ctx is cancelled; a fetch abandoned that way returns the zero
// Observation, and the feed is put back untouched (see Cancel). An
// Observation with a zero At is stamped with the clock's time.
type FetchFunc func(ctx context.Context, id int) Observation

// Run is the live loop: it grants due feeds on cfg.Clock and fetches them
// with a pool of cfg.Workers goroutines (DefaultWorkers when 0), feeding
// each observation back through Done, until ctx is cancelled. It then stops
// granting, lets the workers finish or abandon (through ctx) their fetches,
// puts back the grants no worker started, and returns ctx's error once all
// workers have exited. A fetch that panics counts as a miss.
func (s *Scheduler) Run(ctx context.Context, fetch FetchFunc) error {
	if fetch == nil {
		return fmt.Errorf("%w: nil fetch function", ErrConfig)
	}
	workers := s.cfg.Workers
	if workers == 0 {
		workers = DefaultWorkers
	}
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return ErrRunning
	}
	s.running = true
	saved := s.maxIn
	s.maxIn = workers // never more grants than workers: sends below never block
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running, s.maxIn = false, saved
		s.mu.Unlock()
	}()

	clock := s.cfg.Clock
	work := make(chan Grant, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for g := range work {
				s.serve(ctx, clock, g, fetch)
			}
		})
	}
	timer := clock.NewTimer(time.Hour)
	timer.Stop()
	var grants []Grant
	for {
		if ctx.Err() != nil {
			break
		}
		grants = s.AppendDue(grants[:0], clock.Now())
		for _, g := range grants {
			work <- g
		}
		var wait <-chan time.Time
		if t, ok := s.NextWakeup(); ok {
			d := t.Sub(clock.Now())
			if d <= 0 && len(grants) > 0 {
				continue
			}
			// Nothing was granted although something is due: the budget
			// decides at the next instant, so do not spin.
			d = max(d, time.Millisecond)
			timer.Reset(d)
			wait = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-wait:
		case <-s.notify:
		}
		timer.Stop()
	}
	timer.Stop()
	close(work)
	wg.Wait()
	return ctx.Err()
}

// serve runs one fetch on a worker.
func (s *Scheduler) serve(ctx context.Context, clock Clock, g Grant, fetch FetchFunc) {
	if ctx.Err() != nil {
		_ = s.Cancel(g.ID)
		return
	}
	obs, panicked := safeFetch(ctx, g.ID, fetch)
	if panicked {
		obs = Observation{}
	} else if ctx.Err() != nil && obs.At.IsZero() && !obs.Hit && !obs.MoreData &&
		len(obs.Published) == 0 && obs.Hints == (Hints{}) {
		_ = s.Cancel(g.ID)
		return
	}
	if obs.At.IsZero() {
		obs.At = clock.Now()
	}
	if _, err := s.Done(g.ID, obs); err != nil {
		// The observation's time was unusable: learn a miss at the clock's
		// time so that the feed is not lost, or at least put it back.
		if _, err := s.Done(g.ID, Observation{At: clock.Now()}); err != nil {
			_ = s.Cancel(g.ID)
		}
	}
}

func safeFetch(ctx context.Context, id int, fetch FetchFunc) (obs Observation, panicked bool) {
	defer func() {
		if recover() != nil {
			panicked = true
		}
	}()
	return fetch(ctx, id), false
}
