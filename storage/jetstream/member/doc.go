// Package member is what makes a slogfeed process a node of a cluster on
// NATS JetStream: Join starts the embedded JetStream server (when asked,
// as `serve --nats-embed` does), connects to NATS, opens the JetStream
// store (storage/jetstream) and starts the lease node
// (storage/jetstream/lease); Member hands the store to the components as
// a storage.Backend and the lease node as their cluster.Owner, answers
// readiness for /healthz, and leaves the cluster on Close.
//
// This package and the other storage/jetstream packages are the only ones
// that import NATS (nats.go, nats-server). The core packages (aggregator,
// transform, web, plugins, schedule, storage, storage/cluster) do not:
// they see a storage.Backend and a cluster.Owner, and
// storage/cluster's TestCoreLinksNoNATS fails when one of them links a
// NATS package. Only cmd/slogfeed imports this package.
package member
