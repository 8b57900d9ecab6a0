// Package sourcekit is what slogfeed's source adapters share, for anyone
// writing one (docs/plugins.md): time formats, the Builder that turns
// records into stable, bounded, deduplicated items with typed readings,
// and the errors that name the one bad record and field.
//
// A document an adapter cannot read at all (not JSON, a CSV header
// without a configured column) is a feed error: the adapter returns it
// and the aggregator records it as the feed's last error. A record with a
// bad value is skipped and counted; the count and the first reasons reach
// the feed as its warning through parser.Parsed.Skipped. When every
// record of a non-empty document is bad, the Builder returns an error
// (ErrNoGoodRecords) instead: that is almost always a wrong configuration,
// which the user must see.
package sourcekit
