package schedule

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

const (
	blDay   = 24 * time.Hour
	blMonth = 30 * blDay
)

// blSpaced returns n publish ages (durations before now), oldest first,
// spaced by gap, the newest one newest ago.
func blSpaced(n int, gap, newest time.Duration) []time.Duration {
	ago := make([]time.Duration, n)
	for i := range n {
		ago[i] = newest + time.Duration(n-1-i)*gap
	}
	return ago
}

// blFirst feeds p one poll at blBase that found items of the given ages (a
// miss when ago is nil) and returns the interval p chose.
func blFirst(p Policy, ago []time.Duration) time.Duration {
	obs := blMiss(blBase)
	if ago != nil {
		obs.Hit = true
		for _, a := range ago {
			obs.Published = append(obs.Published, blBase.Add(-a))
		}
	}
	return p.Next(obs).Sub(blBase)
}

func TestPeerLog(t *testing.T) {
	l := newPeerLog(4)
	for _, ms := range []int64{50, 10, 30, 30, 70, 5, 60} {
		l.add(ms)
	}
	if want := []int64{30, 50, 60, 70}; !slices.Equal(l.ms, want) {
		t.Errorf("newest four = %v, want %v", l.ms, want)
	}
	if got := l.since(55); !slices.Equal(got, []int64{60, 70}) {
		t.Errorf("since(55) = %v, want [60 70]", got)
	}
	if got := l.since(60); !slices.Equal(got, []int64{60, 70}) {
		t.Errorf("since(60) = %v, want [60 70]", got)
	}
	if cap(l.ms) != 4 {
		t.Errorf("capacity grew to %d", cap(l.ms))
	}

	now := blBase
	tests := []struct {
		name string
		obs  Observation
		want []int64
	}{
		{"miss", Observation{At: now, Published: []time.Time{now}}, nil},
		{"undated hit", Observation{At: now, Hit: true}, []int64{now.UnixMilli()}},
		{"future date", blHit(now, now.Add(time.Hour)), []int64{now.UnixMilli()}},
		{"zero date", blHit(now, time.Time{}), []int64{now.Add(-peerHorizon).UnixMilli()}},
		{"dates out of order", blHit(now, now.Add(-time.Minute), now.Add(-time.Hour)),
			[]int64{now.Add(-time.Hour).UnixMilli(), now.Add(-time.Minute).UnixMilli()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newPeerLog(8)
			l.record(tc.obs)
			if !slices.Equal(l.ms, tc.want) {
				t.Errorf("recorded %v, want %v", l.ms, tc.want)
			}
		})
	}
}

func TestMinifluxInterval(t *testing.T) {
	window := append([]time.Duration{7 * blDay}, blSpaced(24, time.Hour, 0)...)
	windowOut := append([]time.Duration{7*blDay + time.Millisecond}, blSpaced(24, time.Hour, 0)...)
	tests := []struct {
		name string
		ago  []time.Duration // nil: the first poll is a miss
		want time.Duration
	}{
		{"no entries", nil, 24 * time.Hour},
		{"one entry", blSpaced(1, 0, time.Hour), 24 * time.Hour},
		{"two entries at one instant", blSpaced(2, 0, time.Hour), 24 * time.Hour},
		{"all older than a week", blSpaced(5, time.Hour, 8*blDay), 24 * time.Hour},
		{"daily", blSpaced(3, blDay, 0), 24 * time.Hour},
		{"twice a day", blSpaced(3, 12*time.Hour, 0), 12 * time.Hour},
		{"hourly", blSpaced(5, time.Hour, 0), time.Hour},
		{"every 50 min: weekly count rounds up to 202", blSpaced(4, 50*time.Minute, 0), 7 * blDay / 202},
		{"at the minimum", blSpaced(10, 5*time.Minute, 0), 5 * time.Minute},
		{"below the minimum", blSpaced(10, 4*time.Minute, 0), 5 * time.Minute},
		{"above the minimum", blSpaced(10, 6*time.Minute, 0), 6 * time.Minute},
		{"below the maximum: 23h spacing counts 8 a week", blSpaced(2, 23*time.Hour, time.Hour), 21 * time.Hour},
		{"25h spacing counts 7 a week", blSpaced(2, 25*time.Hour, time.Hour), 24 * time.Hour},
		{"above the maximum", blSpaced(2, 6*blDay, 0), 24 * time.Hour},
		{"entry exactly a week old counts", window, 7 * time.Hour},
		{"entry just over a week old does not", windowOut, time.Hour},
		{"more entries than kept", blSpaced(150, 10*time.Second, 0), 5 * time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMiniflux()
			if got := blFirst(m, tc.ago); got != tc.want {
				t.Errorf("interval = %v, want %v", got, tc.want)
			}
			if cap(m.log.ms) != minifluxLogLen || len(m.log.ms) > minifluxLogLen {
				t.Errorf("history holds %d of capacity %d, want at most %d", len(m.log.ms), cap(m.log.ms), minifluxLogLen)
			}
		})
	}
	if got := NewMiniflux().Name(); got != "miniflux" {
		t.Errorf("Name() = %q", got)
	}
}

