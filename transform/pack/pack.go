package pack

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// Item is what PACK's operators filter and summarise.
type Item = storage.Item

// Bounds on configurations and state.
const (
	// MaxN bounds the n of FIRST, LAST, EVERY and RANDOM.
	MaxN = 100000
	// MaxSet bounds the entries of a set (INSET, SUBSET, SUPSET).
	MaxSet = 1024
	// MaxValueLen bounds a configured string value or set entry, in bytes.
	MaxValueLen = 1024
	// MaxGroups bounds the groups a digester makes in one run and the
	// groups DELTA remembers.
	MaxGroups = 10000
	// MaxDigestItems bounds the item ids a digest keeps for tracing.
	MaxDigestItems = 16
	// maxGroupKey bounds a group name: longer values are cut and hashed.
	maxGroupKey = 256
	// errEvery is how often loops over items check c.Err().
	errEvery = 256
)

// Filters are PACK's filter names, in the paper's order.
var Filters = []string{
	"GT", "GE", "EQ", "NE", "LT", "LE", "MATCH", "WITHIN",
	"INSET", "CONTAIN", "SUBSET", "SUPSET", "FIRST", "LAST",
	"UNIQ", "GUNIQ", "DELTA", "LATEST", "EVERY", "RANDOM",
}

// Digesters are PACK's digester names.
var Digesters = []string{"MAX", "MIN", "COUNT", "SUM", "MEAN"}

// queue returns the items of all inputs as one queue, in edge order.
func queue(in [][]Item) []Item {
	switch len(in) {
	case 0:
		return nil
	case 1:
		return in[0]
	}
	n := 0
	for _, q := range in {
		n += len(q)
	}
	out := make([]Item, 0, n)
	for _, q := range in {
		out = append(out, q...)
	}
	return out
}

// checkErr returns c.Err() every errEvery items.
func checkErr(c *transform.Context, i int) error {
	if i%errEvery != 0 {
		return nil
	}
	if err := c.Err(); err != nil {
		return fmt.Errorf("pack: %w", err)
	}
	return nil
}

// checkField checks that name, from configuration field cfgField, is an
// item field of one of the given types (any type when none is given).
// An empty name takes def, or is refused when def is empty.
func checkField(cfgField, name, def string, types ...transform.Type) (transform.FieldInfo, error) {
	if name == "" {
		if def == "" {
			return transform.FieldInfo{}, transform.Fieldf(cfgField, "required: name an item field (e.g. \"value\")")
		}
		name = def
	}
	if err := transform.CheckField(cfgField, name, false); err != nil {
		return transform.FieldInfo{}, err
	}
	f, _ := transform.Field(name)
	if len(types) > 0 && !slices.Contains(types, f.Type) {
		want := make([]string, len(types))
		for i, t := range types {
			want[i] = string(t)
		}
		return transform.FieldInfo{}, transform.Fieldf(cfgField, "item field %q is a %s; this operator wants a %s field", name, f.Type, strings.Join(want, " or "))
	}
	return f, nil
}

// checkBy checks an optional grouping field.
func checkBy(cfgField, by string) error {
	if by == "" {
		return nil
	}
	return transform.CheckField(cfgField, by, false)
}

