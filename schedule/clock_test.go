package schedule

import (
	"testing"
	"time"
)

func tryRecv(c <-chan time.Time) (time.Time, bool) {
	select {
	case t := <-c:
		return t, true
	default:
		return time.Time{}, false
	}
}

func TestVirtualClockFiresInOrder(t *testing.T) {
	start := sleepAt(6, 0, 0)
	c := NewVirtualClock(start)
	t3 := c.NewTimer(3 * time.Second)
	t1 := c.NewTimer(time.Second)
	t1b := c.NewTimer(time.Second)
	if c.Pending() != 3 {
		t.Fatalf("Pending = %d, want 3", c.Pending())
	}
	c.Advance(999 * time.Millisecond)
	for i, tm := range []Timer{t1, t1b, t3} {
		if _, ok := tryRecv(tm.C()); ok {
			t.Fatalf("timer %d fired early", i)
		}
	}
	c.Advance(2 * time.Second) // to start+2.999s
	for i, tm := range []Timer{t1, t1b} {
		got, ok := tryRecv(tm.C())
		if !ok || !got.Equal(start.Add(time.Second)) {
			t.Fatalf("timer %d: got %v,%v, want its deadline", i, got, ok)
		}
	}
	if _, ok := tryRecv(t3.C()); ok {
		t.Fatal("3s timer fired at 2.999s")
	}
	if got := c.Now(); !got.Equal(start.Add(2999 * time.Millisecond)) {
		t.Fatalf("Now = %v", got)
	}
	c.Set(start.Add(time.Hour))
	if got, ok := tryRecv(t3.C()); !ok || !got.Equal(start.Add(3*time.Second)) {
		t.Fatalf("3s timer: %v,%v", got, ok)
	}
	c.Set(start) // never backwards
	if !c.Now().Equal(start.Add(time.Hour)) {
		t.Fatalf("clock moved back to %v", c.Now())
	}
	if c.Pending() != 0 {
		t.Fatalf("Pending = %d, want 0", c.Pending())
	}
}

func TestVirtualClockStopReset(t *testing.T) {
	start := sleepAt(6, 0, 0)
	tests := []struct {
		name string
		run  func(c *VirtualClock) (fired bool, at time.Time)
		want bool
		at   time.Duration
	}{
		{"stop before deadline", func(c *VirtualClock) (bool, time.Time) {
			tm := c.NewTimer(time.Second)
			if !tm.Stop() {
				t.Fatal("Stop of an armed timer = false")
			}
			c.Advance(time.Minute)
			at, ok := tryRecv(tm.C())
			return ok, at
		}, false, 0},
		{"stop drops an unreceived value", func(c *VirtualClock) (bool, time.Time) {
			tm := c.NewTimer(time.Second)
			c.Advance(time.Minute)
			if tm.Stop() {
				t.Fatal("Stop of a fired timer = true")
			}
			at, ok := tryRecv(tm.C())
			return ok, at
		}, false, 0},
		{"reset moves the deadline", func(c *VirtualClock) (bool, time.Time) {
			tm := c.NewTimer(time.Second)
			c.Advance(500 * time.Millisecond)
			if !tm.Reset(2 * time.Second) {
				t.Fatal("Reset of an armed timer = false")
			}
			c.Advance(time.Second)
			if _, ok := tryRecv(tm.C()); ok {
				t.Fatal("fired at the old deadline")
			}
			c.Advance(time.Second)
			at, ok := tryRecv(tm.C())
			return ok, at
		}, true, 2500 * time.Millisecond},
		{"reset after firing re-arms", func(c *VirtualClock) (bool, time.Time) {
			tm := c.NewTimer(time.Second)
			c.Advance(time.Second)
			if tm.Reset(time.Second) {
				t.Fatal("Reset of a fired timer = true")
			}
			c.Advance(time.Second)
			at, ok := tryRecv(tm.C())
			return ok, at
		}, true, 2 * time.Second},
		{"non-positive duration fires at once", func(c *VirtualClock) (bool, time.Time) {
			tm := c.NewTimer(0)
			at, ok := tryRecv(tm.C())
			return ok, at
		}, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewVirtualClock(start)
			fired, at := tc.run(c)
			if fired != tc.want {
				t.Fatalf("fired = %v, want %v", fired, tc.want)
			}
			if fired && !at.Equal(start.Add(tc.at)) {
				t.Fatalf("fired with %v, want %v", at, start.Add(tc.at))
			}
		})
	}
}
