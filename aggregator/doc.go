// Package aggregator is slogfeed's polling service: it runs each feed's
// schedule and turns what a poll found into stored items and observations.
//
// One loop (Service.Run): the scheduler (package schedule) grants the feed
// whose predicted publish time has come; the service fetches it with a
// conditional GET (package reader/fetcher), parses the document behind
// the unchanged-item cut (package reader/parser: items whose bytes did
// not change since the last poll are not parsed again), stores the new
// items and the poll's observation in one write (package storage), feeds
// the observation back to the feed's policy for its next fetch time, and
// tells the watchers (the pipe runner, WebSub hubs) what was added.
//
// Around that loop the package owns:
//
//   - publish-time estimation (publish.go): the best evidence of when each
//     new item was published, which DPT learns from;
//   - RFC 5005 paging (paging.go): a poll that shows a gap follows the
//     feed's older pages, on its own server, within bounds;
//   - push (push.go): documents delivered by a WebSub hub are ingested as
//     a poll's would be, and a pushed feed falls back to slow polling;
//   - ownership (owner.go): on a cluster, the service polls only the feeds
//     of the shards its node owns, and takes over a shard's learned state
//     when the shard moves to it; the feeds of a shard whose lease lapsed
//     are parked, and resume without a reload if the node renews it
//     (lapse.go);
//   - source adapters (source.go): feeds that are not RSS, Atom or JSON
//     Feed (CSV, JSON APIs, the plugins) parse through an adapter;
//   - metrics (metrics.go).
//
// Imports: reader/..., schedule, storage, storage/cluster (the pure shard
// and ownership rules) and feedext. It must not import web, transform,
// plugins or any NATS package: the pipe runner and the web server depend
// on it, not the other way round, and the cluster backend is handed in
// through the cluster.Owner interface.
package aggregator
