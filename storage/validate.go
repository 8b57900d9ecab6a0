package storage

import (
	"errors"
	"math"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits on what the store accepts. Input beyond them fails with
// ErrInvalid; callers that read hostile input (the aggregator, the API)
// should truncate or refuse it earlier with a message of their own.
const (
	// MaxItemSize bounds an item's JSON encoding, that is, everything the
	// item carries (content, summary, enclosures…), whatever form a
	// backend stores it in.
	MaxItemSize = 1 << 20
	// MaxFeedSize bounds a feed record's JSON encoding.
	MaxFeedSize = 1 << 20
	// MaxObservationSize bounds an observation's JSON encoding.
	MaxObservationSize = 1 << 20
	// MaxIDLen bounds an item id, in bytes.
	MaxIDLen = 2048
	// MaxTitleLen bounds item and feed titles, in bytes.
	MaxTitleLen = 4096
	// MaxURLLen bounds a feed URL, in bytes.
	MaxURLLen = 4096
	// MaxSlugLen bounds a sensor or pipe feed's slug, in bytes.
	MaxSlugLen = 128
	// MaxSourceTypeLen bounds a feed's source adapter name, in bytes.
	MaxSourceTypeLen = 64
	// MaxSourceConfigLen bounds a feed's source adapter configuration
	// (its JSON), in bytes.
	MaxSourceConfigLen = 16 << 10
	// MaxWarningLen bounds a feed's warning, in bytes.
	MaxWarningLen = 4096
)

// validateFeed checks a feed before it is written and returns its JSON.
func validateFeed(f *Feed) ([]byte, error) {
	switch f.Kind {
	case KindRemote:
		if err := validateURL(f.URL); err != nil {
			return nil, err
		}
	case KindSensor, KindPipe:
		if err := validateSlug(f.Slug); err != nil {
			return nil, err
		}
	default:
		return nil, invalidf("unknown feed kind %q", shortID(string(f.Kind)))
	}
	if len(f.Title) > MaxTitleLen {
		return nil, invalidf("title is %d bytes, more than %d", len(f.Title), MaxTitleLen)
	}
	if err := validateSource(f.Source); err != nil {
		return nil, err
	}
	if len(f.LastRepair) > MaxWarningLen {
		return nil, invalidf("last repair is %d bytes, more than %d", len(f.LastRepair), MaxWarningLen)
	}
	if len(f.Warning) > MaxWarningLen {
		return nil, invalidf("warning is %d bytes, more than %d", len(f.Warning), MaxWarningLen)
	}
	if math.IsNaN(f.Weight) || math.IsInf(f.Weight, 0) || f.Weight < 0 {
		return nil, invalidf("weight %v is not a finite number ≥ 0", f.Weight)
	}
	raw, err := marshalFeed(f)
	if err != nil {
		return nil, invalidf("feed cannot be encoded: %v", err)
	}
	if len(raw) > MaxFeedSize {
		return nil, invalidf("feed record is %d bytes, more than %d", len(raw), MaxFeedSize)
	}
	return raw, nil
}

// validateSource checks a feed's source adapter selection: a printable
// name and a configuration of bounded size (which adapter exists and what
// its configuration means is the aggregator's business).
func validateSource(src *SourceSpec) error {
	if src == nil {
		return nil
	}
	switch {
	case src.Type == "":
		return invalidf("source without a type")
	case len(src.Type) > MaxSourceTypeLen:
		return invalidf("source type is %d bytes, more than %d", len(src.Type), MaxSourceTypeLen)
	case strings.ContainsFunc(src.Type, func(r rune) bool { return r <= ' ' || r >= 0x7f }):
		return invalidf("source type %q is not printable ASCII", shortID(src.Type))
	case len(src.Config) > MaxSourceConfigLen:
		return invalidf("source configuration is %d bytes, more than %d", len(src.Config), MaxSourceConfigLen)
	}
	return nil
}

// validateURL accepts an absolute URL without spaces or control characters.
// Whether its scheme and host may be fetched is the aggregator's decision.
func validateURL(u string) error {
	switch {
	case u == "":
		return invalidf("remote feed without URL")
	case len(u) > MaxURLLen:
		return invalidf("URL is %d bytes, more than %d", len(u), MaxURLLen)
	case !utf8.ValidString(u):
		return invalidf("URL is not valid UTF-8")
	case strings.ContainsFunc(u, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return invalidf("URL %q contains spaces or control characters", shortID(u))
	}
	p, err := url.Parse(u)
	if err != nil {
		return invalidf("URL %q: %v", shortID(u), err)
	}
	if p.Scheme == "" {
		return invalidf("URL %q is not absolute", shortID(u))
	}
	return nil
}

// validateSlug accepts 1 to MaxSlugLen unreserved URL characters
// (A–Z a–z 0–9 - . _ ~), other than "." and "..".
func validateSlug(s string) error {
	switch {
	case s == "":
		return invalidf("sensor or pipe feed without slug")
	case len(s) > MaxSlugLen:
		return invalidf("slug is %d bytes, more than %d", len(s), MaxSlugLen)
	case s == "." || s == "..":
		return invalidf("slug %q is not allowed", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
			return invalidf("slug %q: character %q is not one of A-Z a-z 0-9 - . _ ~", shortID(s), c)
		}
	}
	return nil
}

// validateItem checks an item whose FeedID and Fetched are already set.
// Its size is measured with the largest possible Seq, so the record
// written later, with the real Seq, is never larger.
func validateItem(it *Item) error {
	_, err := validItem(it)
	return err
}

// validItem is validateItem returning the item encoded (encodeItem,
// without its Seq).
func validItem(it *Item) ([]byte, error) {
	switch {
	case it.ID == "":
		return nil, invalidf("item without id")
	case len(it.ID) > MaxIDLen:
		return nil, invalidf("id is %d bytes, more than %d", len(it.ID), MaxIDLen)
	case !utf8.ValidString(it.ID):
		return nil, invalidf("id is not valid UTF-8")
	case len(it.Title) > MaxTitleLen:
		return nil, invalidf("title is %d bytes, more than %d", len(it.Title), MaxTitleLen)
	}
	if r := it.Reading; r != nil {
		if !finite(r.Value) {
			return nil, invalidf("reading value %v is not a finite number", r.Value)
		}
		if r.Lat != nil && !finite(*r.Lat) || r.Lon != nil && !finite(*r.Lon) {
			return nil, invalidf("reading position is not finite")
		}
	}
	return encodeItem(it, math.MaxUint64)
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// ValidatePipe returns an error wrapping ErrInvalid when a pipe record
// must be refused: every backend refuses the same pipes.
func ValidatePipe(p *Pipe) error {
	_, err := validatePipe(p)
	return err
}

// ValidateItems returns the refusals (an *ItemError wrapping ErrInvalid per
// item, joined) of items for feed feedID, as the bbolt store refuses them;
// nil when all are valid. Fetched is taken as now where zero.
func ValidateItems(feedID uint64, items []Item, now time.Time) error {
	_, errs := prepareItems(feedID, items, now)
	return errors.Join(errs...)
}
