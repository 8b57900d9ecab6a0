package aggregator

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/slogfeed/slogfeed/storage/cluster"
)

// Parked feeds (a lapsed lease). A node whose lease writes time out for
// a few seconds stops owning its shards TTL−Margin after its last
// renewal, although no other node claimed them: its Owner (a
// cluster.Lapser) reports those shards lapsed, with the tenure they had.
// Their feeds are parked rather than dropped: they keep their guards
// (policy state, overrides, sleep plans) and their places in the
// scheduler, but none is fetched. A fetch that comes due while its
// shard is lapsed is put off (begin, before it reads anything): it
// waits for the lapse to end and the policy learns nothing from it. No
// digest or snapshot of a lapsed shard is written (both write only the
// shards Owned names).
//
// A lapse ends at the ownership loop's next reconcile after Changed
// fires, or when maxLapse is over:
//
//   - owned again with the tenure noted when it lapsed: no claim of
//     this node since, so no other node held the shard (cluster.Lapser)
//     and the feeds' state is the latest. They resume:
//     the fetches put off come forward to now (as far as politeness
//     allows), the others keep their learned times; nothing is read.
//   - owned again with another tenure, another holder in the view (or
//     none: the lease given back, its renewal refused), or maxLapse
//     passed: the parked feeds are dropped, and loaded anew from the
//     store when the shard is owned.
//
// A feed queued from its shard's digest whose record is not read yet
// (deferred, digest.go) is not parked but dropped, as before: its record
// is to be read anyway, and the background read must not store what it
// reads for a shard this node does not own; it is loaded again when the
// shard is owned.
//
// A fetch that began while the shard was owned finishes as any poll
// whose lease runs out during its fetch: its write is the store's
// compare-and-set, and its observation reaches the parked policy (with
// the same tenure, the record holds that poll too).

// maxLapse bounds how long a lapsed shard's feeds stay parked. Safety
// does not rest on it (a shard resumes only under the tenure it lapsed
// with); it bounds how long a node keeps, and counts as its own, the
// feeds of a shard whose loss its view has not shown (a watch cut off
// with the node's writes). It is long enough for the renewal outages of
// an overloaded node (lease writes timing out for seconds at a time,
// several in a row) to end in a resume: dropping costs a reload, which
// on such a node takes about a minute and makes the next lapse likelier.
const maxLapse = 2 * time.Minute

// shardLapse is a lapsed shard whose feeds are parked.
type shardLapse struct {
	tenure uint64    // the shard's tenure when it lapsed
	since  time.Time // when the service saw it lapse
	feeds  int       // feeds parked, as the last reconcile counted them
	logged bool      // a reconcile logged it parked
	// putOff are the feeds whose fetch came due while the shard was
	// lapsed: brought forward if it resumes.
	putOff map[uint64]bool
}

// parkState holds the lapsed shards of a clustered service.
type parkState struct {
	mu     sync.Mutex
	shards map[int]*shardLapse
	// expedite are feeds put off whose shard resumed while their put-off
	// fetch was still being reported (not waiting in the queue yet):
	// the next reconcile brings them forward.
	expedite []uint64
}

// lapsing returns the Owner as a cluster.Lapser with its tenures and
// shard count; ok is false when feeds are not parked (a single node, an
// Owner that does not tell lapses).
func (s *Service) lapsing() (l cluster.Lapser, t tenured, shards int, ok bool) {
	if !s.clustered() {
		return nil, nil, 0, false
	}
	o, isSharded := s.opt.Owner.(shardedOwner)
	l, isLapser := s.opt.Owner.(cluster.Lapser)
	t, isTenured := s.opt.Owner.(tenured)
	if !isSharded || !isLapser || !isTenured || o.Shards() <= 0 {
		return nil, nil, 0, false
	}
	return l, t, o.Shards(), true
}

// lapseOf returns shard sh's lapse (a copy), ok false when it is not
// parked.
func (p *parkState) lapseOf(sh int) (l shardLapse, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sl := p.shards[sh]; sl != nil {
		return *sl, true
	}
	return shardLapse{}, false
}

// park notes shard sh lapsed at now under tenure, unless it is already,
// and returns its lapse (a copy).
func (p *parkState) park(sh int, tenure uint64, now time.Time) shardLapse {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shards == nil {
		p.shards = map[int]*shardLapse{}
	}
	sl := p.shards[sh]
	if sl == nil {
		sl = &shardLapse{tenure: tenure, since: now, putOff: map[uint64]bool{}}
		p.shards[sh] = sl
	}
	return *sl
}

