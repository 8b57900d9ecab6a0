package transform

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// Type is the type of an item field's value.
type Type string

// Field types. Get returns string, float64, time.Time or []string for
// them.
const (
	TypeString Type = "string"
	TypeNumber Type = "number"
	TypeTime   Type = "time"
	TypeList   Type = "list"
)

// FieldInfo describes one item field operators can read and write.
type FieldInfo struct {
	Name string `json:"name"`
	Type Type   `json:"type"`
	Doc  string `json:"doc"`
	// ReadOnly fields cannot be set by map, rename and the like.
	ReadOnly bool `json:"read_only,omitempty"`
}

// Fields lists the item fields, in the order the catalogue shows them.
// Rules, sorts, renames and expressions name fields by these names.
var Fields = []FieldInfo{
	{"title", TypeString, "the item's title", false},
	{"summary", TypeString, "its summary (sanitised HTML)", false},
	{"content", TypeString, "its content (sanitised HTML)", false},
	{"link", TypeString, "its link", false},
	{"author", TypeString, "its author", false},
	{"id", TypeString, "its id, unique in the feed (what deduplication keys on)", false},
	{"guid", TypeString, "the publisher's guid", false},
	{"categories", TypeList, "its categories", false},
	{"enclosure", TypeString, "the URL of its first enclosure", false},
	{"published", TypeTime, "when it was published (for a pipe's output: when the pipe made it)", false},
	{"updated", TypeTime, "when the publisher last changed it", false},
	{"fetched", TypeTime, "when slogfeed received it", true},
	{"feed", TypeNumber, "the id of the slogfeed feed it came from", true},
	{"value", TypeNumber, "the sensor reading's value", false},
	{"unit", TypeString, "the reading's unit (e.g. \"C\")", false},
	{"sensor", TypeString, "the reading's sensor id", false},
	{"time", TypeTime, "the reading's observation time", false},
	{"lat", TypeNumber, "the reading's latitude", false},
	{"lon", TypeNumber, "the reading's longitude", false},
}

var fieldIndex = func() map[string]FieldInfo {
	m := make(map[string]FieldInfo, len(Fields))
	for _, f := range Fields {
		m[f.Name] = f
	}
	m["category"] = m["categories"]
	return m
}()

// ErrUnknownField is wrapped by the errors of Field, Get and Set for a
// name that is not in Fields.
var ErrUnknownField = errors.New("unknown item field")

// Field returns the description of the field called name ("category" is
// accepted for "categories").
func Field(name string) (FieldInfo, error) {
	f, ok := fieldIndex[name]
	if !ok {
		return FieldInfo{}, fmt.Errorf("%w %q (want one of %s)", ErrUnknownField, name, fieldList())
	}
	return f, nil
}

