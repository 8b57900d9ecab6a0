package aggregator

import (
	"encoding/json"
	"time"
)

// A Source turns a document that is not a feed (a JSON API, a CSV file,
// a sensor trace) into items, so that the aggregator fetches, schedules
// and learns it like any feed. A feed uses one when its Source is set
// (storage.Feed.Source): the fetcher still fetches its URL, with every
// safety rule, conditional GET and cache hint; the Source parses the body
// in place of Parse.
//
// Sources are found by name through Sources (ServiceOptions.Sources); the
// plugins package registers slogfeed's own. The aggregator knows nothing
// else of them.
type Source interface {
	// Name is the type name a feed's Source gives, e.g. "json".
	Name() string
	// Prepare checks a feed's source configuration when the feed is
	// subscribed and returns it normalised (defaults filled in), so that
	// later parses see what was accepted. now is the subscription time.
	// Errors describe what is wrong for the user.
	Prepare(config json.RawMessage, now time.Time) (json.RawMessage, error)
	// Parse turns a fetched body into items, as Parse does for feeds:
	// stable item IDs, Published from the data's own timestamps, typed
	// readings. It must bound its work by the body's size and opt.MaxItems
	// and must not panic on any input.
	Parse(body []byte, contentType string, config json.RawMessage, opt ParseOptions) (*Parsed, error)
}

// Sources finds a Source by name.
type Sources interface {
	Source(name string) (Source, bool)
}
