// Package lease holds a cluster node's leases on shards in a JetStream KV
// bucket: Node is the driver of storage/cluster's pure lease policy. It
// watches the bucket, keeps the node's View, runs cluster.Decide every
// tick and carries the plan out with compare-and-set writes (KV Create
// for free shards, Update at the revision read for held ones, Delete with
// a revision check for releases). Node is the cluster.Owner the
// aggregator and the pipe runner of a cluster node ask "is this mine?"
// and whose Changed they follow, and the cluster.Lapser that tells the
// aggregator which of its shards lapsed (renewals too old, no other
// holder in view) and under which tenure.
//
// This package may import NATS (nats.go, and storage/jetstream, which
// embeds nats-server); no core package may import it (storage/cluster's
// TestCoreLinksNoNATS). storage/jetstream/member starts it for
// `slogfeed serve --nats`.
//
// A node writes its due renewals concurrently, 16 at a time, and starts
// no more once one fails for want of the bucket, so a round that meets a
// bucket without a leader costs one WriteTimeout, not one per 16 leases.
// Claims and releases go one at a time. While writes fail the node writes
// only its member key, 250 ms (Tick/4) after the last attempt returned,
// each bounded by 500 ms (Tick/2); the first that succeeds, or the watcher
// delivering one that timed out but was applied, makes the node renew
// every overdue lease at once. It thus notices the bucket's new leader
// within about a Tick, inside the grace cluster.ResumeSeen gives holders.
// Besides its tick, a node re-decides the moment a lease or member key it
// watches expires (cluster.NextExpiry), so a dead node's shards are
// claimed then, not up to a tick later.
//
// Start retries what a forming cluster leaves unanswered (the shard count
// written or read, the member key) within its context: a write sent to a
// stream leader that steps down is never answered, and a KV read may be
// answered by a replica that has not applied the key yet.
//
// Node names must be unique: the member key is written at its last
// revision. A process that starts while another instance renews the key
// of its name fails to start with cluster.ErrDuplicateNode (it watches
// the key for a lease TTL and a Renew to tell a live process from a
// killed one's key); two that start at once make one of them stop with
// it.
//
// # Bucket
//
//	config         {"shards":N}, written once by the first node
//	node.<name>    a member: name, instance, address, start, shards held
//	shard.<NNNN>   a shard's lease: holder name and instance
//
// # Tests
//
// node_test.go runs Nodes against in-process JetStream servers
// (storage/jetstream/jstest): three nodes on a 3-server cluster share 16
// shards evenly, move nothing over two renewal periods, and a node killed
// without releasing has its shards owned again within 15 s; stopping the
// server that leads the lease bucket changes no node's shards over the
// following TTL + 2 s; with two of three servers down past a TTL every
// write fails, and afterwards every node renews the leases it had; a
// clean Close hands the shards over at once; a second shard count and a
// duplicate name are refused. lapse_test.go follows Lapsed on a node
// whose clock runs ahead: leases that lapse while writes fail and are
// renewed under the same tenure, and a lapsed lease another node claims
// (no longer lapsed as soon as the watch delivers the claim; claimed back
// later under a new tenure, also when the claim lands but its answer
// times out). bench_test.go's BenchmarkFailover measures
// lease failover over repeated kills; scale_test.go's BenchmarkManyFeeds
// measures the store and the leases with many feeds over three nodes.
package lease
