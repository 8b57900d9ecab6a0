package pipes

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/slogfeed/slogfeed/transform"
)

// RenameConfig is the configuration of "rename".
type RenameConfig struct {
	// Mappings are applied in order, each to the result of the ones
	// before (1 to 32).
	Mappings []Mapping `json:"mappings" jsonschema:"description=field moves or copies applied in order (1 to 32)"`
}

// Mapping moves (or copies) the value of one item field into another.
type Mapping struct {
	// From is the field read.
	From string `json:"from" jsonschema:"description=item field read"`
	// To is the field written (a writable field).
	To string `json:"to" jsonschema:"description=item field written"`
	// Copy keeps From's value; otherwise From is cleared.
	Copy bool `json:"copy,omitempty" jsonschema:"description=keep the value in from (copy instead of move)"`
}

// SetConfig is the configuration of "set".
type SetConfig struct {
	// Field is the item field assigned (a writable field).
	Field string `json:"field" jsonschema:"description=item field assigned"`
	// Value is the constant: a string, a number, a time (RFC 3339, Unix
	// seconds, "now" or relative such as "-1h"), an array of strings for
	// categories, or null to clear the field.
	Value json.RawMessage `json:"value" jsonschema:"description=the constant (null clears the field)"`
}

const maxMappings = 32

func init() {
	register("rename",
		"Moves (or, with copy, copies) the value of one item field into another, converting it to the target field's type; an item lacking the source field, or whose value does not fit the target, is left as it is.",
		`{"mappings":[{"from":"title","to":"summary","copy":true}]}`, 1, 1, newRename)
	register("set",
		"Assigns a constant to an item field of every item (a string, number or time as the field wants; null clears the field).",
		`{"field":"unit","value":"C"}`, 1, 1, newSet)
}

type mapping struct {
	from, to string
	copy     bool
}

type renameOp struct{ maps []mapping }

func newRename(cfg RenameConfig) (transform.Operator, error) {
	if len(cfg.Mappings) == 0 {
		return nil, transform.Fieldf("mappings", "give at least one mapping")
	}
	if len(cfg.Mappings) > maxMappings {
		return nil, transform.Fieldf("mappings", "%w: %d mappings, at most %d", transform.ErrLimit, len(cfg.Mappings), maxMappings)
	}
	op := renameOp{}
	for i, m := range cfg.Mappings {
		path := fmt.Sprintf("mappings[%d]", i)
		// Moving clears the source, so it must be writable too.
		if err := transform.CheckField(path+".from", m.From, !m.Copy); err != nil {
			return nil, err
		}
		if !m.Copy && canonical(m.From) == "id" {
			return nil, transform.Fieldf(path+".from", "an item's id cannot be cleared: copy it instead")
		}
		if err := transform.CheckField(path+".to", m.To, true); err != nil {
			return nil, err
		}
		if canonical(m.From) == canonical(m.To) {
			return nil, transform.Fieldf(path+".to", "same field as from")
		}
		ft, tt := fieldType(m.From), fieldType(m.To)
		if ft == transform.TypeList && (tt == transform.TypeNumber || tt == transform.TypeTime) {
			return nil, transform.Fieldf(path+".to", "a list (%s) cannot become a %s", m.From, tt)
		}
		op.maps = append(op.maps, mapping{canonical(m.From), canonical(m.To), m.Copy})
	}
	return op, nil
}

// canonical returns the name Fields uses for field name.
func canonical(name string) string {
	if f, err := transform.Field(name); err == nil {
		return f.Name
	}
	return name
}

func (o renameOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	out := concat(in)
	for i := range out {
		if err := tick(c, i); err != nil {
			return nil, err
		}
		it := transform.Clone(out[i])
		for _, m := range o.maps {
			v, ok := transform.Get(&it, m.from)
			if !ok {
				continue
			}
			// Set changes nothing when the value does not fit the
			// target; clearing a writable source cannot fail.
			if err := transform.Set(&it, m.to, v); err != nil {
				continue
			}
			if !m.copy {
				_ = transform.Set(&it, m.from, nil)
			}
		}
		out[i] = it
	}
	return out, nil
}

type setOp struct {
	field string
	value any        // nil clears
	tv    *timeValue // for a time field: the time (maybe relative)
}

func newSet(cfg SetConfig) (transform.Operator, error) {
	if err := transform.CheckField("field", cfg.Field, true); err != nil {
		return nil, err
	}
	op := setOp{field: canonical(cfg.Field)}
	if op.field == "id" {
		return nil, transform.Fieldf("field", "setting every item's id to one constant would make them one item")
	}
	raw := bytes.TrimSpace(cfg.Value)
	if len(raw) == 0 {
		return nil, transform.Fieldf("value", "required (null clears the field)")
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, transform.Fieldf("value", "not a JSON value: %v", err)
	}
	switch x := v.(type) {
	case nil:
		return op, nil
	case string:
		if len(x) > maxString {
			return nil, transform.Fieldf("value", "%w: %d bytes, at most %d", transform.ErrLimit, len(x), maxString)
		}
	case float64, bool:
	case []any:
		if fieldType(op.field) != transform.TypeList {
			return nil, transform.Fieldf("value", "an array is only for categories")
		}
		if len(x) > maxInItems {
			return nil, transform.Fieldf("value", "%w: %d values, at most %d", transform.ErrLimit, len(x), maxInItems)
		}
		l := make([]string, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok || len(s) > maxString {
				return nil, transform.Fieldf(fmt.Sprintf("value[%d]", i), "want a string of at most %d bytes", maxString)
			}
			l[i] = s
		}
		v = l
	default:
		return nil, transform.Fieldf("value", "want a string, a number, a time, an array of strings or null")
	}
	if fieldType(op.field) == transform.TypeTime {
		tv, ok := parseTimeValue(v)
		if !ok {
			return nil, transform.Fieldf("value", "want a time: RFC 3339, Unix seconds, \"now\" or relative (\"-1h\")")
		}
		op.tv = &tv
		return op, nil
	}
	// Check the value fits the field once, on a scratch item.
	var scratch transform.Item
	if err := transform.Set(&scratch, op.field, v); err != nil {
		return nil, &transform.FieldError{Field: "value", Err: err}
	}
	op.value = v
	return op, nil
}

func (o setOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	var v any = o.value
	if o.tv != nil {
		if t := o.tv.at(c.Now); !t.IsZero() {
			v = t
		} else {
			v = nil
		}
	}
	out := concat(in)
	for i := range out {
		if err := tick(c, i); err != nil {
			return nil, err
		}
		it := transform.Clone(out[i])
		if err := transform.Set(&it, o.field, v); err != nil {
			return nil, fmt.Errorf("set %s: %w", o.field, err)
		}
		out[i] = it
	}
	return out, nil
}