func fieldList() string {
	names := make([]string, len(Fields))
	for i, f := range Fields {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// CheckField returns a *FieldError for configuration field cfgField when
// name is not an item field (or is read-only and writable is set).
func CheckField(cfgField, name string, writable bool) error {
	f, err := Field(name)
	if err != nil {
		return &FieldError{Field: cfgField, Err: err}
	}
	if writable && f.ReadOnly {
		return Fieldf(cfgField, "item field %q cannot be changed", name)
	}
	return nil
}

// Get returns the value of field name of it: a string, float64, time.Time
// or []string, as the field's Type says. ok is false when the item has no
// value there (an empty string, a zero time, no reading); an unknown name
// is never ok.
func Get(it *Item, name string) (v any, ok bool) {
	switch name {
	case "title":
		return it.Title, it.Title != ""
	case "summary":
		return it.Summary, it.Summary != ""
	case "content":
		return it.Content, it.Content != ""
	case "link":
		return it.Link, it.Link != ""
	case "author":
		return it.Author, it.Author != ""
	case "id":
		return it.ID, it.ID != ""
	case "guid":
		return it.GUID, it.GUID != ""
	case "categories", "category":
		return it.Categories, len(it.Categories) > 0
	case "enclosure":
		if len(it.Enclosures) == 0 {
			return "", false
		}
		return it.Enclosures[0].URL, it.Enclosures[0].URL != ""
	case "published":
		return it.Published, !it.Published.IsZero()
	case "updated":
		return it.Updated, !it.Updated.IsZero()
	case "fetched":
		return it.Fetched, !it.Fetched.IsZero()
	case "feed":
		return float64(it.FeedID), it.FeedID != 0
	}
	r := it.Reading
	switch name {
	case "value":
		if r == nil {
			return 0.0, false
		}
		return r.Value, true
	case "unit":
		if r == nil {
			return "", false
		}
		return r.Unit, r.Unit != ""
	case "sensor":
		if r == nil {
			return "", false
		}
		return r.Sensor, r.Sensor != ""
	case "time":
		if r == nil {
			return time.Time{}, false
		}
		return r.Time, !r.Time.IsZero()
	case "lat":
		if r == nil || r.Lat == nil {
			return 0.0, false
		}
		return *r.Lat, true
	case "lon":
		if r == nil || r.Lon == nil {
			return 0.0, false
		}
		return *r.Lon, true
	}
	return nil, false
}

// Set stores v in field name of it, converting it to the field's type
// (see AsString, AsNumber, AsTime, AsList); nil clears the field. Setting
// a reading field on an item without a reading gives it one, observed at
// the item's publish time. it must be the caller's own copy (see Clone).
func Set(it *Item, name string, v any) error {
	f, err := Field(name)
	if err != nil {
		return err
	}
	if f.ReadOnly {
		return fmt.Errorf("item field %q cannot be changed", name)
	}
	if v == nil {
		clearField(it, f.Name)
		return nil
	}
	switch f.Type {
	case TypeString:
		s := AsString(v)
		switch f.Name {
		case "title":
			it.Title = s
		case "summary":
			it.Summary = s
		case "content":
			it.Content = s
		case "link":
			it.Link = s
		case "author":
			it.Author = s
		case "id":
			if s == "" {
				return errors.New("an item's id cannot be empty")
			}
			it.ID = s
		case "guid":
			it.GUID = s
		case "enclosure":
			if len(it.Enclosures) == 0 {
				it.Enclosures = []storage.Enclosure{{URL: s}}
			} else {
				it.Enclosures[0].URL = s
			}
		case "unit":
			reading(it).Unit = s
		case "sensor":
			reading(it).Sensor = s
		}
	case TypeNumber:
		n, ok := AsNumber(v)
		if !ok {
			return fmt.Errorf("field %q wants a number, got %q", name, truncate(AsString(v), 40))
		}
		if math.IsNaN(n) || math.IsInf(n, 0) {
			return fmt.Errorf("field %q wants a finite number", name)
		}
		switch f.Name {
		case "value":
			reading(it).Value = n
		case "lat":
			if n < -90 || n > 90 {
				return fmt.Errorf("lat %v outside [-90, 90]", n)
			}
			reading(it).Lat = &n
		case "lon":
			if n < -180 || n > 180 {
				return fmt.Errorf("lon %v outside [-180, 180]", n)
			}
			reading(it).Lon = &n
		}
	case TypeTime:
		t, ok := AsTime(v)
		if !ok {
			return fmt.Errorf("field %q wants a time (RFC 3339), got %q", name, truncate(AsString(v), 40))
		}
		switch f.Name {
		case "published":
			it.Published = t
		case "updated":
			it.Updated = t
		case "time":
			reading(it).Time = t
		}
	case TypeList:
		it.Categories = AsList(v)
	}
	return nil
}

func clearField(it *Item, name string) {
	switch name {
	case "title":
		it.Title = ""
	case "summary":
		it.Summary = ""
	case "content":
		it.Content = ""
	case "link":
		it.Link = ""
	case "author":
		it.Author = ""
	case "guid":
		it.GUID = ""
	case "categories":
		it.Categories = nil
	case "enclosure":
		it.Enclosures = nil
	case "published":
		it.Published = time.Time{}
	case "updated":
		it.Updated = time.Time{}
	case "value":
		it.Reading = nil
	}
	if r := it.Reading; r != nil {
		switch name {
		case "unit":
			r.Unit = ""
		case "sensor":
			r.Sensor = ""
		case "time":
			r.Time = time.Time{}
		case "lat":
			r.Lat = nil
		case "lon":
			r.Lon = nil
		}
	}
}

// reading returns it's reading, giving it one when it has none.
func reading(it *Item) *storage.Reading {
	if it.Reading == nil {
		it.Reading = &storage.Reading{Time: it.Published}
	}
	return it.Reading
}

// AsString writes a value as text: numbers as short as round-trips,
// times as RFC 3339 in UTC, lists joined with ", ".
func AsString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case int:
		return strconv.Itoa(x)
	case bool:
		return strconv.FormatBool(x)
	case time.Time:
		if x.IsZero() {
			return ""
		}
		return x.UTC().Format(time.RFC3339Nano)
	case []string:
		return strings.Join(x, ", ")
	}
	return fmt.Sprint(v)
}

// AsNumber reads a value as a number: float64 as is, a string when it
// parses as a decimal number (a decimal comma accepted), a time as Unix
// seconds.
func AsNumber(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case string:
		s := strings.TrimSpace(x)
		if strings.Count(s, ",") == 1 && !strings.Contains(s, ".") {
			s = strings.Replace(s, ",", ".", 1)
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, false
		}
		return f, true
	case time.Time:
		if x.IsZero() {
			return 0, false
		}
		return float64(x.UnixNano()) / 1e9, true
	}
	return 0, false
}

// AsTime reads a value as a time: a time.Time as is, a string in RFC 3339
// (or RFC 1123 as RSS writes it), a number as Unix seconds.
func AsTime(v any) (time.Time, bool) {
	switch x := v.(type) {
	case time.Time:
		return x, !x.IsZero()
	case string:
		s := strings.TrimSpace(x)
		for _, layout := range []string{time.RFC3339Nano, time.RFC1123Z, time.RFC1123, "2006-01-02 15:04:05", "2006-01-02"} {
			if t, err := time.Parse(layout, s); err == nil {
				return t.UTC(), true
			}
		}
		return time.Time{}, false
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > 1e11 {
			return time.Time{}, false
		}
		sec, frac := math.Modf(x)
		return time.Unix(int64(sec), int64(frac*1e9)).UTC(), true
	}
	return time.Time{}, false
}

// AsList reads a value as a list of strings: a list as is, a string as a
// one-element list (none when empty), anything else through AsString.
func AsList(v any) []string {
	switch x := v.(type) {
	case []string:
		return slices.Clone(x)
	case nil:
		return nil
	}
	s := AsString(v)
	if s == "" {
		return nil
	}
	return []string{s}
}

// Compare orders two field values: numbers numerically, times
// chronologically, anything else (or a mix) by AsString, except that a
// string that reads as a number compares numerically with a number.
// It returns -1, 0 or +1.
func Compare(a, b any) int {
	if x, ok := a.(time.Time); ok {
		if y, ok := AsTime(b); ok {
			return x.Compare(y)
		}
	}
	if y, ok := b.(time.Time); ok {
		if x, ok := AsTime(a); ok {
			return x.Compare(y)
		}
	}
	_, an := a.(float64)
	_, bn := b.(float64)
	if an || bn {
		x, okx := AsNumber(a)
		y, oky := AsNumber(b)
		if okx && oky {
			switch {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return 0
		}
	}
	return strings.Compare(AsString(a), AsString(b))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
