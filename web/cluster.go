package web

import (
	"net/http"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
)

// ClusterNode is one node of GET /api/v1/cluster: its lease status and
// how many remote feeds its shards hold (the feeds it polls): as the node
// said at its last member write, or counted from the feed records when
// some node holding shards does not say (see ClusterStatus.Feeds).
type ClusterNode struct {
	cluster.NodeStatus
	Feeds int `json:"feeds"`
}

// ClusterStatus is the answer of GET /api/v1/cluster. Mode is "cluster"
// for a node of a NATS cluster and "single" for a single slogfeed (bbolt),
// which answers one live node owning the one shard and every feed, with
// lease_ttl_s 0: there are no leases.
type ClusterStatus struct {
	Mode      string        `json:"mode"`
	Nodes     []ClusterNode `json:"nodes"`
	Shards    int           `json:"shards"`
	Unowned   int           `json:"unowned"`
	LeaseTTLS float64       `json:"lease_ttl_s"`
	// Feeds counts the remote feeds of the whole cluster; UnownedFeeds
	// those in shards no live lease names (nobody polls them now). When
	// every node holding shards says how many feeds it polls (its member
	// key, written every lease renewal), Feeds is the sum of those and
	// no feed record is read; UnownedFeeds then counts the feed IDs the
	// store lists in the unowned shards, of any kind, and may include
	// deleted feeds: an upper bound while a shard waits for an owner.
	Feeds        int `json:"feeds"`
	UnownedFeeds int `json:"unowned_feeds"`
	// ThisNode is what the node that answers polls, from its polling
	// service (absent on a server without one).
	ThisNode *ThisNode `json:"this_node,omitempty"`
	// Warning says why the answering node's view may be stale: it cannot
	// take writes (what /healthz answers 503 for: no quorum, NATS down),
	// so the leases it shows, its own included, are what it last saw.
	Warning string `json:"warning,omitempty"`
}

// ThisNode is the answering node's own view of the feeds of its shards
// (aggregator.OwnershipStatus): how many it polls, and how far it has
// come in scheduling the feeds of the last change of its shards (a
// takeover, a release, its start).
type ThisNode struct {
	Name string `json:"name"`
	// Polled counts the feeds this node schedules.
	Polled int `json:"polled"`
	// Pending counts the feeds of its shards listed and not scheduled
	// yet; Failed those whose policy cannot be built.
	Pending int `json:"pending"`
	Failed  int `json:"failed"`
	// Deferred counts the feeds scheduled from their shard's schedule
	// digest whose records (learned policy states) are not read yet.
	Deferred int `json:"deferred"`
	// Parked counts the feeds of shards whose lease lapsed (renewals too
	// old, no other holder seen): counted in Polled, kept with their
	// learned state, not fetched until a renewal succeeds.
	Parked int `json:"parked"`
	// Loading is true while the last change is not loaded: Pending may
	// still be 0 while the change's feeds are being listed, and is 0
	// once they are all scheduled while Deferred ones are read.
	Loading bool `json:"loading"`
	// Changed is when the node saw the change; Loaded when every feed
	// it listed was scheduled (absent while loading); LoadS how long the
	// last change that was loaded took.
	Changed time.Time `json:"changed,omitzero"`
	Loaded  time.Time `json:"loaded,omitzero"`
	LoadS   float64   `json:"load_s"`
	// Taken and Lost count the feeds scheduled here and dropped since
	// Changed.
	Taken int `json:"taken"`
	Lost  int `json:"lost"`
	// feeds is the count the node reports in its member key
	// (aggregator.OwnershipStatus.Feeds), for the cluster's status.
	feeds int
}

// ownershipReporter is an Aggregator that reports its node's ownership
// (aggregator.Service).
type ownershipReporter interface {
	Ownership() aggregator.OwnershipStatus
}

// thisNode is the answering node's figures, or nil without a polling
// service that reports them.
func thisNode(agg Aggregator, name string) *ThisNode {
	o, ok := agg.(ownershipReporter)
	if !ok {
		return nil
	}
	st := o.Ownership()
	return &ThisNode{
		Name: name, Polled: st.Polled, Pending: st.Pending, Failed: st.Failed, Deferred: st.Deferred, Parked: st.Parked, Loading: st.Loading(),
		Changed: st.Changed, Loaded: st.Loaded, LoadS: st.Took.Seconds(), Taken: st.Taken, Lost: st.Lost,
		feeds: st.Feeds(),
	}
}

// Cluster modes of ClusterStatus.
const (
	ModeCluster = "cluster"
	ModeSingle  = "single"
)