// scalar reads configured value v for an item field of type f.Type: a
// float64 for number fields, a time.Time for time fields, the string or
// number as given for string fields. Lists, objects, booleans and null
// are refused.
func scalar(cfgField string, f transform.FieldInfo, v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return nil, transform.Fieldf(cfgField, "required: a number or a string")
	case string:
		if len(x) > MaxValueLen {
			return nil, &transform.FieldError{Field: cfgField, Err: fmt.Errorf("%w: value is %d bytes, at most %d", transform.ErrLimit, len(x), MaxValueLen)}
		}
	case float64:
	default:
		return nil, transform.Fieldf(cfgField, "want a number or a string, got %s", jsonKind(v))
	}
	switch f.Type {
	case transform.TypeNumber:
		n, ok := transform.AsNumber(v)
		if !ok {
			return nil, transform.Fieldf(cfgField, "item field %q is a number; %q is not one", f.Name, transform.AsString(v))
		}
		return n, nil
	case transform.TypeTime:
		t, ok := transform.AsTime(v)
		if !ok {
			return nil, transform.Fieldf(cfgField, "item field %q is a time; want RFC 3339 (\"2026-01-02T15:04:05Z\") or Unix seconds, got %q", f.Name, transform.AsString(v))
		}
		return t, nil
	case transform.TypeList:
		return nil, transform.Fieldf(cfgField, "item field %q is a list: use CONTAIN, SUBSET or SUPSET", f.Name)
	}
	return v, nil
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case bool:
		return "true or false"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// listEntry reads one configured entry of a list-field set: a string or
// a number (written as text).
func listEntry(cfgField string, v any) (string, error) {
	switch x := v.(type) {
	case string:
		if len(x) > MaxValueLen {
			return "", &transform.FieldError{Field: cfgField, Err: fmt.Errorf("%w: value is %d bytes, at most %d", transform.ErrLimit, len(x), MaxValueLen)}
		}
		return x, nil
	case float64:
		return transform.AsString(x), nil
	case nil:
		return "", transform.Fieldf(cfgField, "required: a string")
	}
	return "", transform.Fieldf(cfgField, "want a string, got %s", jsonKind(v))
}

// valueKey writes a field value as a map key: equal values (as Compare
// sees numbers and times) give equal keys; a missing value has its own
// key. Long keys are hashed.
func valueKey(v any, ok bool) string {
	if !ok {
		return "\x00"
	}
	var k string
	switch x := v.(type) {
	case float64:
		if x == 0 {
			x = 0 // -0 and 0 are one value
		}
		k = "n" + strconv.FormatFloat(x, 'g', -1, 64)
	case time.Time:
		k = "t" + x.UTC().Format(time.RFC3339Nano)
	case []string:
		k = "l" + strings.Join(x, "\x00")
	case string:
		k = "s" + x
	default:
		k = "s" + transform.AsString(v)
	}
	if len(k) > 64 {
		h := fnv.New128a()
		h.Write([]byte(k))
		return "h" + string(h.Sum(nil))
	}
	return k
}

// groupKey returns the group of it under field by: the field's value as
// text ("" when by is empty or the item has no value there), cut and
// hashed when longer than maxGroupKey bytes.
func groupKey(it *Item, by string) string {
	if by == "" {
		return ""
	}
	v, ok := transform.Get(it, by)
	if !ok {
		return ""
	}
	return shortGroup(transform.AsString(v))
}

// shortGroup bounds a group name.
func shortGroup(s string) string {
	if len(s) <= maxGroupKey {
		return s
	}
	h := fnv.New64a()
	h.Write([]byte(s))
	cut := s[:maxGroupKey-24]
	for len(cut) > 0 && !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	return fmt.Sprintf("%s…%016x", cut, h.Sum64())
}

// itemTime is the time an item stands for: its reading's observation
// time, else its publish time.
func itemTime(it *Item) time.Time {
	if it.Reading != nil && !it.Reading.Time.IsZero() {
		return it.Reading.Time
	}
	return it.Published
}

// prefixError puts prefix before the field of a *FieldError (or makes
// one naming prefix).
func prefixError(prefix string, err error) error {
	var fe *transform.FieldError
	if errors.As(err, &fe) {
		f := prefix
		if fe.Field != "" {
			f = prefix + "." + fe.Field
		}
		return &transform.FieldError{Field: f, Err: fe.Err}
	}
	return &transform.FieldError{Field: prefix, Err: err}
}

// decode reads a configuration strictly (see transform.Decode).
func decode[T any](raw json.RawMessage) (T, error) {
	return transform.Decode[T](raw)
}
