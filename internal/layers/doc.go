// Package layers holds the rules of slogfeed's package layout and the test
// that enforces them. It has no code of its own.
//
// From the bottom up, each package may import only the slogfeed packages
// below it:
//
//	feedext, reader/sanitize  shared vocabulary and the sanitiser: import
//	                          no slogfeed package
//	schedule/...              when to fetch: pure policies, the scheduler,
//	                          simulation and evaluation; imports only
//	                          itself
//	storage                   the data model and the bbolt store
//	reader/fetcher            HTTP fetching and the SSRF guard
//	reader/parser             parsing and normalising feed documents
//	reader/opml               subscription lists
//	storage/cluster           shards and ownership, the pure rules
//	storage/jetstream/...     the JetStream backend and the lease node:
//	                          the only packages (with cmd/slogfeed) that
//	                          link NATS
//	aggregator/...            the polling service
//	transform/...             pipes: operators, the graph, the runner
//	web/...                   the HTTP server, the UI, republished feeds
//	plugins/...               adapters that extend slogfeed from outside
//	cmd/slogfeed              the command: wires everything together
//
// TestLayers fails when a package imports a slogfeed package its row does
// not allow (rules in layers_test.go), so the layout stays what this page
// says.
package layers
