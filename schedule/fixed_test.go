package schedule

import (
	"math/rand/v2"
	"testing"
	"time"
)

// blBase is the origin of the baseline policies' scripted clocks: a Friday,
// 10:00 UTC.
var blBase = time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC)

// blAt returns blBase + d.
func blAt(d time.Duration) time.Time { return blBase.Add(d) }

// blMiss is a poll at t that found nothing.
func blMiss(t time.Time) Observation { return Observation{At: t} }

// blHit is a poll at t that found items published at pubs.
func blHit(t time.Time, pubs ...time.Time) Observation {
	return Observation{At: t, Hit: true, Published: pubs}
}

func blSameTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s = %v, want %v (off by %v)", what, got.UTC(), want.UTC(), got.Sub(want))
	}
}

func TestFixedName(t *testing.T) {
	tests := []struct {
		period time.Duration
		want   string
	}{
		{15 * time.Minute, "fixed-15m"},
		{300 * time.Second, "fixed-5m"},
		{time.Hour, "fixed-1h"},
		{86400 * time.Second, "fixed-24h"},
		{90 * time.Second, "fixed-90s"},
		{90 * time.Minute, "fixed-90m"},
		{1500 * time.Millisecond, "fixed-1500ms"},
		{0, "fixed-1s"},                // clamped up
		{-5 * time.Minute, "fixed-1s"}, // clamped up
		{72 * time.Hour, "fixed-48h"},  // clamped down to MaxDelay
		{time.Second + time.Microsecond, "fixed-1000001us"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := NewFixed(tc.period, 0).Name(); got != tc.want {
				t.Errorf("NewFixed(%v).Name() = %q, want %q", tc.period, got, tc.want)
			}
		})
	}
}

func TestFixedGrid(t *testing.T) {
	unix := func(s int64) time.Time { return time.Unix(s, 0).UTC() }
	tests := []struct {
		name          string
		period, phase time.Duration
		now           time.Time
		start, next   time.Time // Start(now), Next(poll at now)
	}{
		{"between grid points", 15 * time.Minute, 0,
			blAt(7*time.Minute + 30*time.Second), blAt(15 * time.Minute), blAt(15 * time.Minute)},
		{"on a grid point", 15 * time.Minute, 0,
			blAt(15 * time.Minute), blAt(15 * time.Minute), blAt(30 * time.Minute)},
		{"just before a grid point", 15 * time.Minute, 0,
			blAt(15*time.Minute - time.Nanosecond), blAt(15 * time.Minute), blAt(15 * time.Minute)},
		{"phase", 15 * time.Minute, 5 * time.Minute,
			blAt(7 * time.Minute), blAt(20 * time.Minute), blAt(20 * time.Minute)},
		{"phase, on a grid point", 15 * time.Minute, 5 * time.Minute,
			blAt(5 * time.Minute), blAt(5 * time.Minute), blAt(20 * time.Minute)},
		{"negative phase", 15 * time.Minute, -5 * time.Minute,
			blAt(0), blAt(10 * time.Minute), blAt(10 * time.Minute)},
		{"phase beyond the period", 15 * time.Minute, 20 * time.Minute,
			blAt(time.Minute), blAt(5 * time.Minute), blAt(5 * time.Minute)},
		{"daily at 06:00", 24 * time.Hour, 6 * time.Hour,
			blAt(-3 * time.Hour), blAt(20 * time.Hour), blAt(20 * time.Hour)},
		{"period not dividing a day, epoch aligned", 7 * time.Second, 0,
			unix(700), unix(700), unix(707)},
		{"period not dividing a day, phase", 7 * time.Second, 3 * time.Second,
			unix(701), unix(703), unix(703)},
		{"before 1970", 7 * time.Second, 0,
			unix(-10), unix(-7), unix(-7)},
		{"far future", 15 * time.Minute, 0,
			time.Date(3000, 1, 1, 0, 7, 0, 0, time.UTC),
			time.Date(3000, 1, 1, 0, 15, 0, 0, time.UTC), time.Date(3000, 1, 1, 0, 15, 0, 0, time.UTC)},
		{"MaxDelay period", 48 * time.Hour, 0,
			unix(0), unix(0), unix(0).Add(48 * time.Hour)},
		{"sub-second time", time.Minute, 0,
			blAt(500 * time.Millisecond), blAt(time.Minute), blAt(time.Minute)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFixed(tc.period, tc.phase)
			blSameTime(t, "Start", f.Start(tc.now), tc.start)
			blSameTime(t, "First", First(f, tc.now), tc.start)
			blSameTime(t, "Next", f.Next(blMiss(tc.now)), tc.next)
			// What the poll found does not matter.
			blSameTime(t, "Next after a hit", f.Next(blHit(tc.now, tc.now)), tc.next)
		})
	}
}

