package schedule

import (
	"sync"
	"time"
)

// Clock is the scheduler's source of time. The live loop uses RealClock;
// tests and simulations use a VirtualClock whose time only moves when told,
// so that the very same loop runs in either.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a Timer that sends the time on its channel once d
	// has elapsed (at once when d ≤ 0).
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer created by a Clock. Its semantics follow
// time.Timer since Go 1.23: after Stop or Reset returns, no stale value is
// received from C.
type Timer interface {
	// C returns the channel on which the firing time is delivered.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether the call
	// stopped the timer (false when it had already fired or been stopped).
	Stop() bool
	// Reset re-arms the timer to fire after d. It reports whether the timer
	// had been active.
	Reset(d time.Duration) bool
}

// RealClock is the wall clock. It is the only place in package schedule
// that reads the system time.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// VirtualClock is a manually driven Clock. Its time only moves on Advance or
// Set, which fire the timers that have come due in order of their deadlines
// (timers with the same deadline in the order they were armed). It is safe
// for concurrent use.
type VirtualClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers []*virtualTimer // armed timers, unordered (few at a time)
}

// NewVirtualClock returns a VirtualClock that reads start.
func NewVirtualClock(start time.Time) *VirtualClock {
	return &VirtualClock{now: start}
}

// Now returns the clock's current time.
func (c *VirtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires when the clock reaches Now()+d.
func (c *VirtualClock) NewTimer(d time.Duration) Timer {
	t := &virtualTimer{c: c, ch: make(chan time.Time, 1)}
	c.mu.Lock()
	c.armLocked(t, d)
	c.mu.Unlock()
	return t
}

// Pending returns the number of armed timers. Tests use it to wait until a
// loop has gone to sleep.
func (c *VirtualClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Advance moves the clock forward by d (d < 0 is treated as 0) and fires
// every timer whose deadline has been reached.
func (c *VirtualClock) Advance(d time.Duration) {
	if d < 0 {
		d = 0
	}
	c.mu.Lock()
	to := c.now.Add(d)
	c.mu.Unlock()
	c.Set(to)
}

// Set moves the clock to t and fires every timer whose deadline is not after
// t, in deadline order; each timer's channel receives its own deadline.
// Goroutines woken by those timers read t from Now, so a simulation that
// needs each timer handled at its own instant advances in steps no longer
// than the gaps between deadlines. Setting a time before the current one
// does not move the clock back.
func (c *VirtualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		i := c.earliestLocked()
		if i < 0 || c.timers[i].when.After(t) {
			break
		}
		vt := c.timers[i]
		c.removeLocked(i)
		if vt.when.After(c.now) {
			c.now = vt.when
		}
		select { // buffered, and drained on Stop/Reset: never blocks
		case vt.ch <- vt.when:
		default:
		}
	}
	if t.After(c.now) {
		c.now = t
	}
}

// earliestLocked returns the index of the timer that fires first, or -1.
func (c *VirtualClock) earliestLocked() int {
	best := -1
	for i, t := range c.timers {
		if best < 0 || t.when.Before(c.timers[best].when) ||
			(t.when.Equal(c.timers[best].when) && t.seq < c.timers[best].seq) {
			best = i
		}
	}
	return best
}

func (c *VirtualClock) removeLocked(i int) {
	c.timers[i].armed = false
	last := len(c.timers) - 1
	c.timers[i] = c.timers[last]
	c.timers[last] = nil
	c.timers = c.timers[:last]
}

// armLocked arms t to fire after d; a non-positive d fires at once.
func (c *VirtualClock) armLocked(t *virtualTimer, d time.Duration) {
	if d <= 0 {
		select {
		case t.ch <- c.now:
		default:
		}
		return
	}
	c.seq++
	t.when, t.seq, t.armed = c.now.Add(d), c.seq, true
	c.timers = append(c.timers, t)
}

type virtualTimer struct {
	c     *VirtualClock
	ch    chan time.Time
	when  time.Time
	seq   uint64
	armed bool
}

func (t *virtualTimer) C() <-chan time.Time { return t.ch }

func (t *virtualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.stopLocked()
}

func (t *virtualTimer) stopLocked() bool {
	select { // drop a value that fired but was not received
	case <-t.ch:
	default:
	}
	if !t.armed {
		return false
	}
	for i, x := range t.c.timers {
		if x == t {
			t.c.removeLocked(i)
			break
		}
	}
	return true
}

func (t *virtualTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.stopLocked()
	t.c.armLocked(t, d)
	return was
}