// putOffFeed notes feed id of lapsed shard sh put off, in the lapse l
// (lapseOf, park); false when that lapse is over (a reconcile resumed
// the shard or ended the lapse since l was read).
func (p *parkState) putOffFeed(sh int, id uint64, l shardLapse) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	sl := p.shards[sh]
	if sl == nil || sl.tenure != l.tenure || !sl.since.Equal(l.since) {
		return false
	}
	sl.putOff[id] = true
	return true
}

// parked counts the parked feeds, as the last reconcile counted them.
func (p *parkState) parked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, sl := range p.shards {
		n += sl.feeds
	}
	return n
}

// deadline is when the oldest lapse reaches maxLapse; zero without one.
func (p *parkState) deadline() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	var at time.Time
	for _, sl := range p.shards {
		if end := sl.since.Add(maxLapse); at.IsZero() || end.Before(at) {
			at = end
		}
	}
	return at
}

// putOff is the first step of a scheduled poll of feed id (guard g):
// it reports whether the fetch is not to run because of a lapse. A feed
// of a lapsed shard has its fetch put off until the lapse's end (the
// policy learns nothing: the guard's override answers, and the fetch
// planned is kept as a skipped sleep keeps it), and the shard is parked
// if no reconcile saw it lapse yet. A feed of a shard owned again under
// another tenure than the one it lapsed with is dropped: another node
// polled it meanwhile, and the next reconcile loads it anew. Otherwise,
// and when a reconcile resumed the shard or ended its lapse while putOff
// was deciding, begin goes on (and drops a feed that is not owned, as
// before).
func (s *Service) putOff(id uint64, g *feedGuard) bool {
	lp, ten, shards, ok := s.lapsing()
	if !ok {
		return false
	}
	sh := cluster.ShardOf(cluster.KindFeed, id, shards)
	l, parked := s.own.park.lapseOf(sh)
	if s.owns(id) {
		if !parked || ten.Tenure(sh) == l.tenure {
			return false // the reconcile resumes a parked shard
		}
		if s.dropGuard(id, g) {
			s.own.dropped(1)
		}
		return true
	}
	tenure, lapsed := lp.Lapsed(sh)
	now := s.opt.Clock.Now()
	switch {
	case !lapsed:
		return false
	case !parked:
		l = s.own.park.park(sh, tenure, now)
	}
	if tenure != l.tenure || !now.Before(l.since.Add(maxLapse)) {
		return false
	}
	until := stampOf(l.since.Add(maxLapse))
	g.mu.Lock()
	// A feed held until later (its record read after a digest queued
	// it) keeps its override: it is not due.
	due := !g.override.time().After(now)
	prevOverride, prevSlept := g.override, g.slept
	if due {
		// slept: Next answers the override and keeps the fetch it
		// planned (planned), as for a fetch a sleep window skipped.
		g.override, g.slept = until, true
	}
	g.mu.Unlock()
	if due && !s.own.park.putOffFeed(sh, id, l) {
		// A reconcile resumed the shard (or ended its lapse) since
		// the lapse was read, and will not bring this fetch forward:
		// it is not put off, and begin goes on (owned, or dropped).
		g.mu.Lock()
		if g.override == until {
			g.override, g.slept = prevOverride, prevSlept
		}
		g.mu.Unlock()
		return false
	}
	return true
}

// parkable reports whether feed id, of a lapsed shard, is parked: it is
// scheduled here with its policy (not deferred: see above).
func (s *Service) parkable(id uint64) bool {
	g := s.guard(id)
	return g != nil && !g.isDeferred()
}

// lapseVerdict is what a reconcile makes of a shard.
type lapseVerdict uint8

const (
	notLapsed   lapseVerdict = iota
	stillParked              // lapsed: its feeds stay parked
	resumed                  // owned again under its tenure: its feeds resume
	lapseEnded               // not renewed: its parked feeds are dropped
)

// lapseReview is a reconcile's view of the lapsed shards.
type lapseReview struct {
	verdict []lapseVerdict // by shard; nil when feeds are not parked
	ended   map[int]string // shards whose lapse ended, and why
}

// of returns the shard of feed id and the verdict on it (shard -1 when
// feeds are not parked).
func (r lapseReview) of(id uint64) (shard int, v lapseVerdict) {
	if r.verdict == nil {
		return -1, notLapsed
	}
	shard = cluster.ShardOf(cluster.KindFeed, id, len(r.verdict))
	return shard, r.verdict[shard]
}

