package parser

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mmcdole/gofeed"
	ext "github.com/mmcdole/gofeed/extensions"

	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/storage"
)

// Item normalisation: the rules every item goes through, whatever its
// format, so that the rest of slogfeed sees clean, bounded values.
//
//   - ID: the publisher's guid (RSS guid, Atom id, JSON Feed id) when it
//     has one (hashed when longer than maxIDBytes), else
//     sha256(link|title|published) as 32 hex digits, over the raw values
//     so the ID does not change with slogfeed's cleaning rules.
//   - Links resolved against the feed's URL; only http and https kept.
//   - Title: plain text, at most MaxTitleRunes runes.
//   - Summary and content: sanitised HTML (sanitize.HTML).
//   - Categories: plain text, deduplicated, at most maxCategories.
//   - Enclosures: http(s) URL, type, length; at most maxEnclosures.
//   - Dates: the item's published date (else its updated date); a date
//     before 1990 or more than an hour after the fetch is implausible and
//     dropped (the publish-time estimate takes over, see PublishTimes).
//   - Reading: slogfeed's reading element, else the feed's extraction
//     rule. A position (georss:point, or geo:lat with geo:long) fills the
//     reading's Lat/Lon when the reading has none; an item without a
//     reading keeps no position (Item has no field for one).

// Text limits of normalised items.
const (
	MaxTitleRunes    = 1000
	maxAuthorRunes   = 200
	maxCategoryRunes = 200
	maxCategories    = 64
	maxEnclosures    = 32
	maxTypeRunes     = 200
)

// maxIDBytes is the longest guid used as an ID as is; maxGUIDBytes the
// longest kept at all.
const (
	maxIDBytes   = 256
	maxGUIDBytes = 2048
)

// earliestDate is the earliest plausible item date.
var earliestDate = time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC)

// futureSlack is how far past the fetch an item date may lie.
const futureSlack = time.Hour

// plausibleDate reports whether t can be a publish time, given the fetch
// time now (zero: no upper bound).
func plausibleDate(t, now time.Time) bool {
	if t.IsZero() || t.Before(earliestDate) {
		return false
	}
	return now.IsZero() || !t.After(now.Add(futureSlack))
}

// normalizer turns gofeed's items into storage items.
type normalizer struct {
	opt       Options
	base      *url.URL
	sfKeys    []string        // extension keys of slogfeed's namespace (XML)
	jsonItems []jsonItemExtra // per-item extras (JSON Feed)
	ruleErr   error
	repairs   Repairs
	utf8Items []bool // per item: held invalid UTF-8
}

// badDate records that item id's date field (the text raw) did not parse
// or was implausible and was dropped.
func (n *normalizer) badDate(id, field, raw string) {
	r := &n.repairs
	if !slices.Contains(r.BadDates, id) {
		r.BadDates = append(r.BadDates, id)
	}
	r.Last = fmt.Sprintf("item %q: %s date %q unreadable or implausible, replaced by the fetch time", clip(id), field, clip(raw))
}

// utf8 records n invalid UTF-8 bytes, replaced as how says.
func (r *Repairs) utf8(n int, how string) {
	if n > 0 {
		r.InvalidUTF8 += n
		r.Last = fmt.Sprintf("%d bytes of invalid UTF-8 %s", n, how)
	}
}

