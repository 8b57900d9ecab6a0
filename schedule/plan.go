package schedule

import "time"

// MaxPlanMisses is how many polls in a row Auto places on a publisher's
// planned update (Hints.Due) that find nothing new before it stops
// following the publisher's plans; its own prediction takes over until the
// next hit. A publisher whose plans are wrong (or made up) costs a feed at
// most this many extra polls per publish.
const MaxPlanMisses = 3

// plan follows the updates a publisher plans (Hints.Due: a pipe's next
// fetch of the inputs it waits for, a cron trigger). A publisher that
// knows when it will next update knows it better than any statistics over
// its past publishes, so a poll goes right after the planned instant; the
// policy's own prediction stays trained by every hit and takes over when
// the publisher stops planning or its plans keep missing.
type plan struct {
	at     int64 // the instant the last poll placed on a plan aimed at, Unix ns (0: none)
	own    int64 // the policy's own next poll at that time, Unix ns
	misses uint8 // plan-placed polls in a row that found nothing
}

// next returns the poll time after obs: the publisher's planned update
// when it sent one and its plans are trusted, else own (the policy's own
// choice, Unix ns).
func (p *plan) next(obs Observation, own int64) int64 {
	switch {
	case obs.Hit:
		p.misses = 0
	case p.at != 0 && p.misses < MaxPlanMisses:
		p.misses++
	}
	p.at = 0
	if !obs.Hints.HasDue || obs.Hints.Due < 0 || obs.Hints.Due > MaxDelay || p.misses >= MaxPlanMisses {
		return own
	}
	p.at = obs.At.UnixNano() + int64(obs.Hints.Due)
	return p.at
}

// predicted returns the planned update the next poll aims at, if any.
func (p *plan) predicted() (time.Time, bool) {
	if p.at == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, p.at).UTC(), true
}
