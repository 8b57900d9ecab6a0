package aggregator

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/slogfeed/slogfeed/reader/parser"
	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/storage"
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
	Parse(body []byte, contentType string, config json.RawMessage, opt parser.Options) (*parser.Parsed, error)
}

// Sources finds a Source by name.
type Sources interface {
	Source(name string) (Source, bool)
}

// A TimedSource is a Source whose items depend on the time of the parse
// (ParseOptions.Now) as well as on the body, such as the replay of a
// recorded trace from an unchanging file: when Timed reports true, the
// aggregator fetches the feed without conditional GET, so that every
// fetch is parsed.
type TimedSource interface {
	Source
	Timed() bool
}

// ErrUnknownSource is returned for a feed whose source type no
// registered adapter has (by Subscribe, and as the feed's error when a
// stored feed names an adapter this build lacks).
var ErrUnknownSource = errors.New("aggregator: unknown source type")

// maxQuote bounds the words of others (a feed's, an adapter's) quoted in
// an error.
const maxQuote = 200

// source returns the adapter of feed f (nil for a plain feed).
func (s *Service) source(f storage.Feed) (Source, error) {
	if f.Source == nil {
		return nil, nil
	}
	if s.opt.Sources != nil {
		if src, ok := s.opt.Sources.Source(f.Source.Type); ok {
			return src, nil
		}
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownSource, sanitize.Excerpt(f.Source.Type, maxQuote))
}

// prepareSource checks a new feed's source configuration with its
// adapter and stores the normalised configuration in f.
func (s *Service) prepareSource(f *storage.Feed, now time.Time) error {
	src, err := s.source(*f)
	if err != nil || src == nil {
		return err
	}
	cfg, err := src.Prepare(f.Source.Config, now)
	if err != nil {
		return settingsError{fmt.Errorf("source %s: %w", src.Name(), err)}
	}
	spec := *f.Source
	spec.Config = cfg
	f.Source = &spec
	return nil
}

// validators returns the conditional GET validators of feed f: none for
// a timed source.
func (s *Service) validators(f storage.Feed) (etag, lastModified string) {
	if src, _ := s.source(f); src != nil {
		if ts, ok := src.(TimedSource); ok && ts.Timed() {
			return "", ""
		}
	}
	return f.ETag, f.LastModified
}

// parseBody parses a fetched body: with the feed's source adapter when it
// has one, else as a feed. A panicking adapter is recovered as
// ErrMalformed, so one feed's bad data never stops the service.
func (s *Service) parseBody(f storage.Feed, body []byte, contentType string, opt parser.Options) (p *parser.Parsed, err error) {
	src, err := s.source(f)
	if err != nil {
		return nil, err
	}
	if src == nil {
		return parser.Parse(body, contentType, opt)
	}
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("%w: source %s failed: %s", parser.ErrMalformed, src.Name(), sanitize.Excerpt(fmt.Sprint(r), maxQuote))
		}
	}()
	p, err = src.Parse(body, contentType, f.Source.Config, opt)
	if err == nil && p == nil {
		p = &parser.Parsed{}
	}
	return p, err
}

// recordRepairs adds the repairs of a fetched document to the feed's
// counts: the items it added that held invalid UTF-8 or had a bad date,
// each once (an item refetched with the same repair is not added again).
// A feed counted by an older slogfeed (the bytes of invalid UTF-8, at
// every fetch) has that count dropped first.
func recordRepairs(f *storage.Feed, r parser.Repairs, added []storage.Item, at time.Time) {
	if !f.RepairsPerItem {
		f.InvalidUTF8, f.RepairsPerItem = 0, true
	}
	utf8Items, badDates := countAdded(added, r.UTF8Items), countAdded(added, r.BadDates)
	if utf8Items == 0 && badDates == 0 {
		return
	}
	f.InvalidUTF8 += int64(utf8Items)
	f.BadDates += int64(badDates)
	f.LastRepair, f.LastRepairAt = sanitize.Truncate(r.Last, storage.MaxWarningLen/4), at
}

// countAdded counts the items of added whose id is in ids.
func countAdded(added []storage.Item, ids []string) int {
	if len(ids) == 0 {
		return 0
	}
	set := make(map[string]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	n := 0
	for _, it := range added {
		if set[it.ID] {
			n++
		}
	}
	return n
}

// settingsError is a refusal of a feed's settings in words of its own (a
// source adapter's): errors.Is finds ErrBadSettings in it, its text does
// not repeat it.
type settingsError struct{ err error }

func (e settingsError) Error() string   { return e.err.Error() }
func (e settingsError) Unwrap() []error { return []error{ErrBadSettings, e.err} }