// clusterStatus builds the status from the lease view st (nil for a
// single node, named node) and the store's remote feeds.
func clusterStatus(st *cluster.Status, remoteIDs []uint64, node string, now time.Time) ClusterStatus {
	remote := len(remoteIDs)
	if st == nil {
		return ClusterStatus{
			Mode: ModeSingle,
			Nodes: []ClusterNode{{
				NodeStatus: cluster.NodeStatus{Name: node, Shards: 1, ShardIDs: []int{0}, LastSeen: now, Live: true},
				Feeds:      remote,
			}},
			Shards: 1,
			Feeds:  remote,
		}
	}
	out := ClusterStatus{Mode: ModeCluster, Shards: st.Shards, Unowned: st.Unowned, LeaseTTLS: st.LeaseTTLS, Feeds: remote}
	holder := make(map[int]int, st.Shards) // shard → index in out.Nodes
	for i, n := range st.Nodes {
		out.Nodes = append(out.Nodes, ClusterNode{NodeStatus: n})
		for _, s := range n.ShardIDs {
			holder[s] = i
		}
	}
	if out.Nodes == nil {
		out.Nodes = []ClusterNode{}
	}
	if st.Shards <= 0 {
		return out
	}
	for _, id := range remoteIDs {
		if i, ok := holder[cluster.ShardOf(cluster.KindFeed, id, st.Shards)]; ok {
			out.Nodes[i].Feeds++
		} else {
			out.UnownedFeeds++
		}
	}
	return out
}

// reportedStatus builds the status of a cluster (st) from what each node
// holding shards said it polls in its member key (this node's own from
// this, its live figures), without reading the feeds: ok is false when a
// node holding shards did not say (a node of an older version), when
// the shards do not add up, or when some shards are unowned and the
// store cannot list its feed IDs to count theirs. The feeds of unowned
// shards are counted from the store's feed IDs, whose listing may hold
// deleted feeds (storage.FeedIDLister).
func reportedStatus(st cluster.Status, this *ThisNode, store Store) (ClusterStatus, bool) {
	out := ClusterStatus{Mode: ModeCluster, Shards: st.Shards, Unowned: st.Unowned, LeaseTTLS: st.LeaseTTLS, Nodes: []ClusterNode{}}
	owned := 0
	for _, n := range st.Nodes {
		cn := ClusterNode{NodeStatus: n}
		owned += n.Shards
		switch {
		case this != nil && n.Name == this.Name:
			cn.Feeds = this.feeds
		case n.Shards == 0:
			// It polls no shard's feeds: what it last said is a dead
			// node's, or from before it handed its shards over.
		case n.Polled != nil:
			cn.Feeds = *n.Polled
		default:
			return ClusterStatus{}, false
		}
		out.Feeds += cn.Feeds
		out.Nodes = append(out.Nodes, cn)
	}
	if st.Shards <= 0 || owned+st.Unowned != st.Shards {
		return ClusterStatus{}, false
	}
	if st.Unowned == 0 {
		return out, true
	}
	lister, ok := store.(storage.FeedIDLister)
	if !ok {
		return ClusterStatus{}, false
	}
	ids, err := lister.FeedIDs()
	if err != nil {
		return ClusterStatus{}, false
	}
	held := make([]bool, st.Shards)
	for _, n := range st.Nodes {
		for _, s := range n.ShardIDs {
			if s >= 0 && s < st.Shards {
				held[s] = true
			}
		}
	}
	for _, id := range ids {
		if !held[cluster.ShardOf(cluster.KindFeed, id, st.Shards)] {
			out.UnownedFeeds++
		}
	}
	out.Feeds += out.UnownedFeeds
	return out, true
}

// cluster answers GET /api/v1/cluster. On a cluster whose nodes say how
// many feeds they poll it reads no feed records (at a million feeds that
// read takes seconds, and waits for the defs bucket's leader); else it
// counts the remote feeds of each node's shards from the records.
func (a *api) cluster(w http.ResponseWriter, r *http.Request) {
	this := thisNode(a.agg, a.node)
	warning := ""
	if a.ready != nil {
		if err := a.ready(); err != nil {
			warning = "this node cannot take writes (" + err.Error() + "): the leases shown are what it last saw"
		}
	}
	var st *cluster.Status
	if a.clusterStatus != nil {
		s := a.clusterStatus()
		st = &s
		if out, ok := reportedStatus(s, this, a.store); ok {
			out.ThisNode, out.Warning = this, warning
			respondJSON(w, http.StatusOK, out)
			return
		}
	}
	ids, err := remoteFeedIDs(a.store)
	if err != nil {
		a.internal(w, err)
		return
	}
	out := clusterStatus(st, ids, a.node, a.now())
	out.ThisNode, out.Warning = this, warning
	respondJSON(w, http.StatusOK, out)
}

// remoteFeedIDs lists the remote feeds' IDs: from the store's in-memory
// summaries when it keeps them (a walk that reads no record), else from
// every feed record.
func remoteFeedIDs(st Store) ([]uint64, error) {
	var ids []uint64
	if sum, ok := st.(storage.Summaries); ok {
		err := sum.EachFeedSummary(func(f *storage.FeedSummary) bool {
			if f.Kind == storage.KindRemote {
				ids = append(ids, f.ID)
			}
			return true
		})
		return ids, err
	}
	feeds, err := st.Feeds()
	for _, f := range feeds {
		if f.Kind == storage.KindRemote {
			ids = append(ids, f.ID)
		}
	}
	return ids, err
}
