package transform

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// info describes s for the catalogue.
func info(s Spec) OperatorInfo {
	ex := json.RawMessage(s.Example)
	if len(ex) == 0 || !json.Valid(ex) {
		ex = json.RawMessage("{}")
	}
	return OperatorInfo{Name: s.Name, Family: s.Family, Doc: s.Doc, Example: ex, MinInputs: s.MinInputs, MaxInputs: s.MaxInputs, Schema: schemaOf(s.Config)}
}

// schemaOf returns the JSON Schema (draft 2020-12) of a configuration
// struct, derived from its Go type: json tags name the properties, and a
// field's `doc:"..."` tag, or the description, enum, minimum and maximum
// of a `jsonschema:"description=...,enum=a,enum=b,minimum=0"` tag,
// describe it.
func schemaOf(cfg any) json.RawMessage {
	s := map[string]any{"$schema": "https://json-schema.org/draft/2020-12/schema"}
	if cfg == nil {
		s["type"] = "object"
	} else {
		for k, v := range typeSchema(reflect.TypeOf(cfg), 0) {
			s[k] = v
		}
	}
	b, err := json.Marshal(s)
	if err != nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	return b
}

var (
	rawType      = reflect.TypeOf(json.RawMessage(nil))
	durationType = reflect.TypeOf(Duration(0))
	timeType     = reflect.TypeOf(time.Time{})
	stdDuration  = reflect.TypeOf(time.Duration(0))
)

func typeSchema(t reflect.Type, depth int) map[string]any {
	if depth > 8 {
		return map[string]any{}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case rawType:
		return map[string]any{}
	case durationType:
		return map[string]any{"type": []string{"string", "number"}, "description": "a duration such as \"90s\", \"5m\" or \"1h30m\", or a number of seconds"}
	case stdDuration:
		return map[string]any{"type": "integer", "description": "nanoseconds"}
	case timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": typeSchema(t.Elem(), depth+1)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": typeSchema(t.Elem(), depth+1)}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		props := map[string]any{}
		var order []string
		var required []string
		addStruct(t, props, &order, &required, depth)
		s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(order) > 0 {
			s["x-order"] = order
		}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	}
	return map[string]any{}
}

func addStruct(t reflect.Type, props map[string]any, order, required *[]string, depth int) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addStruct(ft, props, order, required, depth)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		s := typeSchema(f.Type, depth+1)
		if d := f.Tag.Get("doc"); d != "" {
			s["description"] = d
		}
		applySchemaTag(s, f.Tag.Get("jsonschema"))
		if f.Tag.Get("required") == "true" {
			*required = append(*required, name)
		}
		_ = opts
		props[name] = s
		*order = append(*order, name)
	}
}

// applySchemaTag reads description=, enum=, minimum=, maximum= and
// default= settings, separated by commas ("\," is a literal comma).
func applySchemaTag(s map[string]any, tag string) {
	if tag == "" {
		return
	}
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(tag); i++ {
		switch {
		case tag[i] == '\\' && i+1 < len(tag) && tag[i+1] == ',':
			cur.WriteByte(',')
			i++
		case tag[i] == ',':
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(tag[i])
		}
	}
	parts = append(parts, cur.String())
	var enum []any
	for _, p := range parts {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			if p == "required" {
				continue
			}
			continue
		}
		switch k {
		case "description", "title":
			s[k] = v
		case "enum":
			enum = append(enum, schemaValue(s, v))
		case "minimum", "maximum", "default", "minItems", "maxItems", "maxLength", "minLength":
			s[k] = schemaValue(s, v)
		case "pattern", "format":
			s[k] = v
		}
	}
	if len(enum) > 0 {
		s["enum"] = enum
	}
}

func schemaValue(s map[string]any, v string) any {
	if t, _ := s["type"].(string); t == "integer" || t == "number" || t == "array" || t == "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
	}
	if v == "true" || v == "false" {
		return v == "true"
	}
	return v
}
