package cluster

import "time"

// maxAcks bounds the acknowledgements an Acks remembers: a node renews
// about a lease a tick and its member key every Renew, so this covers
// more than a TTL of writes at any shard count up to a few hundred.
const maxAcks = 256

// Acks remembers when this node's own writes to the lease bucket were
// acknowledged, by revision, so that a value the bucket's watch delivers
// late can be dated by them (SeenAt). The zero value is ready; it is not
// safe for concurrent use.
type Acks struct {
	marks []ack // in the order added
}

type ack struct {
	rev uint64
	at  time.Time
}

// Add notes that a write of this node was acknowledged at revision rev,
// the acknowledgement received at at.
func (a *Acks) Add(rev uint64, at time.Time) {
	if len(a.marks) == maxAcks {
		a.marks = append(a.marks[:0], a.marks[1:]...)
	}
	a.marks = append(a.marks, ack{rev, at})
}

// SeenAt is the observation time of a value stored at revision rev that
// the watch delivers at now: now, or earlier when this node received the
// acknowledgement of a later revision before now. The bucket orders its
// writes, so that value was stored before the later one was
// acknowledged: counting its age from then keeps expiry safe (a holder
// stops acting TTL−Margin after it sent the write, which is before it
// was stored) while a watch that lags (its consumer lost with a server)
// does not make every value it catches up on look fresh and delay
// takeovers by the lag.
func (a *Acks) SeenAt(rev uint64, now time.Time) time.Time {
	seen := now
	for _, m := range a.marks {
		if m.rev > rev && m.at.Before(seen) {
			seen = m.at
		}
	}
	return seen
}