// Warning is what the repairs of one document say, or "".
func (r Repairs) Warning() string {
	var parts []string
	if r.InvalidUTF8 > 0 {
		parts = append(parts, fmt.Sprintf("%d bytes of invalid UTF-8 replaced", r.InvalidUTF8))
	}
	if n := len(r.BadDates); n > 0 {
		parts = append(parts, fmt.Sprintf("%d items with an unreadable or implausible date given the fetch time", n))
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + " (last: " + r.Last + ")"
}

func newNormalizer(opt Options) *normalizer {
	n := &normalizer{opt: opt}
	if u, err := url.Parse(strings.TrimSpace(opt.BaseURL)); err == nil && u.IsAbs() {
		n.base = u
	}
	if opt.Extract != nil {
		n.ruleErr = ValidateRule(*opt.Extract)
	}
	return n
}

// feed normalises a parsed feed.
func (n *normalizer) feed(f *gofeed.Feed) *Parsed {
	p := &Parsed{
		Title:      sanitize.PlainText(f.Title, MaxTitleRunes),
		UpdateHint: updateHint(f.Extensions),
		ExtractErr: n.ruleErr,
	}
	if link, ok := sanitize.ResolveURL(n.base, f.Link, false); ok {
		p.Site = link
	}
	items := f.Items
	if len(items) > n.opt.MaxItems {
		items, p.Truncated = items[:n.opt.MaxItems], true
	}
	seen := make(map[string]bool, len(items))
	p.Items = make([]storage.Item, 0, len(items))
	for i, it := range items {
		if it == nil {
			continue
		}
		var extra *jsonItemExtra
		if i < len(n.jsonItems) {
			extra = &n.jsonItems[i]
		}
		item := n.item(it, extra)
		if seen[item.ID] {
			continue
		}
		seen[item.ID] = true
		if i < len(n.utf8Items) && n.utf8Items[i] {
			n.repairs.UTF8Items = append(n.repairs.UTF8Items, item.ID)
		}
		p.Items = append(p.Items, item)
	}
	p.Repairs = n.repairs
	return p
}

// item normalises one item.
func (n *normalizer) item(it *gofeed.Item, extra *jsonItemExtra) storage.Item {
	item := storage.Item{
		ID:      itemID(it),
		Title:   sanitize.PlainText(it.Title, MaxTitleRunes),
		Fetched: n.opt.Now,
	}
	if guid := sanitize.Clean(strings.TrimSpace(it.GUID)); len(guid) <= maxGUIDBytes {
		item.GUID = guid // a longer one is only kept hashed, as the ID
	}

	link := it.Link
	if link == "" && len(it.Links) > 0 {
		link = it.Links[0]
	}
	if u, ok := sanitize.ResolveURL(n.base, link, false); ok {
		item.Link = u
	}
	content := it.Content
	if extra != nil && (extra.ContentHTML == nil || *extra.ContentHTML == "") && extra.ContentText != nil {
		// JSON Feed content_text is plain text, not HTML.
		content = strings.ReplaceAll(html.EscapeString(*extra.ContentText), "\n", "<br>")
	}
	// Relative links inside the item resolve against its own link, else
	// against the feed's URL.
	base := n.base
	if u, err := url.Parse(item.Link); err == nil && item.Link != "" {
		base = u
	}
	item.Summary, item.Content = sanitize.HTML(it.Description, base), sanitize.HTML(content, base)
	if item.Summary == item.Content {
		item.Content = "" // RSS translators often copy one into the other
	}
	for _, a := range it.Authors {
		if a == nil {
			continue
		}
		name := a.Name
		if name == "" {
			name = a.Email
		}
		if name = sanitize.PlainText(name, maxAuthorRunes); name != "" {
			item.Author = name
			break
		}
	}
	item.Categories = categories(it.Categories)
	item.Enclosures = n.enclosures(it.Enclosures)

	if it.PublishedParsed != nil && plausibleDate(*it.PublishedParsed, n.opt.Now) {
		item.Published = it.PublishedParsed.UTC()
	} else if it.Published != "" {
		n.badDate(item.ID, "published", it.Published)
	}
	if it.UpdatedParsed != nil && plausibleDate(*it.UpdatedParsed, n.opt.Now) {
		item.Updated = it.UpdatedParsed.UTC()
		if item.Published.IsZero() {
			item.Published = item.Updated
		}
	} else if it.Updated != "" {
		n.badDate(item.ID, "updated", it.Updated)
	}

	switch {
	case extra != nil:
		item.Reading = readingFromJSON(extra.Slogfeed)
	case len(n.sfKeys) > 0:
		item.Reading = readingFromExt(it.Extensions, n.sfKeys)
	}
	if item.Reading == nil && n.opt.Extract != nil && n.ruleErr == nil {
		if v, ok, _ := ApplyRule(*n.opt.Extract, it.Title, it.Description); ok {
			item.Reading = &storage.Reading{Value: v, Unit: sanitize.PlainText(n.opt.Extract.Unit, maxUnitRunes)}
		}
	}
	if item.Reading != nil {
		if item.Reading.Lat == nil {
			if lat, lon, ok := position(it.Extensions); ok {
				setPosition(item.Reading, lat, lon, true)
			}
		}
		if item.Reading.Time.IsZero() {
			item.Reading.Time = item.Published
		}
	}
	return item
}

// itemID is the item's stable ID: its guid, else a hash of link, title and
// published date (summary and content when all three are empty).
func itemID(it *gofeed.Item) string {
	guid := strings.TrimSpace(it.GUID)
	if guid != "" {
		guid = sanitize.Clean(guid)
		if len(guid) <= maxIDBytes {
			return guid
		}
		return hashID(guid)
	}
	parts := []string{strings.TrimSpace(it.Link), strings.TrimSpace(it.Title), strings.TrimSpace(it.Published)}
	if parts[0] == "" && parts[1] == "" && parts[2] == "" {
		parts = append(parts, it.Description, it.Content)
	}
	return hashID(strings.Join(parts, "|"))
}

// hashID is the first 128 bits of sha256(s) in hex.
func hashID(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

// categories cleans and deduplicates (case-insensitively) an item's
// categories.
func categories(in []string) []string {
	var out []string
	seen := make(map[string]bool, len(in))
	for _, c := range in {
		c = sanitize.PlainText(c, maxCategoryRunes)
		k := strings.ToLower(c)
		if c == "" || seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, c)
		if len(out) == maxCategories {
			break
		}
	}
	return out
}

// enclosures keeps the enclosures with an http(s) URL.
func (n *normalizer) enclosures(in []*gofeed.Enclosure) []storage.Enclosure {
	var out []storage.Enclosure
	for _, e := range in {
		if e == nil {
			continue
		}
		u, ok := sanitize.ResolveURL(n.base, e.URL, false)
		if !ok {
			continue
		}
		enc := storage.Enclosure{URL: u, Type: sanitize.PlainText(e.Type, maxTypeRunes)}
		if l, err := strconv.ParseInt(strings.TrimSpace(e.Length), 10, 64); err == nil && l > 0 {
			enc.Length = l
		}
		out = append(out, enc)
		if len(out) == maxEnclosures {
			break
		}
	}
	return out
}

// position reads an item's georss:point ("lat lon") or geo:lat/geo:long
// (the W3C Basic Geo vocabulary). gofeed files both under their canonical
// prefixes.
func position(exts ext.Extensions) (lat, lon float64, ok bool) {
	if pts := exts["georss"]["point"]; len(pts) > 0 {
		f := strings.Fields(pts[0].Value)
		if len(f) == 2 {
			lat, ok1 := parseNumber(f[0])
			lon, ok2 := parseNumber(f[1])
			if ok1 && ok2 {
				return lat, lon, true
			}
		}
	}
	geo := exts["geo"]
	if la, lo := geo["lat"], geo["long"]; len(la) > 0 && len(lo) > 0 {
		lat, ok1 := parseNumber(la[0].Value)
		lon, ok2 := parseNumber(lo[0].Value)
		if ok1 && ok2 {
			return lat, lon, true
		}
	}
	return 0, 0, false
}

// updateHint reads the syndication module: sy:updatePeriod (hourly, daily,
// weekly, monthly, yearly; default daily) divided by sy:updateFrequency
// (default 1).
func updateHint(exts ext.Extensions) time.Duration {
	sy := exts["sy"]
	periods, freqs := sy["updatePeriod"], sy["updateFrequency"]
	if len(periods) == 0 && len(freqs) == 0 {
		return 0
	}
	period := 24 * time.Hour
	if len(periods) > 0 {
		switch strings.ToLower(strings.TrimSpace(periods[0].Value)) {
		case "hourly":
			period = time.Hour
		case "daily", "":
		case "weekly":
			period = 7 * 24 * time.Hour
		case "monthly":
			period = 30 * 24 * time.Hour
		case "yearly":
			period = 365 * 24 * time.Hour
		default:
			return 0
		}
	}
	freq := int64(1)
	if len(freqs) > 0 {
		f, err := strconv.ParseInt(strings.TrimSpace(freqs[0].Value), 10, 64)
		if err != nil || f < 1 {
			return 0
		}
		freq = min(f, int64(period/time.Second)) // at most one update a second
	}
	return period / time.Duration(freq)
}
