package schedule

import (
	"math"
	"math/rand/v2"
	"sort"
	"time"
)

// This file holds the polling rules of three widely used feed readers,
// written from their published sources so that slogfeed's evaluation can
// compare DPT with what readers do today. Each learns only from the
// Observations it is given (publish times in Published, obs.At as "now"),
// keeps a fixed-size history (a sorted array of the newest publish times,
// at most 1 KiB per feed) and ignores HTTP cache hints, which callers apply
// with Respect exactly as they do for slogfeed's own policies.

// peerHorizon bounds how far in the past a recorded publish time may lie;
// older dates (hostile or broken feeds) are moved up to it. Every rule below
// saturates long before, so the answers do not change.
const peerHorizon = 100 * 365 * 24 * time.Hour

// peerLog keeps the newest publish times a feed reader has seen, as Unix
// milliseconds in ascending order. Its capacity is fixed when it is made:
// when full, a newer time evicts the oldest one and an older time is dropped.
type peerLog struct {
	ms []int64
}

func newPeerLog(capacity int) peerLog {
	return peerLog{ms: make([]int64, 0, capacity)}
}

// add inserts one publish time, keeping the newest cap(ms) times.
func (l *peerLog) add(ms int64) {
	n := len(l.ms)
	if n == cap(l.ms) {
		if n == 0 || ms < l.ms[0] {
			return
		}
		copy(l.ms, l.ms[1:])
		n--
		l.ms = l.ms[:n]
	}
	i := sort.Search(n, func(i int) bool { return l.ms[i] > ms })
	l.ms = l.ms[:n+1]
	copy(l.ms[i+1:], l.ms[i:n])
	l.ms[i] = ms
}

// record adds what a poll found. A reader sees the items of a hit; an item
// without a usable date gets the fetch time, as the readers do for undated
// entries, and dates in the future are brought back to the fetch time.
func (l *peerLog) record(obs Observation) {
	if !obs.Hit {
		return
	}
	if len(obs.Published) == 0 {
		l.add(obs.At.UnixMilli())
		return
	}
	oldest := obs.At.Add(-peerHorizon)
	for _, t := range obs.Published {
		switch {
		case t.After(obs.At):
			t = obs.At
		case t.Before(oldest):
			t = oldest
		}
		l.add(t.UnixMilli())
	}
}

// since returns the recorded times at or after from (Unix milliseconds).
func (l *peerLog) since(from int64) []int64 {
	i := sort.Search(len(l.ms), func(i int) bool { return l.ms[i] >= from })
	return l.ms[i:]
}

// newest returns the latest recorded time; ok is false when none is known.
func (l *peerLog) newest() (ms int64, ok bool) {
	if len(l.ms) == 0 {
		return 0, false
	}
	return l.ms[len(l.ms)-1], true
}

// peerAfter turns an interval into the next poll time.
func peerAfter(obs Observation, d time.Duration) time.Time {
	return clampNext(obs.At, obs.At.Add(d))
}

// Constants of Miniflux's entry-frequency scheduler (POLLING_SCHEDULER=
// entry_frequency with its defaults).
const (
	// MinifluxMinInterval is SCHEDULER_ENTRY_FREQUENCY_MIN_INTERVAL.
	MinifluxMinInterval = 5 * time.Minute
	// MinifluxMaxInterval is SCHEDULER_ENTRY_FREQUENCY_MAX_INTERVAL.
	MinifluxMaxInterval = 24 * time.Hour
	// minifluxWeek is the window of the weekly entry count.
	minifluxWeek = 7 * 24 * time.Hour
	// minifluxLogLen publish times are kept (960 bytes).
	minifluxLogLen = 120
)

// Miniflux reproduces Miniflux v2's entry-frequency scheduler
// (model.Feed.ScheduleNextCheck with the weekly count of
// storage.WeeklyFeedEntryCount, factor 1, default bounds):
//
//   - the entries published within the last 7 days (n of them, the newest
//     and the oldest of them) give a "virtual weekly count"
//     ceil(604800 s / ((newest − oldest) / (n − 1))), that is, the week
//     divided by their average spacing; fewer than two entries, or all of
//     them at the same instant, count as 0;
//   - the interval is 7 days ÷ weekly count, clamped to [5 min, 24 h]; a
//     weekly count of 0 gives the maximum, 24 h.
//
// As in Miniflux, the count is taken when a refresh starts, before the
// entries that refresh brings are stored, so each interval reflects the
// history up to the previous poll. The very first observation stands for
// the subscription itself, whose entries Miniflux stores before the first
// scheduled refresh: it is recorded before its interval is computed.
//
// Simplifications: Miniflux counts every entry of the week; this model keeps
// the newest 120 publish times, so for a feed publishing more than 120 items
// a week the average spacing is taken over the newest 120 (whose interval is
// then at most 85 min). The batch loop that picks due feeds only every
// POLLING_FREQUENCY (60 min by default) is not modelled: the returned time
// is the feed's next_check_at, which is when Miniflux polls if
// POLLING_FREQUENCY is set no longer than the interval. HTTP cache and
// Retry-After delays are left to Respect.
type Miniflux struct {
	log     peerLog
	started bool
}

