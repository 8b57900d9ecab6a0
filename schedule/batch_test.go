package schedule_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/schedule/sim"
)

// backfilled is a 60 s publisher (Laplace jitter b = 2 s) into whose feed
// n stored readings, spacing apart, are posted at once a quarter of a
// period after its publish number at; it returns the items and when the
// backfill ends.
func backfilled(n int, spacing time.Duration, at int) ([]sim.Item, time.Time, time.Time, time.Time) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(2000 * time.Minute)
	m := sim.Model{Period: time.Minute, Pss: 1, Pfs: 1, JitterScale: 2 * time.Second}
	items := m.Generate(rand.New(rand.NewPCG(1, 2)), start, end)
	first := items[at].Published.Add(15 * time.Second)
	for i := range n {
		p := first.Add(time.Duration(i) * spacing)
		items = append(items, sim.Item{Published: p, Observed: p})
	}
	slices.SortStableFunc(items, func(a, b sim.Item) int { return a.Published.Compare(b.Published) })
	return items, first.Add(time.Duration(n) * spacing), start, end
}

// meanAfter is the mean use latency of the items published in
// [from, from+d) (every item of a run is fetched, in publish order).
func meanAfter(t *testing.T, items []sim.Item, res sim.Result, from time.Time, d time.Duration) float64 {
	t.Helper()
	if res.Unfetched > 0 && len(res.Latencies)+res.Unfetched != len(items) {
		t.Fatalf("%d latencies, %d unfetched of %d items", len(res.Latencies), res.Unfetched, len(items))
	}
	sum, n := 0.0, 0
	for i, it := range items[:len(res.Latencies)] {
		if !it.Published.Before(from) && it.Published.Before(from.Add(d)) {
			sum += res.Latencies[i]
			n++
		}
	}
	if n == 0 {
		t.Fatal("no item in the window")
	}
	return sum / float64(n)
}

// restoring rebuilds its Auto from the saved state before every poll, as
// a node that restarts between any two polls would.
type restoring struct {
	t *testing.T
	p *schedule.Auto
}

func (r *restoring) Next(obs schedule.Observation) time.Time {
	q := schedule.NewAuto(schedule.WithSeed(1))
	if err := q.RestoreState(r.p.AppendState(nil)); err != nil {
		r.t.Fatal(err)
	}
	r.p = q
	return q.Next(obs)
}

// TestAutoBackfill posts a backfill of stored readings into a steady
// feed: the readings' gaps are not periods, and the latency of the
// readings after it stays what it is without the backfill (learned as
// periods, they tripled it for ~700 periods). A policy restored before
// every poll answers alike.
func TestAutoBackfill(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n       int
		spacing time.Duration
	}{
		{"20 readings 1.5 s apart", 20, 1500 * time.Millisecond},
		{"60 readings 1.5 s apart, read by two polls", 60, 1500 * time.Millisecond},
		{"8 readings 5 s apart", 8, 5 * time.Second},
		{"100 readings 100 ms apart", 100, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain, _, start, end := backfilled(0, 0, 500)
			items, after, _, _ := backfilled(tc.n, tc.spacing, 500)
			base := sim.Run(schedule.NewAuto(schedule.WithSeed(1)), plain, start, end)
			res := sim.Run(schedule.NewAuto(schedule.WithSeed(1)), items, start, end)
			from := after.Add(time.Minute)
			for _, d := range []time.Duration{100 * time.Minute, 600 * time.Minute} {
				want := meanAfter(t, plain, base, from, d)
				got := meanAfter(t, items, res, from, d)
				if got > 1.15*want {
					t.Errorf("mean latency over %v after the backfill %.1f s, %.1f s without it", d, got, want)
				}
			}
			if res.Polls > base.Polls+base.Polls/100 {
				t.Errorf("%d polls, %d without the backfill", res.Polls, base.Polls)
			}
			restored := sim.Run(&restoring{t: t, p: schedule.NewAuto(schedule.WithSeed(1))}, items, start, end)
			if !slices.Equal(restored.Latencies, res.Latencies) || restored.Polls != res.Polls {
				t.Errorf("restored before every poll: %d polls, mean %.3f s; live %d polls, mean %.3f s",
					restored.Polls, mean(restored.Latencies), res.Polls, mean(res.Latencies))
			}
		})
	}
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// TestAutoLearnsShorterPeriod: a publisher whose period really shrinks
// (60 s to 5 s, below the batch spacing) brings short gaps in every hit;
// auto takes them for the period within a few hits.
func TestAutoLearnsShorterPeriod(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	change := start.Add(200 * time.Minute)
	slow := sim.Model{Period: time.Minute, Pss: 1, Pfs: 1, JitterScale: time.Second}
	fast := sim.Model{Period: 5 * time.Second, Pss: 1, Pfs: 1, JitterScale: 100 * time.Millisecond}
	rng := rand.New(rand.NewPCG(3, 4))
	items := slow.Generate(rng, start, change)
	items = append(items, fast.Generate(rng, change, change.Add(time.Hour))...)
	for _, tc := range []struct {
		after time.Duration
		want  float64 // learned period, seconds
	}{
		{-time.Minute, 60},
		{6 * time.Minute, 5},
	} {
		p := schedule.NewAuto(schedule.WithSeed(1))
		sim.Run(p, items, start, change.Add(tc.after))
		if got := p.State().Median.Seconds(); math.Abs(got-tc.want) > 0.1*tc.want {
			t.Errorf("%v after the change: period %.2f s, want %.0f s", tc.after, got, tc.want)
		}
	}
}

