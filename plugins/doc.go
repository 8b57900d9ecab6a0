// Package plugins is where slogfeed grows without its core packages
// knowing each extension. Extensions register themselves here, in an init
// function of their own package, and cmd/slogfeed imports them all
// (plugins/all):
//
//   - source adapters (aggregator.Source) turn data that is not a feed
//     into items: RegisterSource, Sources;
//   - operators are registered with transform.Register under the family
//     transform.FamilyPlugin, so the catalogue lists them like built-in
//     ones;
//   - services (sinks such as webhooks, the WebSub hub and subscriber)
//     run beside the server: RegisterService, NewServices. A service
//     mounts its own HTTP routes, is told of every feed's new items and
//     runs until the server stops.
//
// aggregator and transform depend only on their own interfaces; web only
// on web.Route. docs/plugins.md is the guide to writing one.
package plugins