// TestMinifluxCountsBeforeStoring pins the order of Miniflux's refresh: the
// weekly count is taken before the refresh's own entries are stored.
func TestMinifluxCountsBeforeStoring(t *testing.T) {
	m := NewMiniflux()
	steps := []struct {
		obs  Observation
		want time.Time
	}{
		// Subscription: three hourly entries, stored first.
		{blHit(blAt(0), blAt(-2*time.Hour), blAt(-time.Hour), blAt(0)), blAt(time.Hour)},
		// The entry found now does not count yet.
		{blHit(blAt(time.Hour), blAt(30*time.Minute)), blAt(2 * time.Hour)},
		// Now it does: four entries over 2.5 h, a weekly count of 202.
		{blMiss(blAt(2 * time.Hour)), blAt(2*time.Hour + 7*blDay/202)},
		// A week later all of them have aged out.
		{blMiss(blAt(8 * blDay)), blAt(9 * blDay)},
	}
	for i, s := range steps {
		blSameTime(t, "poll "+string(rune('0'+i)), m.Next(s.obs), s.want)
	}
}

func TestCommaFeedInterval(t *testing.T) {
	tests := []struct {
		name string
		ago  []time.Duration // nil: the first poll is a miss
		want time.Duration
	}{
		{"no entries: max interval", nil, 4 * time.Hour},
		{"one entry: spacing unknown, max interval", blSpaced(1, 0, time.Hour), 4 * time.Hour},
		{"half the spacing", blSpaced(2, time.Hour, 10*time.Minute), 30 * time.Minute},
		{"at the minimum", blSpaced(3, 10*time.Minute, 0), 5 * time.Minute},
		{"below the minimum", blSpaced(3, 8*time.Minute, 0), 5 * time.Minute},
		{"above the minimum", blSpaced(3, 12*time.Minute, 0), 6 * time.Minute},
		{"entries at one instant", blSpaced(3, 0, 0), 5 * time.Minute},
		{"at the maximum", blSpaced(3, 2*time.Hour, 0), time.Hour},
		{"above the maximum", blSpaced(3, 3*time.Hour, 0), time.Hour},
		{"below the maximum", blSpaced(3, 119*time.Minute, 0), 59*time.Minute + 30*time.Second},
		{"spacing in whole milliseconds",
			[]time.Duration{3*time.Hour + time.Millisecond, 2 * time.Hour, time.Hour, 0}, 30 * time.Minute},
		{"newest 6d23h59m59s old", blSpaced(3, 20*time.Minute, 7*blDay-time.Second), 10 * time.Minute},
		{"newest 7 days old", blSpaced(3, 20*time.Minute, 7*blDay), time.Hour},
		{"newest 13 days old", blSpaced(3, 20*time.Minute, 13*blDay), time.Hour},
		{"newest 14 days old", blSpaced(3, 20*time.Minute, 14*blDay), 2 * time.Hour},
		{"newest 29d23h old", blSpaced(3, 20*time.Minute, 30*blDay-time.Hour), 2 * time.Hour},
		{"newest 30 days old", blSpaced(3, 20*time.Minute, 30*blDay), 4 * time.Hour},
		{"newest 400 days old", blSpaced(3, 20*time.Minute, 400*blDay), 4 * time.Hour},
		{"single entry 10 days old", blSpaced(1, 0, 10*blDay), time.Hour},
		// Only the newest 20 entries (the feed document) are averaged.
		{"document of 20", append(blSpaced(5, 10*time.Hour, 20*time.Hour), blSpaced(20, 30*time.Minute, 0)...),
			15 * time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCommaFeed()
			if got := blFirst(c, tc.ago); got != tc.want {
				t.Errorf("interval = %v, want %v", got, tc.want)
			}
			if cap(c.log.ms) != commaFeedDocLen || len(c.log.ms) > commaFeedDocLen {
				t.Errorf("history holds %d of capacity %d", len(c.log.ms), cap(c.log.ms))
			}
		})
	}
	if got := NewCommaFeed().Name(); got != "commafeed" {
		t.Errorf("Name() = %q", got)
	}
}

