package publish

import (
	"math"
	"sync"
	"time"
)

// LoadWindow is the sliding window over which Load measures request rates.
const LoadWindow = time.Minute

// loadBuckets is the number of one-second buckets in LoadWindow.
const loadBuckets = int64(LoadWindow / time.Second)

// Load measures the request rate of each feed over a sliding window and
// turns it into the desynchronisation interval the feed advertises:
//
//	Desync = min(max, base + perRPS × n / W)
//
// where n is the number of requests for the key (this one included) in the
// last W = LoadWindow, counted in one-second buckets. The more subscribers
// poll a feed, the wider they are asked to spread their polls after the
// predicted publish, so that a publish is not followed by a burst of all
// of them at once: with perRPS = 1 s, a feed polled 10 times a second asks
// for 10 s more spread. Time is passed in, never read. Load is safe for
// concurrent use. Memory is one small ring per key seen in the last window
// (idle keys are dropped), so keys should be names of existing feeds, not
// raw request input.
type Load struct {
	base, perRPS, max time.Duration

	mu    sync.Mutex
	keys  map[string]*loadRing
	sweep int64 // Unix second of the last sweep of idle keys
}

type loadRing struct {
	counts [loadBuckets]uint32
	sec    int64  // Unix second of the newest bucket
	total  uint64 // sum of counts
}

// NewLoad returns a Load with the given base interval, growth per request
// per second and upper bound. Negative values count as zero; max is raised
// to base when smaller.
func NewLoad(base, perRPS, max time.Duration) *Load {
	base, perRPS, max = pos(base), pos(perRPS), pos(max)
	if max < base {
		max = base
	}
	return &Load{base: base, perRPS: perRPS, max: max, keys: make(map[string]*loadRing)}
}

func pos(d time.Duration) time.Duration { return time.Duration(math.Max(0, float64(d))) }

// Hit records a request for key at now and returns the key's current
// desynchronisation interval. A clock that steps back counts the request
// in the newest bucket.
func (l *Load) Hit(key string, now time.Time) time.Duration {
	s := now.Unix()
	l.mu.Lock()
	defer l.mu.Unlock()
	if s-l.sweep >= loadBuckets {
		l.sweep = s
		for k, r := range l.keys {
			if s-r.sec >= loadBuckets {
				delete(l.keys, k)
			}
		}
	}
	r := l.keys[key]
	if r == nil {
		r = &loadRing{sec: s}
		l.keys[key] = r
	}
	r.advance(s)
	if s < r.sec {
		s = r.sec
	}
	if c := &r.counts[bucket(s)]; *c < math.MaxUint32 {
		*c++
		r.total++
	}
	rps := float64(r.total) / LoadWindow.Seconds()
	d := float64(l.base) + float64(l.perRPS)*rps
	if d >= float64(l.max) {
		return l.max
	}
	return time.Duration(d)
}

// advance moves the ring's newest bucket to second s, emptying the buckets
// that fell out of the window.
func (r *loadRing) advance(s int64) {
	if s <= r.sec {
		return
	}
	n := min(s-r.sec, loadBuckets)
	for i := int64(1); i <= n; i++ {
		c := &r.counts[bucket(r.sec+i)]
		r.total -= uint64(*c)
		*c = 0
	}
	r.sec = s
}

// Keys returns the number of keys Load currently tracks.
func (l *Load) Keys() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}

// bucket is the ring index of Unix second s (times before 1970 included).
func bucket(s int64) int64 { return (s%loadBuckets + loadBuckets) % loadBuckets }
