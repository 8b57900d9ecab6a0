package sim

import (
	"slices"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
)

// StuckLimit is how many consecutive times a policy may ask to poll again
// at the same instant (a next time ≤ the poll's At) before Run forces the
// clock forward by StuckStep on every further such answer.
const (
	StuckLimit = 1000
	StuckStep  = time.Millisecond
)

// Option configures Run.
type Option func(*runConfig)

type runConfig struct {
	backlog   int
	phaseHint bool
	desync    time.Duration
	delay     time.Duration
	pollLog   bool
	dateRes   time.Duration
}

// WithPhaseHint makes the simulated publisher send slogfeed's phase hint on
// every response, hits and misses alike: Hints.HasPhase is set and
// Hints.Phase is the age, at the time the request reached the publisher, of
// the newest item it had ever made available (items published before start
// included). Nothing is sent before the publisher's first item. With a
// fetch delay, At−Phase is late by that delay, as it is live.
func WithPhaseHint() Option { return func(c *runConfig) { c.phaseHint = true } }

// WithDesync makes the publisher send the constant desynchronisation
// interval d (Hints.Desync) on every response.
func WithDesync(d time.Duration) Option { return func(c *runConfig) { c.desync = d } }

// WithFetchDelay makes every response arrive d after its request: the
// publisher answers with what it had at the request time, the policy is
// told At = request time + d, and latencies are measured to At. Negative
// values count as zero.
func WithFetchDelay(d time.Duration) Option {
	return func(c *runConfig) { c.delay = max(d, 0) }
}

// WithBacklog makes the first poll see, besides what is new, the n items
// published last before start, as a new subscription's first fetch sees the
// feed's recent items. They teach the policy but are not measured: no
// latency, not in Items, and a first poll that found only backlog is not
// counted.
func WithBacklog(n int) Option { return func(c *runConfig) { c.backlog = max(n, 0) } }

// WithDateResolution makes the publisher date its items to whole multiples
// of d, as RSS and HTTP dates are whole seconds: the publish times the
// policy is told are truncated to d (latencies are still measured from the
// true publish times). d ≤ 0 keeps them exact.
func WithDateResolution(d time.Duration) Option {
	return func(c *runConfig) { c.dateRes = max(d, 0) }
}

// WithPollLog records every poll's request time in Result.PollTimes.
func WithPollLog() Option { return func(c *runConfig) { c.pollLog = true } }

// Result is what one simulated run (or several merged) measured.
type Result struct {
	// Polls is the number of polls, Hits those that found new items.
	Polls, Hits int
	// Items is the number of fetched items; Unfetched the items published
	// in [start, end) that no poll fetched before end.
	Items, Unfetched int
	// Forced counts the polls whose time Run moved forward because the
	// policy kept asking for the same instant (see StuckLimit).
	Forced int
	// Latencies holds the use latency in seconds of each fetched item, in
	// fetch order.
	Latencies []float64
	// PollTimes holds the request time of every poll, only with
	// WithPollLog.
	PollTimes []time.Time
}

// Run simulates polling one publisher with policy p on a virtual clock
// from start to end (see the package documentation for the exact rules).
// items must be sorted by Published for the fastest path; an unsorted list
// is sorted in a copy. The only allocations are the result's slices and one
// reusable buffer for Observation.Published, which p must not retain.
func Run(p schedule.Policy, items []Item, start, end time.Time, opts ...Option) Result {
	var cfg runConfig
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if !slices.IsSortedFunc(items, cmpPublished) {
		items = slices.Clone(items)
		slices.SortStableFunc(items, cmpPublished)
	}
	var res Result
	if p == nil {
		return res
	}
	// Items before start were in the feed already; items from end on are
	// outside the run.
	lo, _ := slices.BinarySearchFunc(items, start, publishedCmp)
	hi, _ := slices.BinarySearchFunc(items, end, publishedCmp)
	if hi < lo {
		hi = lo
	}
	res.Latencies = make([]float64, 0, hi-lo)
	buf := make([]time.Time, 0, 16)

	now := schedule.First(p, start)
	next := max(lo-cfg.backlog, 0) // index of the first item not yet fetched
	avail := lo                    // index of the first item not yet published at now
	stuck := 0                     // consecutive answers that did not move the clock
	for now.Before(end) {
		if cfg.pollLog {
			res.PollTimes = append(res.PollTimes, now)
		}
		at := now.Add(cfg.delay)
		// New items: Published in (previous poll, now]; the first poll's
		// window starts at start (inclusive).
		buf = buf[:0]
		measured := 0
		for next < hi && !items[next].Published.After(now) {
			pt := items[next].Published
			if cfg.dateRes > 0 {
				buf = append(buf, pt.Truncate(cfg.dateRes))
			} else {
				buf = append(buf, pt)
			}
			if next >= lo {
				res.Latencies = append(res.Latencies, at.Sub(pt).Seconds())
				measured++
			}
			next++
		}
		obs := schedule.Observation{At: at, Hit: len(buf) > 0, Hints: schedule.Hints{Desync: cfg.desync}}
		if measured > 0 || len(buf) == 0 {
			res.Polls++
		}
		if obs.Hit {
			if measured > 0 {
				res.Hits++
				res.Items += measured
			}
			obs.Published = buf
		}
		if cfg.phaseHint {
			// The newest item the publisher ever made available, including
			// those before start and those past end's window.
			if avail < next {
				avail = next
			}
			for avail < len(items) && !items[avail].Published.After(now) {
				avail++
			}
			if avail > 0 {
				obs.Hints.HasPhase = true
				obs.Hints.Phase = now.Sub(items[avail-1].Published)
			}
		}
		t := p.Next(obs)
		if t.After(at) {
			stuck = 0
		} else {
			stuck++
			t = at
			if stuck > StuckLimit {
				t = at.Add(StuckStep)
				res.Forced++
			}
		}
		now = t
	}
	res.Unfetched = hi - next
	return res
}

func cmpPublished(a, b Item) int { return a.Published.Compare(b.Published) }

func publishedCmp(it Item, t time.Time) int { return it.Published.Compare(t) }
