// Package e2e holds the end-to-end tests of a slogfeed cluster and the
// simulated publisher they poll (Publisher). The in-process test runs
// aggregators on three lease nodes over an embedded 3-server JetStream
// cluster (storage/jetstream/jstest); cmd/slogfeed's TestClusterProcesses
// runs three `slogfeed serve --nats-embed` processes against the same
// Publisher. scripts/test runs both after the rest of the suite, one
// package at a time, so that their Raft timing does not compete with it.
package e2e
