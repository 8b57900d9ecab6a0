// Package jetstream is slogfeed's NATS JetStream side: today the embedded
// JetStream server that `slogfeed serve --nats-embed` runs inside the
// process (StartEmbedded); in the next stage also the storage backend that
// keeps feeds, items, policy state and pipes in JetStream (see
// docs/cluster.md).
//
// # Embedded server
//
// StartEmbedded runs a nats-server (github.com/nats-io/nats-server/v2 as a
// library) with JetStream enabled, its data under EmbedOptions.StoreDir,
// and returns once it accepts clients and JetStream is ready: for a
// clustered server (ClusterListen set), once the JetStream meta group has
// a leader this server follows. Three processes started with each other's
// cluster addresses in Routes form a replicated cluster. The server logs
// through log/slog, never installs signal handlers, and Shutdown stops it
// and waits for it to finish.
//
// The sub-package jstest starts such servers in-process for tests: a
// single server or a 3-server cluster on loopback ports, with stop and
// restart of one server.
package jetstream
