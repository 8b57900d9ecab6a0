package schedule

import (
	"slices"
	"testing"
	"time"
)

func TestOracle(t *testing.T) {
	m := time.Minute
	given := []time.Time{blAt(30 * m), blAt(10 * m), blAt(10 * m), blAt(20 * m), blAt(20*m + time.Nanosecond)}
	original := slices.Clone(given)
	o := NewOracle(given)
	if !slices.Equal(given, original) {
		t.Fatalf("NewOracle modified its argument: %v", given)
	}
	given[0] = blAt(-time.Hour) // the oracle keeps its own copy
	if o.Name() != "oracle" {
		t.Errorf("Name() = %q", o.Name())
	}

	starts := []struct {
		name      string
		now, want time.Time
	}{
		{"before the first publish", blAt(0), blAt(10 * m)},
		{"at a publish", blAt(10 * m), blAt(10 * m)},
		{"between publishes", blAt(15 * m), blAt(20 * m)},
		{"after the last publish", blAt(31 * m), blAt(31*m + MaxDelay)},
	}
	for _, tc := range starts {
		t.Run("Start/"+tc.name, func(t *testing.T) {
			blSameTime(t, "Start", o.Start(tc.now), tc.want)
			blSameTime(t, "First", First(o, tc.now), tc.want)
		})
	}

	nexts := []struct {
		name string
		obs  Observation
		want time.Time
	}{
		{"before the first publish", blMiss(blAt(5 * m)), blAt(10 * m)},
		{"duplicates are fetched by one poll", blHit(blAt(10*m), blAt(10*m), blAt(10*m)), blAt(20 * m)},
		{"a nanosecond apart is two publishes", blHit(blAt(20*m), blAt(20*m)), blAt(20*m + time.Nanosecond)},
		{"at the last publish", blHit(blAt(30*m), blAt(30*m)), blAt(30*m + MaxDelay)},
		{"exhausted", blMiss(blAt(40 * m)), blAt(40*m + MaxDelay)},
		{"clock stepped back", blMiss(blAt(-time.Hour)), blAt(10 * m)},
	}
	for _, tc := range nexts {
		t.Run("Next/"+tc.name, func(t *testing.T) {
			blSameTime(t, "Next", o.Next(tc.obs), tc.want)
		})
	}
}

func TestOracleFarPublish(t *testing.T) {
	o := NewOracle([]time.Time{blAt(72 * time.Hour)})
	blSameTime(t, "Start", o.Start(blAt(0)), blAt(MaxDelay))
	blSameTime(t, "Next", o.Next(blMiss(blAt(0))), blAt(MaxDelay))
	blSameTime(t, "Next at MaxDelay", o.Next(blMiss(blAt(MaxDelay))), blAt(72*time.Hour))
}

func TestOracleEmpty(t *testing.T) {
	for _, o := range []*Oracle{NewOracle(nil), NewOracle([]time.Time{})} {
		blSameTime(t, "Start", o.Start(blAt(0)), blAt(MaxDelay))
		blSameTime(t, "Next", o.Next(blMiss(blAt(0))), blAt(MaxDelay))
	}
}

// TestOracleRun drives an oracle like the scheduler does and checks that it
// polls exactly once per distinct publish time, every poll a hit.
func TestOracleRun(t *testing.T) {
	var pubs []time.Time
	for _, s := range []int{0, 600, 600, 1300, 1800, 1800, 1800, 5000} {
		pubs = append(pubs, blAt(time.Duration(s)*time.Second))
	}
	want := slices.CompactFunc(slices.Clone(pubs), time.Time.Equal)
	o := NewOracle(pubs)
	var polls []time.Time
	for now := First(o, blAt(-time.Minute)); now.Before(blAt(2 * time.Hour)); {
		polls = append(polls, now)
		now = o.Next(blHit(now, now))
	}
	if !slices.EqualFunc(polls, want, time.Time.Equal) {
		t.Errorf("polls = %v, want %v", polls, want)
	}
}