// NewMiniflux returns Miniflux's entry-frequency policy for one feed.
func NewMiniflux() *Miniflux {
	return &Miniflux{log: newPeerLog(minifluxLogLen)}
}

// Name returns the eval name, "miniflux".
func (m *Miniflux) Name() string { return "miniflux" }

// Next implements Policy.
func (m *Miniflux) Next(obs Observation) time.Time {
	if !m.started {
		m.started = true
		m.log.record(obs)
		return peerAfter(obs, m.interval(obs.At))
	}
	d := m.interval(obs.At)
	m.log.record(obs)
	return peerAfter(obs, d)
}

// interval is ScheduleNextCheck's interval for a refresh starting at now.
func (m *Miniflux) interval(now time.Time) time.Duration {
	weekly := minifluxWeeklyCount(m.log.since(now.Add(-minifluxWeek).UnixMilli()))
	if weekly == 0 {
		return MinifluxMaxInterval
	}
	d := minifluxWeek / time.Duration(weekly)
	return min(max(d, MinifluxMinInterval), MinifluxMaxInterval)
}

// minifluxWeeklyCount is WeeklyFeedEntryCount over the entries of the week
// (ascending Unix milliseconds).
func minifluxWeeklyCount(week []int64) int64 {
	n := len(week)
	if n < 2 {
		return 0
	}
	span := week[n-1] - week[0]
	if span <= 0 {
		return 0
	}
	avg := float64(span) / 1000 / float64(n-1) // seconds between entries
	c := math.Ceil(minifluxWeek.Seconds() / avg)
	return int64(min(c, 1e15))
}

// Constants of CommaFeed's refresh interval calculator, with the defaults of
// commafeed.feed-refresh.* (interval 5m, max-interval 4h, interval-empirical
// true).
const (
	// CommaFeedInterval is feed-refresh.interval, the shortest wait.
	CommaFeedInterval = 5 * time.Minute
	// CommaFeedMaxInterval is feed-refresh.max-interval, the longest wait.
	CommaFeedMaxInterval = 4 * time.Hour
	// commaFeedDocLen publish times model the entries of the feed document.
	commaFeedDocLen = 20
)

// CommaFeed reproduces CommaFeed's "empirical" refresh interval
// (FeedRefreshIntervalCalculator with feed-refresh.interval-empirical=true
// and default settings). From the newest entry's publish date and the
// average spacing of the entries in the feed document:
//
//   - no entry known: max-interval (4 h);
//   - newest entry 30 or more whole days old: 4 h; 14 or more: 2 h
//     (max-interval/2); 7 or more: 1 h (max-interval/4);
//   - otherwise, with at least two entries: the average spacing ÷ 2, in
//     whole milliseconds, clamped to [interval, max-interval/4] = [5 min,
//     1 h];
//   - with a single entry the spacing is unknown and CommaFeed falls back to
//     max-interval, 4 h (not the 5-minute default interval).
//
// The result is then kept within [5 min, 4 h]. A poll that finds nothing
// new reuses the stored date and spacing, as CommaFeed does on "not
// modified"; only the time since the newest entry grows.
//
// Simplification: the feed document is modelled as the newest 20 entries
// seen (a typical RSS document length); CommaFeed averages over whatever the
// publisher's document holds. Retry-After/Cache-Control limits and error
// backoff are left out (see Respect).
type CommaFeed struct {
	log peerLog
}

// NewCommaFeed returns CommaFeed's empirical refresh policy for one feed.
func NewCommaFeed() *CommaFeed {
	return &CommaFeed{log: newPeerLog(commaFeedDocLen)}
}

// Name returns the eval name, "commafeed".
func (c *CommaFeed) Name() string { return "commafeed" }

// Next implements Policy.
func (c *CommaFeed) Next(obs Observation) time.Time {
	c.log.record(obs)
	return peerAfter(obs, c.interval(obs.At))
}

// interval is computeEmpiricalRefreshInterval followed by the bounds check.
func (c *CommaFeed) interval(now time.Time) time.Duration {
	d := CommaFeedMaxInterval
	if newest, ok := c.log.newest(); ok {
		const day = int64(24 * time.Hour / time.Millisecond)
		days := (now.UnixMilli() - newest) / day // truncated, like ChronoUnit.DAYS.between
		n := len(c.log.ms)
		switch {
		case days >= 30:
			d = CommaFeedMaxInterval
		case days >= 14:
			d = CommaFeedMaxInterval / 2
		case days >= 7:
			d = CommaFeedMaxInterval / 4
		case n >= 2:
			avg := (newest - c.log.ms[0]) / int64(n-1) // averageEntryInterval, ms
			half := time.Duration(avg/2) * time.Millisecond
			d = min(max(half, CommaFeedInterval), CommaFeedMaxInterval/4)
		}
	}
	return min(max(d, CommaFeedInterval), CommaFeedMaxInterval)
}

