package eval

import (
	"slices"
	"sort"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/schedule/sim"
)

// The mdpt scenario's books. The outputs a m-of-n republisher owes are set
// by the publishers, not by the policy: walking through every source's
// publishes in time order, a round closes at the publish that makes m
// distinct sources publish since the previous round closed (its close, D).
// A republish at T belongs to the newest round closed by T. It is fresh
// when at least m sources' newest fetched readings were published after
// the previous round's close and are each at least as new as their
// source's newest publish at this round's close (readings of this round,
// each the newest of its source, or newer); otherwise it is stale: it
// fuses a reading that an earlier output already carried, or a source's
// previous publish when a newer one closed into this round.
// A round is produced by the first fresh republish that belongs to it, and
// its latency runs from its close to that republish. A round that no fresh
// republish belongs to (the next one closed first) was never produced.
// Missed rounds and stale republishes are output misses; they are counted
// and reported, never left out silently, and Waits charges every round,
// missed ones included, with the time until the first fresh republish
// after its close.

// mdptTail is how long the policies run past the measured window, so that
// the window's last rounds can be produced; polls in it are not counted.
const mdptTail = 2 * time.Hour

// republisher keeps the books of one mdpt run: what each source has
// delivered, the source polls, and the republishes with the readings they
// fused.
type republisher struct {
	from, end time.Time // the measured window
	items     [][]sim.Item
	period    []time.Duration // per source: its nominal period (for the miss causes only)
	next      []int           // per source: first item not yet fetched
	newest    []time.Time     // per source: publish time of the newest fetched item
	has       []bool          // per source: new data since the last republish (fixed polling's rule)
	m         int
	outs      []output
	res       mdptBook
}

// output is one republish: when, and the publish time of the newest
// reading of each source it fused (zero: none yet).
type output struct {
	at     time.Time
	newest []time.Time
}

// mdptBook is what one mdpt run measured. The embedded sim.Result holds
// the source polls and hits and the produced rounds (Items, Latencies);
// per source its polls and its misses by cause. A poll cannot tell a
// cause from another; the books can, since they see the items: a miss is
// early when the source publishes within half a period after it (the
// reading was still to come), lost otherwise.
type mdptBook struct {
	sim.Result
	SrcPolls, SrcEarly, SrcLost []int
	// Rounds closed by the publishers in the window; Missed of them never
	// produced; Stale republishes, Behind of them stale only because a
	// reading was not its source's newest at the round's close; Outputs,
	// all republishes.
	Rounds, Missed, Stale, Behind, Outputs int
	// Waits: every round's time from its close to the first fresh
	// republish after it (missed rounds included), seconds.
	Waits []float64
}

func newRepublisher(items [][]sim.Item, period []time.Duration, m int, from, end time.Time) *republisher {
	n := len(items)
	return &republisher{
		from: from, end: end, items: items, period: period, m: m,
		next: make([]int, n), newest: make([]time.Time, n), has: make([]bool, n),
		res: mdptBook{SrcPolls: make([]int, n), SrcEarly: make([]int, n), SrcLost: make([]int, n)},
	}
}

// measured reports whether t is in the measured window.
func (r *republisher) measured(t time.Time) bool { return !t.Before(r.from) && t.Before(r.end) }

// poll fetches source i at now and returns the observation.
func (r *republisher) poll(i int, now time.Time) schedule.Observation {
	measured := r.measured(now)
	if measured {
		r.res.Polls++
		r.res.SrcPolls[i]++
	}
	obs := schedule.Observation{At: now}
	its := r.items[i]
	for r.next[i] < len(its) && !its[r.next[i]].Published.After(now) {
		obs.Published = append(obs.Published, its[r.next[i]].Published)
		r.next[i]++
	}
	switch {
	case len(obs.Published) > 0:
		obs.Hit = true
		if measured {
			r.res.Hits++
		}
		r.has[i] = true
		r.newest[i] = obs.Published[len(obs.Published)-1]
	case !measured:
	case r.next[i] < len(its) && its[r.next[i]].Published.Before(now.Add(r.period[i]/2)):
		r.res.SrcEarly[i]++
	default:
		r.res.SrcLost[i]++
	}
	return obs
}

// republish records a republish at now of the newest readings fetched.
func (r *republisher) republish(now time.Time) {
	r.outs = append(r.outs, output{at: now, newest: slices.Clone(r.newest)})
	clear(r.has)
}

// maybeRepublish republishes at now when m sources have new data since the
// last republish (the rule of a republisher that polls on a timer).
func (r *republisher) maybeRepublish(now time.Time) bool {
	n := 0
	for _, h := range r.has {
		if h {
			n++
		}
	}
	if n < r.m {
		return false
	}
	r.republish(now)
	return true
}