func TestFixedLocationIndependent(t *testing.T) {
	tokyo := time.FixedZone("JST", 9*3600)
	f := NewFixed(time.Hour, 30*time.Minute)
	got := f.Next(blMiss(blAt(10 * time.Minute).In(tokyo)))
	blSameTime(t, "Next", got, blAt(30*time.Minute))
}

func TestFixedAccessors(t *testing.T) {
	f := NewFixed(10*time.Minute, -time.Minute)
	if f.Period() != 10*time.Minute || f.Phase() != 9*time.Minute {
		t.Errorf("Period, Phase = %v, %v; want 10m, 9m", f.Period(), f.Phase())
	}
}

// blNamedPolicy is a policy and the name a test reports it under.
type blNamedPolicy struct {
	name string
	p    Policy
}

// blPolicies returns one of each baseline policy, in a fixed order, for the
// tests and benchmarks that hold for all of them.
func blPolicies(tb testing.TB, pubs []time.Time) []blNamedPolicy {
	tb.Helper()
	mustCron := func(spec string) *Cron {
		c, err := NewCron(spec)
		if err != nil {
			tb.Fatalf("NewCron(%q): %v", spec, err)
		}
		return c
	}
	return []blNamedPolicy{
		{"fixed-15m", NewFixed(15*time.Minute, 0)},
		{"fixed-7s-phase", NewFixed(7*time.Second, 3*time.Second)},
		{"fixed-48h", NewFixed(48*time.Hour, time.Hour)},
		{"cron-quarter", mustCron("*/15 * * * *")},
		{"cron-yearly", mustCron("@yearly")},
		{"cron-every", mustCron("@every 90m")},
		{"cron-tz-seconds", mustCron("CRON_TZ=Asia/Tokyo 30 0 9 * * mon-fri")},
		{"miniflux", NewMiniflux()},
		{"commafeed", NewCommaFeed()},
		{"newsblur", NewNewsBlur()},
		{"newsblur-jitter", NewNewsBlur().WithJitter(rand.New(rand.NewPCG(7, 11)))},
		{"newsblur-premium10", NewNewsBlurSubscribers(12, 10).WithJitter(rand.New(rand.NewPCG(3, 5)))},
		{"oracle", NewOracle(pubs)},
	}
}

// TestBaselinesNextBounds checks the Policy contract on random (and partly
// hostile) observation sequences: Next is never before obs.At and never more
// than MaxDelay after it.
func TestBaselinesNextBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(2024, 3))
	randDur := func(max time.Duration) time.Duration { return time.Duration(r.Int64N(int64(max))) }
	for seq := range 40 {
		var pubs []time.Time
		for range r.IntN(200) {
			pubs = append(pubs, blBase.Add(randDur(30*24*time.Hour)))
		}
		for _, np := range blPolicies(t, pubs) {
			name, p := np.name, np.p
			now := blBase.Add(-randDur(time.Hour))
			for step := range 150 {
				switch k := r.IntN(20); {
				case k == 0:
					now = now.Add(-randDur(time.Hour)) // clock stepped back
				case k < 4:
					// poll again at once
				default:
					now = now.Add(randDur(30 * time.Hour))
				}
				obs := Observation{At: now, Hit: r.IntN(3) == 0, MoreData: r.IntN(10) == 0}
				if obs.Hit {
					for range r.IntN(5) {
						var pt time.Time
						switch r.IntN(6) {
						case 0:
							pt = time.Time{} // undated
						case 1:
							pt = now.Add(randDur(1000 * time.Hour)) // in the future
						case 2:
							pt = now.Add(-randDur(1 << 62)) // centuries ago
						default:
							pt = now.Add(-randDur(48 * time.Hour))
						}
						obs.Published = append(obs.Published, pt)
					}
				}
				got := p.Next(obs)
				if got.Before(obs.At) || got.After(obs.At.Add(MaxDelay)) {
					t.Fatalf("seq %d step %d: %s.Next(At=%v) = %v, outside [At, At+MaxDelay]",
						seq, step, name, obs.At, got)
				}
			}
		}
	}
}

// BenchmarkBaselinesNext measures one Next call of each baseline policy on
// a feed publishing every 10 minutes and polled every 7.
func BenchmarkBaselinesNext(b *testing.B) {
	var pubs []time.Time
	for i := range 10000 {
		pubs = append(pubs, blBase.Add(time.Duration(i)*10*time.Minute))
	}
	for _, np := range blPolicies(b, pubs) {
		p := np.p
		b.Run(np.name, func(b *testing.B) {
			obs := make([]Observation, 1024)
			for i := range obs {
				at := blBase.Add(time.Duration(i) * 7 * time.Minute)
				obs[i] = Observation{At: at}
				if i%3 != 0 {
					obs[i].Hit = true
					obs[i].Published = []time.Time{at.Add(-time.Minute)}
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				p.Next(obs[i%len(obs)])
				i++
			}
		})
	}
}
