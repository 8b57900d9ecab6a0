package schedule

import (
	"slices"
	"sort"
	"time"
)

// Oracle is the physical limit of polling: it knows the publisher's future
// publish times and polls exactly at each one, so every poll is a hit and
// every item is fetched with zero latency. It is the lower bound the
// evaluation plots other policies against (the "ideal" curve of Park &
// Heidemann's comparisons); it cannot exist outside a simulation.
//
// Items published at the same instant are fetched by one poll. When no
// publish time is left, or the next one is more than MaxDelay away, the
// policy polls MaxDelay after the previous poll, like every policy.
type Oracle struct {
	pubs []time.Time // ascending
}

// NewOracle returns an oracle for the given publish times. It keeps a sorted
// copy; the caller's slice is not modified.
func NewOracle(publishes []time.Time) *Oracle {
	pubs := slices.Clone(publishes)
	slices.SortFunc(pubs, func(a, b time.Time) int { return a.Compare(b) })
	return &Oracle{pubs: pubs}
}

// Name returns the eval name, "oracle".
func (o *Oracle) Name() string { return "oracle" }

// Start implements Starter: the first publish time at or after now.
func (o *Oracle) Start(now time.Time) time.Time {
	i := sort.Search(len(o.pubs), func(i int) bool { return !o.pubs[i].Before(now) })
	return o.at(now, i)
}

// Next implements Policy: the first publish time strictly after obs.At.
func (o *Oracle) Next(obs Observation) time.Time {
	i := sort.Search(len(o.pubs), func(i int) bool { return o.pubs[i].After(obs.At) })
	return o.at(obs.At, i)
}

func (o *Oracle) at(now time.Time, i int) time.Time {
	if i == len(o.pubs) {
		return now.Add(MaxDelay)
	}
	return clampNext(now, o.pubs[i])
}