// TestCommaFeedNotModified: polls that find nothing keep the stored spacing
// while the newest entry ages through the 7/14/30-day thresholds.
func TestCommaFeedNotModified(t *testing.T) {
	c := NewCommaFeed()
	var pubs []time.Time
	for _, a := range blSpaced(4, 30*time.Minute, 0) {
		pubs = append(pubs, blBase.Add(-a))
	}
	steps := []struct {
		obs  Observation
		want time.Duration
	}{
		{blHit(blAt(0), pubs...), 15 * time.Minute},
		{blMiss(blAt(15 * time.Minute)), 15 * time.Minute},
		{blMiss(blAt(7 * blDay)), time.Hour},
		{blMiss(blAt(14 * blDay)), 2 * time.Hour},
		{blMiss(blAt(30 * blDay)), 4 * time.Hour},
		// A new entry resets the age; the spacing now spans 30 days.
		{blHit(blAt(30*blDay+time.Hour), blAt(30*blDay+time.Hour)), time.Hour},
	}
	for i, s := range steps {
		got := c.Next(s.obs).Sub(s.obs.At)
		if got != s.want {
			t.Errorf("poll %d at %v: interval %v, want %v", i, s.obs.At.Sub(blBase), got, s.want)
		}
	}
}

func TestNewsBlurSingleFreeSubscriber(t *testing.T) {
	m := func(x float64) time.Duration { return time.Duration(x * float64(time.Minute)) }
	tests := []struct {
		name string
		ago  []time.Duration // nil: the first poll is a miss
		want time.Duration
	}{
		{"no stories", nil, 24 * time.Hour},
		{"one story", blSpaced(1, 0, 0), m(348)},
		{"15 stories a month", blSpaced(15, blDay, 0), m(180)},
		{"29 stories a month", blSpaced(29, blDay, 0), m(12)},
		{"30 stories a month", blSpaced(30, blDay, 0), m(45)},
		{"100 stories", blSpaced(100, time.Hour, 0), m(45)},
		{"story exactly 30 days old counts", blSpaced(1, 0, blMonth), m(348)},
		{"story just over 30 days old does not", blSpaced(1, 0, blMonth+time.Millisecond), 24 * time.Hour},
		{"silent 31 days", blSpaced(3, blDay, 31*blDay), m(1488)},
		{"silent 45 days", blSpaced(1, 0, 45*blDay), m(2160)},
		{"silent 60 days: the 48 h cap", blSpaced(1, 0, 60*blDay), 48 * time.Hour},
		{"silent 90 days", blSpaced(1, 0, 90*blDay), 48 * time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := NewNewsBlur()
			if got := blFirst(n, tc.ago); got != tc.want {
				t.Errorf("interval = %v, want %v", got, tc.want)
			}
			if cap(n.log.ms) != newsBlurLogLen || len(n.log.ms) > newsBlurLogLen {
				t.Errorf("history holds %d of capacity %d", len(n.log.ms), cap(n.log.ms))
			}
		})
	}
	if got := NewNewsBlur().Name(); got != "newsblur" {
		t.Errorf("Name() = %q", got)
	}
}

