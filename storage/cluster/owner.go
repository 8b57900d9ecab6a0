package cluster

// Owner answers "is this mine?" for the aggregator and the pipe runner: a
// clustered node (the lease node of storage/jetstream/lease) owns the feeds and pipes of the shards it leases;
// a single slogfeed (Everything) owns all of them. Changed's channel is
// closed when the answers may have changed; callers then re-check what
// they run (start polling feeds they now own, stop the others).
type Owner interface {
	OwnsFeed(id uint64) bool
	OwnsPipe(id uint64) bool
	Changed() <-chan struct{}
}

// Everything is the Owner of a single-node slogfeed: it owns every feed
// and pipe, and its answers never change.
var Everything Owner = everything{}

type everything struct{}

func (everything) OwnsFeed(uint64) bool { return true }
func (everything) OwnsPipe(uint64) bool { return true }

// Changed returns nil: a receive from it blocks forever.
func (everything) Changed() <-chan struct{} { return nil }

// Lapser is an Owner by shards that tells a shard whose lease lapsed
// (the lease node of storage/jetstream/lease): this process wrote the
// lease its view holds, but its last successful renewal is too old for
// it to act on the shard (Lapsed in decide.go), as when lease writes
// time out for a few seconds. tenure counts this node's claim attempts
// on the shard, as the node's Tenure does. When the shard is owned again
// with the tenure it lapsed with, no other node held it meanwhile: the
// only writes naming this process are its own claims and renewals; a
// renewal only succeeds at a revision this process wrote; every claim
// attempt (one whose answer timed out too: it may have landed) starts a
// new tenure. So another holder's write in between would have been
// followed by a claim of this process, and a new tenure. Lapsed is false
// for a shard owned now, one another node holds in the view, one this
// node gave back or whose renewal was refused, and once the node
// stopped. Changed fires when the lapsed shards change too.
type Lapser interface {
	Lapsed(shard int) (tenure uint64, ok bool)
	// Holds tells every shard (by index) from one reading of the view,
	// so that a renewal or a loss between two questions cannot make a
	// shard look neither owned nor lapsed.
	Holds() []Hold
}

// Hold is one shard as a Lapser's view shows it: Owned (the node may act
// on it), Lapsed (Lapser.Lapsed), and the node's tenure of it.
type Hold struct {
	Owned, Lapsed bool
	Tenure        uint64
}
