// Package e2e holds the end-to-end tests of a slogfeed cluster and the
// simulated publisher they poll (Publisher). The in-process test runs
// aggregators on three lease nodes over an embedded 3-server JetStream
// cluster (storage/jetstream/jstest); cmd/slogfeed's TestClusterProcesses
// runs three `slogfeed serve --nats-embed` processes against the same
// Publisher. scripts/test runs both after the rest of the suite, one
// package at a time, so that their Raft timing does not compete with it.
//
// BenchmarkPolling (not run by the test command: it takes about 15
// minutes) polls one loopback fleet of periodic feeds (aggregator/aggtest)
// with one node on bbolt, one node on one JetStream server and three
// nodes on the 3-server cluster, side by side in one run; its flags run
// the three nodes alone at a million feeds, with the fleet in a process
// of its own, and measure the takeover of a killed node's third.
// TestPollingTakeover runs that path at 300 feeds.
package e2e
