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
