package pipes

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/slogfeed/slogfeed/transform"
)

// checkEvery is how many items an operator handles between two looks at
// the run's deadline.
const checkEvery = 256

// maxString bounds a string constant in a configuration (a rule's value,
// a separator, a replacement), in bytes.
const maxString = 4096

// register adds an operator of the pipes family whose configuration is a
// C, built by build from the decoded configuration.
func register[C any](name, doc, example string, minIn, maxIn int, build func(C) (transform.Operator, error)) {
	var zero C
	transform.Register(transform.Spec{
		Name:      name,
		Family:    transform.FamilyPipes,
		Doc:       doc,
		Example:   example,
		MinInputs: minIn,
		MaxInputs: maxIn,
		Config:    zero,
		New: func(raw json.RawMessage) (transform.Operator, error) {
			cfg, err := transform.Decode[C](raw)
			if err != nil {
				return nil, err
			}
			return build(cfg)
		},
	})
}

// tick returns the run's error every checkEvery items.
func tick(c *transform.Context, i int) error {
	if i%checkEvery == 0 {
		return c.Err()
	}
	return nil
}

// concat returns the items of all inputs, in input order, in a new
// slice (an operator's output never shares its backing array with an
// input).
func concat(in [][]transform.Item) []transform.Item {
	n := 0
	for _, items := range in {
		n += len(items)
	}
	out := make([]transform.Item, 0, n)
	for _, items := range in {
		out = append(out, items...)
	}
	return out
}

// maxItems is the number of items a node may emit in a run of c.
func maxItems(c *transform.Context) int {
	if c.Limits.MaxItems > 0 {
		return c.Limits.MaxItems
	}
	return transform.DefaultLimits.MaxItems
}

// maxText is the number of bytes a string operator may make per field.
func maxText(c *transform.Context) int {
	if c.Limits.MaxText > 0 {
		return c.Limits.MaxText
	}
	return transform.DefaultLimits.MaxText
}

// errTooMany is the error of a node that would emit n items.
func errTooMany(c *transform.Context, n int) error {
	return fmt.Errorf("%w: node would emit %d items, at most %d", transform.ErrLimit, n, maxItems(c))
}

// boundedBuilder is a strings.Builder that stops at max bytes, cutting
// on a UTF-8 boundary.
type boundedBuilder struct {
	b    strings.Builder
	max  int
	full bool
}

func (bb *boundedBuilder) WriteString(s string) {
	if bb.full {
		return
	}
	if room := bb.max - bb.b.Len(); len(s) > room {
		s = transform.CutUTF8(s, room)
		bb.full = true
	}
	bb.b.WriteString(s)
}

func (bb *boundedBuilder) String() string { return bb.b.String() }

// timeValue is a time in a configuration: absolute, or relative to the
// run's time.
type timeValue struct {
	abs time.Time
	rel time.Duration
	// relative is set when the time is c.Now + rel.
	relative bool
}

// at returns the time for a run at now.
func (t timeValue) at(now time.Time) time.Time {
	if t.relative {
		return now.Add(t.rel)
	}
	return t.abs
}

// parseTimeValue reads a time from a configuration: an RFC 3339 (or RFC
// 1123) string, a number of Unix seconds, "now", or a signed duration
// relative to the run's time ("-1h", "+30m", "now-90s").
func parseTimeValue(v any) (timeValue, bool) {
	if s, ok := v.(string); ok {
		s = strings.TrimSpace(s)
		if s == "now" {
			return timeValue{relative: true}, true
		}
		r := strings.TrimPrefix(s, "now")
		if len(r) > 1 && (r[0] == '-' || r[0] == '+') {
			d, err := time.ParseDuration(r)
			if err != nil {
				return timeValue{}, false
			}
			return timeValue{rel: d, relative: true}, true
		}
	}
	t, ok := transform.AsTime(v)
	if !ok {
		return timeValue{}, false
	}
	return timeValue{abs: t}, true
}

// fieldType returns the type of item field name, which must be known.
func fieldType(name string) transform.Type {
	f, err := transform.Field(name)
	if err != nil {
		return ""
	}
	return f.Type
}

// checkTypedField checks that cfgField names an item field (writable when
// asked) of one of the given types.
func checkTypedField(cfgField, name string, writable bool, types ...transform.Type) error {
	if err := transform.CheckField(cfgField, name, writable); err != nil {
		return err
	}
	t := fieldType(name)
	for _, want := range types {
		if t == want {
			return nil
		}
	}
	names := make([]string, len(types))
	for i, want := range types {
		names[i] = string(want)
	}
	return transform.Fieldf(cfgField, "item field %q is a %s field; want a %s field", name, t, strings.Join(names, " or "))
}