// Constants of NewsBlur's fetch scheduler.
const (
	// newsBlurMonth is the window of stories_last_month and the unit of
	// months_since_last_story.
	newsBlurMonth = 30 * 24 * time.Hour
	// newsBlurLogLen publish times are kept: every rule depends on the
	// month's story count only up to 30 (one story a day), so the newest 30
	// give exactly the same answers as the full history.
	newsBlurLogLen = 30
)

// NewsBlur reproduces NewsBlur's fetch scheduling
// (Feed.get_next_scheduled_update and set_next_scheduled_update in
// apps/rss_feeds/models.py). With spd = stories in the last 30 days ÷ 30 and
// subs = active premium subscribers + other active subscribers ÷ 10, the
// wait in minutes is:
//
//   - spd ≥ 1: 6 if subs ≥ 10, 15 if subs > 1, else 45;
//   - 0 < spd < 1: 60·(1 − spd) if subs > 1, else 360·(1 − spd);
//   - spd = 0: 360 if subs > 1, 720 if subs = 1, else 1440, multiplied by
//     max(1, months since the newest story) (months of 30 days);
//
// then capped at 4 h when subs ≥ 1, else at 48 h. NewsBlur adds a random
// delay of randint(0, wait)/4 minutes (randint(0, wait) when the wait is 5
// minutes or less); set a source with WithJitter to reproduce it, otherwise
// it is left out and the policy is deterministic.
//
// NewNewsBlur models a feed with a single, non-premium subscriber (subs =
// 0.1): 45 min at one story a day or more, 360·(1 − spd) min below that,
// 24 h for a silent feed growing to the 48 h cap after two silent months.
// NewNewsBlurSubscribers sets other audiences (6/15 min and the 4 h cap).
//
// Simplifications: stories_last_month is recounted at every poll over a
// sliding 30-day window; push (PubSubHubbub), notification, pro-subscriber,
// per-site and error-count adjustments are left out; the 48 h cap plus
// jitter is bounded by MaxDelay like every policy.
type NewsBlur struct {
	log  peerLog
	subs float64
	rng  *rand.Rand
}

// NewNewsBlur returns NewsBlur's policy for a feed with one active,
// non-premium subscriber.
func NewNewsBlur() *NewsBlur { return NewNewsBlurSubscribers(1, 0) }

// NewNewsBlurSubscribers returns NewsBlur's policy for a feed with the given
// numbers of active subscribers, activePremium of whom are premium. Negative
// counts are taken as 0 and active is raised to at least activePremium.
func NewNewsBlurSubscribers(active, activePremium int) *NewsBlur {
	activePremium = max(activePremium, 0)
	active = max(active, activePremium)
	subs := float64(activePremium) + float64(active-activePremium)/10
	return &NewsBlur{log: newPeerLog(newsBlurLogLen), subs: subs}
}

// WithJitter makes the policy add NewsBlur's random delay, drawn from r
// (nil turns it off again). It returns n.
func (n *NewsBlur) WithJitter(r *rand.Rand) *NewsBlur {
	n.rng = r
	return n
}

// Name returns the eval name, "newsblur".
func (n *NewsBlur) Name() string { return "newsblur" }

// Next implements Policy. NewsBlur reschedules after the fetch has stored
// its stories, so this poll's items count.
func (n *NewsBlur) Next(obs Observation) time.Time {
	n.log.record(obs)
	total := n.minutes(obs.At)
	if n.rng != nil {
		wait := int(total)
		if total <= 5 {
			total += float64(n.rng.IntN(wait + 1))
		} else {
			total += float64(n.rng.IntN(wait+1)) / 4
		}
	}
	d := time.Duration(math.Round(total*60e6)) * time.Microsecond
	return peerAfter(obs, d)
}

// minutes is get_next_scheduled_update: the wait before the next fetch, in
// minutes, without the random delay.
func (n *NewsBlur) minutes(now time.Time) float64 {
	month := n.log.since(now.Add(-newsBlurMonth).UnixMilli())
	spd := float64(len(month)) / 30
	var total float64
	switch {
	case spd >= 1:
		switch {
		case n.subs >= 10:
			total = 6
		case n.subs > 1:
			total = 15
		default:
			total = 45
		}
	case spd > 0:
		if n.subs > 1 {
			total = 60 - spd*60
		} else {
			total = 360 - spd*360
		}
	default:
		switch {
		case n.subs > 1:
			total = 360
		case n.subs == 1:
			total = 720
		default:
			total = 1440
		}
		var months float64
		if newest, ok := n.log.newest(); ok {
			secs := math.Floor(float64(now.UnixMilli()-newest) / 1000) // seconds_timesince
			months = secs / newsBlurMonth.Seconds()
		}
		total *= max(1, months)
	}
	if n.subs >= 1 {
		total = min(total, 4*60)
	} else {
		total = min(total, 48*60)
	}
	return total
}