// reviewLapses decides, at a reconcile whose Owner's view is holds
// (cluster.Lapser.Holds, by shard), which shards are parked, which
// resume and which lapses ended; it parks the shards that lapsed since.
func (s *Service) reviewLapses(holds []cluster.Hold) lapseReview {
	_, _, shards, ok := s.lapsing()
	if !ok {
		return lapseReview{}
	}
	now := s.opt.Clock.Now()
	r := lapseReview{verdict: make([]lapseVerdict, shards), ended: map[int]string{}}
	p := &s.own.park
	p.mu.Lock()
	defer p.mu.Unlock()
	for sh := range shards {
		var h cluster.Hold
		if sh < len(holds) {
			h = holds[sh]
		}
		sl := p.shards[sh]
		if h.Owned {
			switch {
			case sl == nil:
			case h.Tenure == sl.tenure:
				r.verdict[sh] = resumed
			default:
				r.verdict[sh], r.ended[sh] = lapseEnded, "owned again under another tenure"
			}
			continue
		}
		switch {
		case sl == nil && h.Lapsed:
			if p.shards == nil {
				p.shards = map[int]*shardLapse{}
			}
			p.shards[sh] = &shardLapse{tenure: h.Tenure, since: now, putOff: map[uint64]bool{}}
			r.verdict[sh] = stillParked
		case sl == nil:
		case !h.Lapsed:
			r.verdict[sh], r.ended[sh] = lapseEnded, "another holder"
		case h.Tenure != sl.tenure:
			r.verdict[sh], r.ended[sh] = lapseEnded, "owned again under another tenure"
		case !now.Before(sl.since.Add(maxLapse)):
			r.verdict[sh], r.ended[sh] = lapseEnded, "lapsed for too long"
		default:
			r.verdict[sh] = stillParked
		}
	}
	return r
}

// settleLapses carries out a reconcile's review once its feeds are
// counted (parked and resumed feeds by shard; dropped, the feeds of
// ended lapses dropped): it forgets the lapses that ended or resumed,
// brings the resumed shards' put-off fetches forward, and logs what
// changed. It reports whether put-off fetches are left to bring forward
// (the caller tries again soon).
func (s *Service) settleLapses(r lapseReview, parked, resumedFeeds map[int]int, dropped int) (busy bool) {
	if r.verdict == nil {
		return false
	}
	now := s.opt.Clock.Now()
	p := &s.own.park
	var newly, back, ended []int
	newlyFeeds, resumedN := 0, 0
	var longest time.Duration
	var putOff []uint64
	reasons := map[string]bool{}
	p.mu.Lock()
	for sh, sl := range p.shards {
		switch r.verdict[sh] {
		case stillParked:
			sl.feeds = parked[sh]
			if !sl.logged {
				sl.logged = true
				newly = append(newly, sh)
				newlyFeeds += sl.feeds
			}
		case resumed:
			back = append(back, sh)
			resumedN += resumedFeeds[sh]
			longest = max(longest, now.Sub(sl.since))
			putOff = append(putOff, slices.Collect(maps.Keys(sl.putOff))...)
			delete(p.shards, sh)
		case lapseEnded:
			ended = append(ended, sh)
			reasons[r.ended[sh]] = true
			delete(p.shards, sh)
		}
	}
	putOff = append(putOff, p.expedite...)
	p.expedite = nil
	p.mu.Unlock()

	var again []uint64
	for _, id := range putOff {
		if s.guard(id) == nil {
			continue // dropped since
		}
		if _, waiting := s.sched.Waiting(int(id)); !waiting {
			again = append(again, id) // its put-off fetch is being reported
			continue
		}
		s.Expedite(id, now)
	}
	if len(again) > 0 {
		p.mu.Lock()
		p.expedite = append(p.expedite, again...)
		p.mu.Unlock()
	}
	for _, sh := range ended {
		s.own.forgetLoaded(sh)
	}
	if len(newly) > 0 {
		slices.Sort(newly)
		s.log.Info("this node's leases lapsed (renewals too old, no other holder seen): the feeds of those shards are parked, not polled, until a renewal succeeds",
			"shards", newly, "feeds", newlyFeeds, "parked_for_at_most", maxLapse)
	}
	if len(back) > 0 {
		slices.Sort(back)
		s.log.Info("lapsed leases renewed: the parked feeds resume without a reload",
			"shards", back, "feeds", resumedN, "put_off", len(putOff)-len(again), "lapsed_s", longest.Seconds())
	}
	if len(ended) > 0 {
		slices.Sort(ended)
		s.log.Info("lapsed leases not renewed: the parked feeds are dropped",
			"shards", ended, "feeds", dropped, "why", slices.Sorted(maps.Keys(reasons)))
	}
	return len(again) > 0
}
