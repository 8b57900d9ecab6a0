// Package e2e holds the in-process end-to-end tests of a slogfeed
// cluster: aggregators on three lease nodes over an embedded 3-server
// JetStream cluster (storage/jetstream/jstest), polling a loopback
// publisher of simulated feeds. It has no code of its own; scripts/test
// runs it with the other cluster packages, one at a time, so that its
// Raft timing does not compete with the rest of the suite.
package e2e
