package parser

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	ext "github.com/mmcdole/gofeed/extensions"

	"github.com/slogfeed/slogfeed/feedext"
	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/storage"
)

// Typed values. An item's reading comes from slogfeed's own extension (the
// sf:reading element in RSS and Atom, the _slogfeed object in JSON Feed;
// see package feedext) when the item has one, else from the feed's
// extraction rule applied to the item's title or summary. A reading whose
// value is missing, not a number or not finite is dropped: the item stays,
// without a reading.

// Limits on typed values.
const (
	// MaxRuleRegex is the longest extraction regular expression accepted.
	MaxRuleRegex = 512
	maxUnitRunes = 64
	// maxSensorRunes bounds a reading's sensor id.
	maxSensorRunes = 256
	maxNumberLen   = feedext.MaxNumberLen
	// ruleCacheSize bounds the cache of compiled rules.
	ruleCacheSize = 256
)

// readingFromExt reads the first reading element of an item's extensions;
// keys are the extension keys (prefixes) the document bound to
// feedext.Namespace.
func readingFromExt(exts ext.Extensions, keys []string) *storage.Reading {
	for _, k := range keys {
		els := exts[k][feedext.Element]
		if len(els) == 0 {
			continue
		}
		e := els[0]
		raw := e.Attrs[feedext.AttrValue]
		if raw == "" {
			raw = e.Value // <sf:reading unit="C">21.3</sf:reading>
		}
		v, ok := parseNumber(raw)
		if !ok {
			return nil
		}
		r := &storage.Reading{
			Value:  v,
			Unit:   sanitize.PlainText(e.Attrs[feedext.AttrUnit], maxUnitRunes),
			Sensor: sanitize.PlainText(e.Attrs[feedext.AttrSensor], maxSensorRunes),
			Time:   parseReadingTime(e.Attrs[feedext.AttrTime]),
		}
		lat, okLat := parseNumber(e.Attrs[feedext.AttrLat])
		lon, okLon := parseNumber(e.Attrs[feedext.AttrLon])
		setPosition(r, lat, lon, okLat && okLon)
		return r
	}
	return nil
}

// jsonReading is the JSON Feed _slogfeed object. Numbers may also be given
// as strings.
type jsonReading struct {
	Value  json.RawMessage `json:"value"`
	Unit   string          `json:"unit"`
	Sensor string          `json:"sensor"`
	Time   string          `json:"time"`
	Lat    json.RawMessage `json:"lat"`
	Lon    json.RawMessage `json:"lon"`
}

// readingFromJSON decodes an item's _slogfeed object; nil when absent or
// unusable.
func readingFromJSON(raw json.RawMessage) *storage.Reading {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var j jsonReading
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil
	}
	v, ok := jsonNumber(j.Value)
	if !ok {
		return nil
	}
	r := &storage.Reading{
		Value:  v,
		Unit:   sanitize.PlainText(j.Unit, maxUnitRunes),
		Sensor: sanitize.PlainText(j.Sensor, maxSensorRunes),
		Time:   parseReadingTime(j.Time),
	}
	lat, okLat := jsonNumber(j.Lat)
	lon, okLon := jsonNumber(j.Lon)
	setPosition(r, lat, lon, okLat && okLon)
	return r
}

// jsonNumber reads a JSON number, or a string holding one.
func jsonNumber(raw json.RawMessage) (float64, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || len(raw) > maxNumberLen+2 {
		return 0, false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return 0, false
		}
		return parseNumber(s)
	}
	return parseNumber(string(raw))
}

// setPosition sets r's position when lat and lon are valid coordinates.
func setPosition(r *storage.Reading, lat, lon float64, ok bool) {
	if !ok || lat < -90 || lat > 90 || lon < -180 || lon > 180 {
		return
	}
	r.Lat, r.Lon = &lat, &lon
}

// parseReadingTime parses an RFC 3339 observation time; zero when absent or
// invalid.
func parseReadingTime(s string) time.Time {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 64 {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || !plausibleDate(t, time.Time{}) {
		return time.Time{}
	}
	return t.UTC()
}

// parseNumber parses a finite decimal number (feedext.ParseNumber).
func parseNumber(s string) (float64, bool) { return feedext.ParseNumber(s) }

// parseLocalNumber parses a number as people write it in titles
// (feedext.ParseLocalNumber).
func parseLocalNumber(s string) (float64, bool) { return feedext.ParseLocalNumber(s) }

// ruleCache holds compiled extraction regexps, keyed by their source.
var ruleCache struct {
	sync.Mutex
	m map[string]*regexp.Regexp
}

// compileRule validates rule and returns its compiled regexp (cached).
func compileRule(rule storage.ExtractRule) (*regexp.Regexp, error) {
	switch strings.ToLower(strings.TrimSpace(rule.Field)) {
	case "", "title", "summary":
	default:
		return nil, fmt.Errorf("%w: field %.40q (want title or summary)", ErrExtractRule, rule.Field)
	}
	if rule.Regex == "" {
		return nil, fmt.Errorf("%w: empty regular expression", ErrExtractRule)
	}
	if len(rule.Regex) > MaxRuleRegex {
		return nil, fmt.Errorf("%w: regular expression longer than %d bytes", ErrExtractRule, MaxRuleRegex)
	}
	if utf8Len := len([]rune(rule.Unit)); utf8Len > maxUnitRunes {
		return nil, fmt.Errorf("%w: unit longer than %d characters", ErrExtractRule, maxUnitRunes)
	}
	ruleCache.Lock()
	re, ok := ruleCache.m[rule.Regex]
	ruleCache.Unlock()
	if ok {
		return re, nil
	}
	re, err := regexp.Compile(rule.Regex)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrExtractRule, err)
	}
	if re.NumSubexp() < 1 {
		return nil, fmt.Errorf("%w: %q has no capture group for the number", ErrExtractRule, rule.Regex)
	}
	ruleCache.Lock()
	if ruleCache.m == nil || len(ruleCache.m) >= ruleCacheSize {
		ruleCache.m = make(map[string]*regexp.Regexp)
	}
	ruleCache.m[rule.Regex] = re
	ruleCache.Unlock()
	return re, nil
}

// ValidateRule checks an extraction rule: field "title" (or empty) or
// "summary", an RE2 regular expression of at most MaxRuleRegex bytes with at
// least one capture group. Errors wrap ErrExtractRule.
func ValidateRule(rule storage.ExtractRule) error {
	_, err := compileRule(rule)
	return err
}

// ApplyRule applies rule to an item's title or summary (HTML is reduced to
// its text first) and returns the number in the first capture group of
// the first match. ok is false when the rule does not match or the capture
// is not a finite number; err reports an invalid rule.
func ApplyRule(rule storage.ExtractRule, title, summary string) (v float64, ok bool, err error) {
	re, err := compileRule(rule)
	if err != nil {
		return 0, false, err
	}
	text := title
	if strings.EqualFold(strings.TrimSpace(rule.Field), "summary") {
		text = summary
	}
	text = sanitize.PlainText(text, 0)
	m := re.FindStringSubmatch(text)
	if len(m) < 2 {
		return 0, false, nil
	}
	v, ok = parseLocalNumber(m[1])
	return v, ok, nil
}