func TestNewsBlurSubscribers(t *testing.T) {
	m := func(x float64) time.Duration { return time.Duration(x * float64(time.Minute)) }
	daily := blSpaced(30, blDay, 0)    // spd = 1
	half := blSpaced(15, blDay, 0)     // spd = 0.5
	silent := blSpaced(1, 0, 90*blDay) // spd = 0, three months
	almost := blSpaced(29, blDay, 0)   // spd = 29/30
	tests := []struct {
		name            string
		active, premium int
		ago             []time.Duration
		want            time.Duration
	}{
		{"10 premium, daily", 10, 10, daily, m(6)},
		{"10 premium, half", 10, 10, half, m(30)},
		{"10 premium, almost daily", 10, 10, almost, m(2)},
		{"10 premium, no stories: 4 h cap", 10, 10, nil, 4 * time.Hour},
		{"10 premium, silent", 10, 10, silent, 4 * time.Hour},
		{"2 premium, daily", 2, 2, daily, m(15)},
		{"1 premium, daily", 1, 1, daily, m(45)},
		{"1 premium, half", 1, 1, half, m(180)},
		{"1 premium, no stories", 1, 1, nil, 4 * time.Hour},
		{"20 free count as 2", 20, 0, daily, m(15)},
		{"100 free count as 10", 100, 0, daily, m(6)},
		{"1 premium + 9 free = 1.9", 10, 1, daily, m(15)},
		{"negative counts: no audience", -3, -1, daily, m(45)},
		{"no audience, no stories", 0, 0, nil, 24 * time.Hour},
		{"premium beyond active", 0, 5, daily, m(15)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := NewNewsBlurSubscribers(tc.active, tc.premium)
			if got := blFirst(n, tc.ago); got != tc.want {
				t.Errorf("interval = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNewsBlurJitter(t *testing.T) {
	tests := []struct {
		name            string
		active, premium int
		ago             []time.Duration
		base            int // minutes before jitter
		quarter         bool
	}{
		{"45 min: up to a quarter more", 1, 0, blSpaced(30, blDay, 0), 45, true},
		{"2 min: up to the wait again", 10, 10, blSpaced(29, blDay, 0), 2, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mirror := rand.New(rand.NewPCG(1, 2))
			n := NewNewsBlurSubscribers(tc.active, tc.premium).WithJitter(rand.New(rand.NewPCG(1, 2)))
			blFirst(n, tc.ago)
			mirror.IntN(tc.base + 1) // the draw of that first poll
			for i := range 8 {
				now := blAt(time.Duration(i+1) * time.Minute)
				extra := time.Duration(mirror.IntN(tc.base+1)) * time.Minute
				if tc.quarter {
					extra /= 4
				}
				want := now.Add(time.Duration(tc.base)*time.Minute + extra)
				blSameTime(t, "Next", n.Next(blMiss(now)), want)
			}
			n.WithJitter(nil)
			blSameTime(t, "Next without jitter", n.Next(blMiss(blAt(time.Hour))),
				blAt(time.Hour+time.Duration(tc.base)*time.Minute))
		})
	}
}

// TestPeersHugeObservation feeds each peer one poll reporting 200,000 items:
// the work stays linear and the history bounded.
func TestPeersHugeObservation(t *testing.T) {
	pubs := make([]time.Time, 200000)
	for i := range pubs {
		pubs[i] = blAt(time.Duration(i-len(pubs)) * time.Second)
	}
	tests := []struct {
		name string
		p    Policy
		log  *peerLog
		want time.Duration
	}{
		{"miniflux", NewMiniflux(), nil, MinifluxMinInterval},
		{"commafeed", NewCommaFeed(), nil, CommaFeedInterval},
		{"newsblur", NewNewsBlur(), nil, 45 * time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			switch p := tc.p.(type) {
			case *Miniflux:
				tc.log = &p.log
			case *CommaFeed:
				tc.log = &p.log
			case *NewsBlur:
				tc.log = &p.log
			}
			got := tc.p.Next(blHit(blAt(0), pubs...)).Sub(blAt(0))
			if got != tc.want {
				t.Errorf("interval = %v, want %v", got, tc.want)
			}
			if len(tc.log.ms) != cap(tc.log.ms) || tc.log.ms[len(tc.log.ms)-1] != blAt(-time.Second).UnixMilli() {
				t.Errorf("history: %d of %d entries, newest %d", len(tc.log.ms), cap(tc.log.ms), tc.log.ms[len(tc.log.ms)-1])
			}
		})
	}
}
