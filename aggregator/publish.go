package aggregator

import (
	"slices"
	"time"

	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/storage"
)

// Publish-time estimation. DPT learns from publish times, not fetch times,
// so every new item needs the best estimate of when it became visible in
// the feed. Sources, best first (DESIGN.md):
//
//  1. The publisher's phase hint (Slogfeed-Phase): the newest item was
//     published at ReceivedAt − Phase. The other items keep their spacing:
//     their own dates are shifted by the same correction (newest estimate −
//     newest own date), which also removes any offset between the two
//     clocks. Items without a date get the newest estimate.
//  2. The HTTP Last-Modified, for the newest item, when it lies in the
//     bracket (below). It is skipped when it equals the server's Date
//     (±1 s) and the newest item has a plausible date of its own: the
//     server then stamps every response with "now", which says nothing
//     about publishing.
//  3. The item's own date, when plausible: within the bracket, allowing
//     clockSkew either side.
//  4. Otherwise the midpoint of the bracket (previous poll, this poll]: the
//     item was not there at the previous poll and is there now. On a
//     feed's first poll there is no bracket and the estimate is the poll
//     time.
//
// The bracket rule is deliberately simple: an item that is new now but
// dated before the previous poll became visible after that poll (late
// publication, a backdated or clock-skewed date), so its date understates
// its publish time. No estimate is later than ReceivedAt, and no other
// item's estimate is later than the newest item's.

// clockSkew is the tolerance between the publisher's clock and slogfeed's.
const clockSkew = time.Minute

// PublishTimes returns, for the new items of one fetch, the estimate of
// each one's publish time, sorted oldest first (for
// schedule.Observation.Published). It sets each item's Published to its
// estimate when the item had no plausible date (its own date, if any, then
// goes to OwnDate; an item with none is marked Undated), and a reading's
// zero Time to the item's publish time. prevPoll is the time of the
// feed's previous poll (zero on the first).
func PublishTimes(resp *fetcher.Response, items []storage.Item, prevPoll time.Time) []time.Time {
	if len(items) == 0 {
		return nil
	}
	if resp == nil {
		resp = &fetcher.Response{}
	}
	at := resp.ReceivedAt

	own := make([]time.Time, len(items)) // plausible own dates, else zero
	newest, newestRaw := -1, -1
	for i := range items {
		d := items[i].Published
		if d.IsZero() {
			continue
		}
		if newestRaw < 0 || d.After(items[newestRaw].Published) {
			newestRaw = i
		}
		if ownPlausible(d, at, prevPoll) {
			own[i] = clampAt(d, at)
			if newest < 0 || own[i].After(own[newest]) {
				newest = i
			}
		}
	}

	est := make([]time.Time, len(items))
	switch {
	case resp.Hints.HasPhase && resp.Hints.Phase >= 0 && !at.IsZero():
		tp := at.Add(-resp.Hints.Phase)
		var corr time.Duration
		if newestRaw >= 0 {
			corr = tp.Sub(items[newestRaw].Published)
		}
		for i := range items {
			est[i] = tp
			if d := items[i].Published; !d.IsZero() && newestRaw >= 0 {
				est[i] = minTime(d.Add(corr), tp)
			}
		}
	case lastModifiedUsable(resp, at, prevPoll, newest >= 0):
		tp := clampAt(resp.LastModifiedTime, at)
		top := newest
		if top < 0 {
			top = 0 // feeds list the newest item first
		}
		mid := bracketMid(prevPoll, at)
		for i := range items {
			switch {
			case i == top:
				est[i] = tp
			case !own[i].IsZero():
				est[i] = minTime(own[i], tp)
			default:
				est[i] = minTime(mid, tp)
			}
		}
	default:
		mid := bracketMid(prevPoll, at)
		for i := range items {
			est[i] = own[i]
			if est[i].IsZero() {
				est[i] = mid
			}
		}
	}

	for i := range items {
		if own[i].IsZero() && !est[i].IsZero() {
			// A date of its own that is not plausible is kept aside for
			// retention (storage.Item.OwnDate).
			// Without any, the item is marked undated for the store's
			// set of dropped items (storage.Item.IsUndated).
			items[i].OwnDate = items[i].Published
			items[i].Undated = items[i].Published.IsZero()
			items[i].Published = est[i]
		}
		if r := items[i].Reading; r != nil && r.Time.IsZero() {
			r.Time = items[i].Published
		}
	}
	out := slices.Clone(est)
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// ownPlausible reports whether an item's own date d can be its publish
// time: not after the poll and not before the previous poll, clockSkew
// allowed either side.
func ownPlausible(d, at, prevPoll time.Time) bool {
	if !at.IsZero() && d.After(at.Add(clockSkew)) {
		return false
	}
	return prevPoll.IsZero() || !d.Before(prevPoll.Add(-clockSkew))
}

// lastModifiedUsable reports whether Last-Modified can stand for the
// newest item's publish time.
func lastModifiedUsable(resp *fetcher.Response, at, prevPoll time.Time, haveOwn bool) bool {
	lm := resp.LastModifiedTime
	if lm.IsZero() || !ownPlausible(lm, at, prevPoll) {
		return false
	}
	if haveOwn && !resp.Date.IsZero() {
		if d := resp.Date.Sub(lm); d <= time.Second && d >= -time.Second {
			return false // stamped with "now" by a dynamic server
		}
	}
	return true
}

// bracketMid is the midpoint of (prevPoll, at], or at without a previous
// poll.
func bracketMid(prevPoll, at time.Time) time.Time {
	if prevPoll.IsZero() || at.IsZero() || !prevPoll.Before(at) {
		return at
	}
	return prevPoll.Add(at.Sub(prevPoll) / 2)
}

// clampAt returns t, or at when t is later (and at is known).
func clampAt(t, at time.Time) time.Time {
	if !at.IsZero() && t.After(at) {
		return at
	}
	return t
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