// grouped is a feed of k sensors that each publish once a minute, the
// i-th i·spacing seconds after the first (±0.1 s), with the DPT model's
// losses (a lost group) and Laplace jitter b = 1 s on the group, over
// one day.
func grouped(k int, spacing time.Duration) ([]sim.Item, time.Time, time.Time) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(24 * time.Hour)
	m := sim.Model{Period: time.Minute, Pss: 0.95, Pfs: 0.8, JitterScale: time.Second}
	rng := rand.New(rand.NewPCG(5, 6))
	var items []sim.Item
	for _, it := range m.Generate(rand.New(rand.NewPCG(1, 2)), start, end) {
		for j := range k {
			p := it.Published.Add(time.Duration(j)*spacing + time.Duration(rng.Float64()*0.2e9))
			items = append(items, sim.Item{Published: p, Observed: p})
		}
	}
	slices.SortStableFunc(items, func(a, b sim.Item) int { return a.Published.Compare(b.Published) })
	return items, start, end
}

// TestAutoFollowsGroups: a feed carrying the readings of several sensors
// a few seconds apart once a minute is polled about once a reading, each
// reading fetched within a few seconds (the spacing learned as the
// period, it was polled 5–12 times a minute for a mean of 4–17 s).
func TestAutoFollowsGroups(t *testing.T) {
	for _, tc := range []struct {
		k       int
		spacing time.Duration
	}{
		{2, 2 * time.Second}, {2, 5 * time.Second},
		{3, 2 * time.Second}, {3, 5 * time.Second},
		{5, 500 * time.Millisecond}, {5, 2 * time.Second}, {5, 5 * time.Second},
	} {
		items, start, end := grouped(tc.k, tc.spacing)
		res := sim.Run(schedule.NewAuto(schedule.WithSeed(1)), items, start, end)
		_, mean, p90, _ := sim.Summarize(res.Latencies)
		perPeriod := float64(res.Polls) / end.Sub(start).Minutes()
		if perPeriod > float64(tc.k)+1.2 || mean > 4 || p90 > 5 {
			t.Errorf("%d sensors %v apart: %.2f polls a period, mean %.1f s, p90 %.1f s; want at most %d+1.2, 4 s, 5 s",
				tc.k, tc.spacing, perPeriod, mean, p90, tc.k)
		}
		if tc.k == 3 {
			restored := sim.Run(&restoring{t: t, p: schedule.NewAuto(schedule.WithSeed(1))}, items, start, end)
			if !slices.Equal(restored.Latencies, res.Latencies) || restored.Polls != res.Polls {
				t.Errorf("%d sensors %v apart, restored before every poll: %d polls, live %d", tc.k, tc.spacing, restored.Polls, res.Polls)
			}
		}
	}
}

// TestAutoCyclePredicted: with a cycle learned, the publish the next
// poll aims at (which ranks feeds under a fetch budget) is the cycle's:
// after a group's last reading the check a spacing into the long gap,
// once that found nothing the next group, and the next sensor's reading
// inside a group.
func TestAutoCyclePredicted(t *testing.T) {
	a := schedule.NewAuto(schedule.WithSeed(1))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var last time.Time
	for c := range 10 {
		for j := range 3 {
			last = t0.Add(time.Duration(c)*time.Minute + time.Duration(j)*2*time.Second)
			a.Next(schedule.Observation{At: last.Add(100 * time.Millisecond), Hit: true, Published: []time.Time{last}})
		}
	}
	p, ok := a.PredictedPublish()
	if !ok || p.Sub(last) < time.Second || p.Sub(last) > 3*time.Second {
		t.Errorf("after a group's last reading: predicted %v after it (%v), want the check, ~2 s", p.Sub(last), ok)
	}
	a.Next(schedule.Observation{At: p.Add(time.Second)})
	if p, ok := a.PredictedPublish(); !ok || p.Sub(last) < 50*time.Second || p.Sub(last) > 60*time.Second {
		t.Errorf("after the check found nothing: predicted %v after the last reading (%v), want the next group, ~56 s", p.Sub(last), ok)
	}
	first := last.Add(56 * time.Second)
	a.Next(schedule.Observation{At: first.Add(100 * time.Millisecond), Hit: true, Published: []time.Time{first}})
	if p, ok := a.PredictedPublish(); !ok || p.Sub(first) < time.Second || p.Sub(first) > 3*time.Second {
		t.Errorf("after a group's first reading: predicted %v after it (%v), want the next sensor's, ~2 s", p.Sub(first), ok)
	}
}

