// Package feedlist pages and filters the list of feeds for the HTTP API
// and the web UI: a page of feeds in order of ID after an opaque cursor,
// or before one for the page before, filtered by status, policy and
// text, with the count of all that match and aggregates of the whole
// fleet. Each page gives the cursors of the page after it and of the
// page before it: paging back gives the pages paging forward gave.
//
// The feeds, the planned fetches and the time are passed in. A store that
// keeps its feeds' summaries and the fleet's aggregates in memory (Index:
// storage.Store) gives an unfiltered page, after a cursor or before one,
// and the aggregates without a walk (it reads its IDs backward from a
// cursor as it reads them forward), and a filtered page by a walk of the
// summaries; the page's own
// records are then read by ID. A planner that keeps its feeds in order of
// planned fetch (OverduePlanner: the live aggregator's scheduler) gives
// the starved feeds, their count and their pages, without a walk.
package feedlist
