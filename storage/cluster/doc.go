// Package cluster splits slogfeed's work over the nodes of a cluster: a
// fixed number of shards, each feed and pipe in one shard by a hash of its
// ID (ShardOf), and leases on shards held in a JetStream KV bucket. Only a
// shard's owner polls its feeds and runs its pipes; the aggregator and the
// pipe runner ask Node.OwnsFeed / Node.OwnsPipe and wait on Node.Changed.
// docs/cluster.md has the design, its failure modes and its guarantees.
//
// # Two halves
//
// Decide is the whole policy, pure and clock-driven: given a View (now,
// the lease table with when this node saw each revision, the member keys,
// whether KV writes succeed, and when this node last renewed each of its
// leases) it returns a Plan of renewals, releases and claims. Owned says
// which shards a view lets the node act on; ResumeSeen is how observation
// times are carried over a KV outage. Node is the thin driver: it watches
// the bucket, keeps the view, runs Decide every tick and carries the plan
// out with compare-and-set writes (KV Create for free shards, Update at
// the revision read for held ones, Delete with a revision check for
// releases).
//
// # Lease rules
//
//   - A lease is expired for a node once that node has seen the same
//     revision for a whole TTL while its own writes succeed; expiry is
//     measured on the observer's clock, so clock skew does not matter.
//   - The holder acts on a shard until TTL−Margin after it sent its last
//     successful renewal; renewals go out every Timing.Renew (TTL/3).
//   - While writes fail (no bucket leader, no server) nothing is claimed
//     or released; when they succeed again, every value not yet expired
//     when they began failing counts as seen afresh, so holders get a
//     whole TTL to renew: a JetStream re-election moves no lease.
//   - Every node aims at floor(n/m)…ceil(n/m) of n shards among m live
//     members (members whose key was written within TTL); a stable cluster
//     inside that range writes nothing but renewals.
//
// A node writes its due renewals concurrently, 16 at a time, so a write
// that hangs while the bucket has no leader costs one WriteTimeout, not
// one per lease. Claims and releases go one at a time.
//
// Node names must be unique: the member key is written at its last
// revision, and a second process with the same name makes one of them
// stop with ErrDuplicateNode.
//
// `slogfeed serve --nats` (cmd/slogfeed/cluster.go) starts a Node and
// passes it as the Owner of the aggregator (aggregator.ServiceOptions)
// and of the pipe runner (runner.Options), which poll and run only what
// their node owns and follow Changed; storage/cluster/e2e and
// cmd/slogfeed's TestClusterProcesses kill a node under them.
//
// # Tests
//
// decide_test.go pins Decide, Owned, Share, ResumeSeen, ShardOf and
// ValidNodeName with tables; sim_test.go runs Decide for several nodes on
// a fake clock over an in-memory compare-and-set table through start, two
// stable minutes, a kill, a join, a 6 s bucket outage and a partition,
// checking every 500 ms that no shard has two owners. node_test.go runs
// Nodes against in-process JetStream servers (storage/jetstream/jstest):
// three nodes on a 3-server cluster share 16 shards evenly, move nothing
// over two renewal periods, and a node killed without releasing has its
// shards owned again within 15 s (about TTL after its last renewal, 9 s in
// recorded runs); stopping the server that leads the lease bucket changes
// no node's shards over the following TTL + 2 s; with two of three
// servers down past a TTL every write fails, and afterwards every node
// renews the leases it had; a clean Close hands the shards over at once;
// a second shard count and a duplicate name are refused. bench_test.go's
// BenchmarkFailover measures lease failover over repeated kills.
package cluster