// TestAutoBackfillPages: a backfill of 100 readings 1.5 s apart read in
// pages, the publisher saying more data is waiting after each but the
// last, is one batch however many pages it takes: nothing is learned
// from it and the next poll is still a period after the last reading
// before it. (Counted as hits in a row, pages from the fourth on were
// learned and the period became 1.5 s; a page's first reading, spaced
// from that last reading rather than from the page before, was learned
// and moved the next poll late.)
func TestAutoBackfillPages(t *testing.T) {
	for _, pages := range []int{2, 5, 10} {
		a, last := steadyMinute()
		gaps := a.State().Gaps
		first := last.Add(-20 * time.Second)
		at := last.Add(30 * time.Second)
		per := 100 / pages
		var next time.Time
		for page := range pages {
			var pubs []time.Time
			for i := range per {
				pubs = append(pubs, first.Add(time.Duration(page*per+i)*1500*time.Millisecond))
			}
			next = a.Next(schedule.Observation{At: at, Hit: true, Published: pubs, MoreData: page < pages-1})
			at = at.Add(100 * time.Millisecond)
		}
		st := a.State()
		if st.Median < 59*time.Second || st.Median > 61*time.Second || st.Gaps != gaps {
			t.Errorf("%d pages: period %v from %d gaps after the backfill, want 60 s from %d", pages, st.Median, st.Gaps, gaps)
		}
		if d := next.Sub(last); d < time.Minute || d > 62*time.Second {
			t.Errorf("%d pages: next poll %v after the last reading before the backfill, want just after a period", pages, d)
		}
	}
}

// TestAutoCycleRegularOutages: a steady 60 s publisher whose first
// outages came five readings apart looks like a cycle of five; when it
// goes on publishing through the long gap the cycle predicts, the poll a
// spacing after the group's last reading finds it (without that check
// auto waited the whole predicted outage: 362 s).
func TestAutoCycleRegularOutages(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 1))
	var items []sim.Item
	at := start
	add := func() {
		p := at.Add(time.Duration(rng.NormFloat64() * 3e8))
		items = append(items, sim.Item{Published: p, Observed: p})
		at = at.Add(time.Minute)
	}
	for range 30 {
		add()
	}
	for range 3 {
		at = at.Add(7 * time.Minute)
		for range 5 {
			add()
		}
	}
	after := at
	for range 30 {
		add()
	}
	res := sim.Run(schedule.NewAuto(schedule.WithSeed(1)), items, start, at)
	worst := 0.0
	for i, it := range items[:len(res.Latencies)] {
		if !it.Published.Before(after) {
			worst = max(worst, res.Latencies[i])
		}
	}
	if worst > 5 {
		t.Errorf("after the outages, a reading fetched %.0f s late", worst)
	}
}

// TestAutoBackfillPagesAfterPolls: a backfill two polls have begun to
// read (each a hit carrying a batch) and the third reads in pages is still
// one batch: a page is judged as the first hit of its read, not one hit
// further on (two pages had the second learned: the period became 1.5 s).
func TestAutoBackfillPagesAfterPolls(t *testing.T) {
	for _, pages := range []int{1, 2, 5} {
		a, last := steadyMinute()
		gaps := a.State().Gaps
		pub := func(i int) time.Time { return last.Add(5*time.Second + time.Duration(i)*1500*time.Millisecond) }
		const readings = 30
		i := 0
		for _, at := range []time.Duration{10 * time.Second, 20 * time.Second} {
			var pubs []time.Time
			for ; pub(i).Before(last.Add(at)); i++ {
				pubs = append(pubs, pub(i))
			}
			a.Next(schedule.Observation{At: last.Add(at), Hit: true, Published: pubs})
		}
		per := (readings - i + pages - 1) / pages
		at := last.Add(30 * time.Second)
		for page := range pages {
			var pubs []time.Time
			for j := 0; j < per && i < readings; j++ {
				pubs = append(pubs, pub(i))
				i++
			}
			a.Next(schedule.Observation{At: at, Hit: true, Published: pubs, MoreData: page < pages-1})
			at = at.Add(100 * time.Millisecond)
		}
		if st := a.State(); st.Median < 59*time.Second || st.Median > 61*time.Second || st.Gaps != gaps {
			t.Errorf("the third poll in %d pages: period %v, %d gaps learned", pages, st.Median, st.Gaps-gaps)
		}
	}
}

// steadyMinute is an Auto that has polled 15 readings a minute apart,
// each a second after it, and the last reading's time.
func steadyMinute() (*schedule.Auto, time.Time) {
	a := schedule.NewAuto(schedule.WithSeed(1))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var last time.Time
	for i := range 15 {
		last = t0.Add(time.Duration(i) * time.Minute)
		a.Next(schedule.Observation{At: last.Add(time.Second), Hit: true, Published: []time.Time{last}})
	}
	return a, last
}
