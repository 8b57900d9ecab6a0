// Package cluster is the pure half of how slogfeed splits its work over
// the nodes of a cluster: a fixed number of shards, each feed and pipe in
// one shard by a hash of its ID (ShardOf), the lease policy (Decide), and
// the question the aggregator and the pipe runner ask (Owner: "is this
// feed, this pipe mine?"; Everything on a single node). docs/cluster.md
// has the design, its failure modes and its guarantees.
//
// This package imports no NATS package, nor any package that does: the
// aggregator, the pipe runner and the web server depend on it, and a
// single slogfeed on bbolt must not link a NATS server
// (TestCoreLinksNoNATS checks it for every core package). The driver that
// holds the leases in a JetStream KV bucket is storage/jetstream/lease;
// storage/jetstream/member starts a whole cluster node.
//
// Decide is the whole lease policy, pure and clock-driven: given a View
// (now, the lease table with when this node saw each revision, the member
// keys, whether KV writes succeed, and when this node last renewed each
// of its leases) it returns a Plan of renewals, releases and claims.
// Owned says which shards a view lets the node act on, Lapsed which of its
// leases ran out without another node's claim in view; ResumeSeen is how
// observation times are carried over a KV outage; NextExpiry is when the
// plan next changes with the clock; Acks dates the values a lagging
// watch delivers; StatusOf is the cluster as a view shows it.
//
// # Lease rules
//
//   - A lease is expired for a node once that node has seen the same
//     revision for a whole TTL while its own writes succeed; expiry is
//     measured on the observer's clock, so clock skew does not matter.
//     A revision is seen when the watch delivers it, or when the node
//     received the acknowledgement of one of its own writes of a later
//     revision if that came first (Acks): the bucket orders writes, so
//     that bounds when the value was stored, and a watch that lags does
//     not delay takeovers by its lag.
//   - The holder acts on a shard until TTL−Margin after it sent its last
//     successful renewal; renewals go out every Timing.Renew (TTL/3).
//   - While writes fail (no bucket leader, no server) nothing is claimed
//     or released; when they succeed again, every value not yet expired
//     when they began failing expires no sooner than Timing.ResumeGrace
//     after they succeed again, so holders get time to renew: a JetStream
//     re-election moves no lease, and a holder that died meanwhile loses
//     its shards that grace after the bucket is back.
//   - Every node aims at floor(n/m)…ceil(n/m) of n shards among m live
//     members (members whose key was written within TTL); a stable cluster
//     inside that range writes nothing but renewals.
//
// # Tests
//
// decide_test.go pins Decide, Owned, Lapsed, Share, ResumeSeen, NextExpiry, ShardOf and
// ValidNodeName with tables; sim_test.go runs Decide for several nodes on
// a fake clock over an in-memory compare-and-set table through start, two
// stable minutes, a kill, a join, a 6 s bucket outage, a partition, an
// outage noticed unevenly and a node dying with the bucket's leader,
// checking every 500 ms that no shard has two owners, and a survivor
// whose watch lags, with and without dating by Acks; acks_test.go pins
// Acks.SeenAt. deps_test.go fails when a core package links NATS.
package cluster
