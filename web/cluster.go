package web

import (
	"net/http"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
)

// ClusterNode is one node of GET /api/v1/cluster: its lease status and
// how many remote feeds its shards hold (the feeds it polls).
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
	// those in shards no live lease names (nobody polls them now).
	Feeds        int `json:"feeds"`
	UnownedFeeds int `json:"unowned_feeds"`
}

// Cluster modes of ClusterStatus.
const (
	ModeCluster = "cluster"
	ModeSingle  = "single"
)

// clusterStatus builds the status from the lease view st (nil for a
// single node, named node) and the store's remote feeds.
func clusterStatus(st *cluster.Status, feeds []storage.Feed, node string, now time.Time) ClusterStatus {
	remote := 0
	for _, f := range feeds {
		if f.Kind == storage.KindRemote {
			remote++
		}
	}
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
	for _, f := range feeds {
		if f.Kind != storage.KindRemote {
			continue
		}
		if i, ok := holder[cluster.ShardOf(cluster.KindFeed, f.ID, st.Shards)]; ok {
			out.Nodes[i].Feeds++
		} else {
			out.UnownedFeeds++
		}
	}
	return out
}

// cluster answers GET /api/v1/cluster.
func (a *api) cluster(w http.ResponseWriter, r *http.Request) {
	feeds, err := a.store.Feeds()
	if err != nil {
		a.internal(w, err)
		return
	}
	var st *cluster.Status
	if a.clusterStatus != nil {
		s := a.clusterStatus()
		st = &s
	}
	respondJSON(w, http.StatusOK, clusterStatus(st, feeds, a.node, a.now()))
}