// publisherRounds returns the closes of the rounds the publishers set:
// walking through every source's publishes in time order (ties by source
// index), a round closes at the publish that makes m distinct sources
// publish since the previous close.
func publisherRounds(items [][]sim.Item, m int) []time.Time {
	next := make([]int, len(items))
	seen := make([]bool, len(items))
	var closes []time.Time
	k := 0
	for {
		src := -1
		for i, its := range items {
			if next[i] < len(its) && (src < 0 || its[next[i]].Published.Before(items[src][next[src]].Published)) {
				src = i
			}
		}
		if src < 0 {
			return closes
		}
		t := items[src][next[src]].Published
		next[src]++
		if !seen[src] {
			seen[src] = true
			k++
		}
		if k == m {
			closes = append(closes, t)
			clear(seen)
			k = 0
		}
	}
}

// close settles the books against the rounds the publishers set; horizon
// is when the run stopped (a round never produced by then waits until it).
func (r *republisher) close(horizon time.Time) mdptBook {
	closes := publisherRounds(r.items, r.m)
	produced := make([]bool, len(closes))
	lat := make([]float64, len(closes))
	var fresh []time.Time // times of the fresh republishes, in order
	for _, o := range r.outs {
		// The newest round closed by o.at.
		k := sort.Search(len(closes), func(i int) bool { return closes[i].After(o.at) }) - 1
		if k < 0 {
			continue
		}
		var prev time.Time
		if k > 0 {
			prev = closes[k-1]
		}
		n, behind := 0, 0
		for i, t := range o.newest {
			if t.IsZero() || !t.After(prev) {
				continue
			}
			if t.Before(r.lastAt(i, closes[k])) {
				// A reading of this round, but the source published
				// again before the round closed: the output would fuse
				// the previous publish.
				behind++
				continue
			}
			n++
		}
		if r.measured(o.at) {
			r.res.Outputs++
		}
		if n < r.m {
			if r.measured(o.at) {
				r.res.Stale++
				if n+behind >= r.m {
					r.res.Behind++
				}
			}
			continue
		}
		fresh = append(fresh, o.at)
		if !produced[k] {
			produced[k], lat[k] = true, o.at.Sub(closes[k]).Seconds()
		}
	}
	for k, d := range closes {
		if !r.measured(d) {
			continue
		}
		r.res.Rounds++
		if produced[k] {
			r.res.Items++
			r.res.Latencies = append(r.res.Latencies, lat[k])
		} else {
			r.res.Missed++
		}
		j, _ := slices.BinarySearchFunc(fresh, d, time.Time.Compare)
		w := horizon.Sub(d).Seconds()
		if j < len(fresh) {
			w = fresh[j].Sub(d).Seconds()
		}
		r.res.Waits = append(r.res.Waits, w)
	}
	return r.res
}

// lastAt returns the publish time of source i's newest item published at
// or before t (zero: none).
func (r *republisher) lastAt(i int, t time.Time) time.Time {
	its := r.items[i]
	j := sort.Search(len(its), func(j int) bool { return its[j].Published.After(t) }) - 1
	if j < 0 {
		return time.Time{}
	}
	return its[j].Published
}

// mergeBooks adds up the books of several runs.
func mergeBooks(bs []mdptBook) mdptBook {
	var out mdptBook
	rs := make([]sim.Result, len(bs))
	for k, b := range bs {
		rs[k] = b.Result
		if out.SrcPolls == nil {
			n := len(b.SrcPolls)
			out.SrcPolls, out.SrcEarly, out.SrcLost = make([]int, n), make([]int, n), make([]int, n)
		}
		for i := range b.SrcPolls {
			out.SrcPolls[i] += b.SrcPolls[i]
			out.SrcEarly[i] += b.SrcEarly[i]
			out.SrcLost[i] += b.SrcLost[i]
		}
		out.Rounds += b.Rounds
		out.Missed += b.Missed
		out.Stale += b.Stale
		out.Behind += b.Behind
		out.Outputs += b.Outputs
		out.Waits = append(out.Waits, b.Waits...)
	}
	out.Result = sim.Merge(rs...)
	return out
}

// outputHitPct is the share of the owed outputs that were produced fresh,
// a stale republish counting as one more miss.
func (b mdptBook) outputHitPct() float64 {
	if b.Rounds+b.Stale == 0 {
		return 0
	}
	return 100 * float64(b.Rounds-b.Missed) / float64(b.Rounds+b.Stale)
}
