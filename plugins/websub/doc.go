// Package websub is slogfeed's WebSub (W3C Recommendation) service, in
// both roles:
//
//   - Hub: slogfeed is the hub of its own published documents, the sensor
//     feeds (/sensors/{sensor}.rss|.atom|.json) and the republished pipe
//     outputs (/feeds/{slug}.rss|.atom|.json). Those documents advertise
//     it (rel="hub" in the document and in a Link header) when the
//     service is on. Subscribers POST to /websub/hub; the hub verifies
//     their intent with a GET to their callback, keeps the subscription
//     for its lease (persisted in the store, so it survives a restart)
//     and, whenever a topic gets new items, POSTs the topic's current
//     document, exactly what a poll would get, to every subscriber,
//     signed with X-Hub-Signature when the subscriber gave a secret.
//
//   - Subscriber: when a polled remote feed advertises a hub and a self
//     URL, slogfeed subscribes to it with a callback of its own
//     (/websub/callback/{feed}/{token}) and a random secret, and stores
//     what is pushed there as a poll would (aggregator.Service.Ingest).
//     Polling the feed goes on as a low-rate check
//     (aggregator.PushFallback): an item found by a poll that a push
//     should have brought counts as a missed push, and the subscription
//     is renewed. Leases are renewed at 80% of their length;
//     subscriptions survive restarts.
//
// The service registers itself as "websub" (plugins.RegisterService) and
// is switched off by the setting "websub" = false (serve --websub=false).
// Every outgoing request (verification, distribution, subscription) goes
// through plugins.Env.Client, the fetcher's SSRF guard. docs/websub.md
// describes the behaviour and the limits.
package websub
