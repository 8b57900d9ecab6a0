package cluster

import (
	"slices"
	"time"
)

// NodeStatus is one member as GET /api/v1/cluster shows it.
type NodeStatus struct {
	Name     string    `json:"name"`
	Addr     string    `json:"addr,omitempty"`
	Shards   int       `json:"shards"`
	ShardIDs []int     `json:"shard_ids"`
	LastSeen time.Time `json:"last_seen"`
	Live     bool      `json:"live"`
	// Polled is how many feeds the node said it polls at its last
	// member write (MemberInfo.Polled); nil when it did not say.
	Polled *int `json:"-"`
}

// MemberInfo is what a member's key says of it beyond its lease view:
// its HTTP address (empty: none) and how many feeds it polls (nil: not
// said, as by a node of an older version).
type MemberInfo struct {
	Addr   string
	Polled *int
}

// Status is the cluster as one node sees it.
type Status struct {
	Nodes     []NodeStatus `json:"nodes"`
	Shards    int          `json:"shards"`
	Unowned   int          `json:"unowned"`
	LeaseTTLS float64      `json:"lease_ttl_s"`
}

// StatusOf is the cluster as view v shows it: every member with the
// shards its live leases name (this node always listed), and the shards
// no unexpired lease names. info tells a member's key's MemberInfo (nil:
// none).
func StatusOf(v View, t Timing, info func(name string) MemberInfo) Status {
	live := v.Live(t)
	byName := map[string]*NodeStatus{}
	var order []string
	add := func(name string) *NodeStatus {
		if ns, ok := byName[name]; ok {
			return ns
		}
		ns := &NodeStatus{Name: name, ShardIDs: []int{}, Live: slices.Contains(live, name)}
		for _, m := range v.Members {
			if m.Name == name {
				ns.LastSeen = m.Seen
				if info != nil {
					mi := info(name)
					ns.Addr, ns.Polled = mi.Addr, mi.Polled
				}
			}
		}
		byName[name] = ns
		order = append(order, name)
		return ns
	}
	for _, m := range v.Members {
		add(m.Name)
	}
	add(v.Self)
	st := Status{Shards: len(v.Leases), LeaseTTLS: t.TTL.Seconds()}
	for s, l := range v.Leases {
		if l.Holder == "" || v.expired(l, t) {
			st.Unowned++
			continue
		}
		ns := add(l.Holder)
		ns.ShardIDs = append(ns.ShardIDs, s)
		ns.Shards++
	}
	slices.Sort(order)
	for _, name := range order {
		st.Nodes = append(st.Nodes, *byName[name])
	}
	return st
}
