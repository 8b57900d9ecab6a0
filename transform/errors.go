package transform

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
)

// Errors of pipe definitions and runs. Errors about one node or field are
// *NodeError and *FieldError values that wrap these, so errors.Is works
// and the message names where the problem is.
var (
	// ErrInvalid means a pipe definition or an operator configuration is
	// wrong: an unknown operator or field, a wrong type, a cycle, a
	// dangling edge.
	ErrInvalid = errors.New("invalid pipe")
	// ErrLimit means a definition exceeds one of the Limits (nodes, regex
	// length, expression size, nesting).
	ErrLimit = errors.New("pipe over a limit")
	// ErrTimeLimit means a run took longer than Limits.RunTime.
	ErrTimeLimit = errors.New("pipe run over its time limit")
	// ErrCostLimit means an expression exceeded its evaluation budget.
	ErrCostLimit = errors.New("expression over its cost limit")
	// ErrByteLimit means a run materialised more bytes than
	// Limits.MaxNodeBytes in one node or Limits.MaxRunBytes in all; the
	// error names the node and the limit.
	ErrByteLimit = errors.New("pipe run over its byte budget")
)

// FieldError is a problem with one field of an operator's configuration
// (Field is a JSON path such as "rules[2].value") or of the pipe itself.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Err.Error()
	}
	return e.Field + ": " + e.Err.Error()
}

func (e *FieldError) Unwrap() error { return e.Err }

// Is makes every FieldError match ErrInvalid unless it wraps ErrLimit.
func (e *FieldError) Is(target error) bool {
	return target == ErrInvalid && !errors.Is(e.Err, ErrLimit)
}

// Fieldf returns a *FieldError for field with a formatted message. Use %w
// to wrap ErrLimit when a limit is the reason.
func Fieldf(field, format string, args ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

// NodeError is a problem with one node of a pipe: its configuration, its
// edges, or its run.
type NodeError struct {
	Node string // the node's id
	Op   string // its operator, when known
	Err  error
}

func (e *NodeError) Error() string {
	var b strings.Builder
	b.WriteString("node ")
	b.WriteString(fmt.Sprintf("%q", e.Node))
	if e.Op != "" {
		b.WriteString(" (" + e.Op + ")")
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *NodeError) Unwrap() error { return e.Err }

// Field returns the field named by the wrapped *FieldError, if any.
func (e *NodeError) Field() string {
	var fe *FieldError
	if errors.As(e.Err, &fe) {
		return fe.Field
	}
	return ""
}

// Decode reads an operator configuration into a T strictly: unknown
// fields, wrong types and trailing data are *FieldError values naming the
// field. An empty or null configuration gives T's zero value.
func Decode[T any](raw json.RawMessage) (T, error) {
	var v T
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return v, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, jsonFieldError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return v, &FieldError{Err: errors.New("data after the configuration object")}
	}
	return v, nil
}

// jsonFieldError turns an encoding/json error into a *FieldError.
func jsonFieldError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		f := te.Field
		return &FieldError{Field: f, Err: fmt.Errorf("want %s, got JSON %s", jsonType(te.Type.String()), te.Value)}
	case errors.As(err, &se):
		return &FieldError{Err: fmt.Errorf("malformed JSON at byte %d: %v", se.Offset, err)}
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return &FieldError{Field: strings.Trim(rest, `"`), Err: errors.New("unknown field")}
	}
	return &FieldError{Err: errors.New(strings.TrimPrefix(msg, "json: "))}
}

func jsonType(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "struct"), strings.Contains(goType, "."):
		if goType == "transform.Duration" {
			return "a duration such as \"90s\", \"5m\" or \"1h\", or seconds"
		}
		return "an object or value of type " + goType
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "true or false"
	case strings.HasPrefix(goType, "int"):
		return "a whole number"
	case strings.HasPrefix(goType, "uint"):
		return "a whole number, 0 or more"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	}
	return goType
}

// Duration is a time.Duration written in JSON as a Go duration string
// ("90s", "5m", "1h30m") or a number of seconds.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string or a number of seconds. Errors
// are *json.UnmarshalTypeError values, so Decode names the field.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	bad := func(what string) error {
		return &json.UnmarshalTypeError{Value: what, Type: reflect.TypeFor[Duration]()}
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return bad("a malformed string")
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return bad(fmt.Sprintf("%q", truncate(s, 40)))
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return bad(truncate(string(b), 40))
	}
	if secs > float64(1<<62)/1e9 || secs < -float64(1<<62)/1e9 {
		return bad("a number out of range")
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// Errors is every problem found in a pipe definition: *NodeError values
// for nodes and edges, *FieldError values for the pipe's own fields
// ("output.slug", "trigger.cron"). It matches ErrInvalid, and ErrLimit
// when one of its errors does.
type Errors []error

func (e Errors) Error() string {
	if len(e) == 1 {
		return e[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems: ", len(e))
	for i, err := range e {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

// Unwrap returns the errors, for errors.Is and errors.As.
func (e Errors) Unwrap() []error { return e }

// Is makes Errors match ErrInvalid.
func (e Errors) Is(target error) bool { return target == ErrInvalid }

// Detail is one problem of a definition in the shape the API returns it.
type Detail struct {
	Node  string `json:"node,omitempty"`
	Op    string `json:"op,omitempty"`
	Field string `json:"field,omitempty"`
	Error string `json:"error"`
}

// Details lists the problems err reports (an Errors, a *NodeError or a
// *FieldError), each with its node and field; nil for other errors.
func Details(err error) []Detail {
	var list Errors
	if !errors.As(err, &list) {
		var ne *NodeError
		var fe *FieldError
		if !errors.As(err, &ne) && !errors.As(err, &fe) {
			return nil
		}
		list = Errors{err}
	}
	out := make([]Detail, 0, len(list))
	for _, e := range list {
		var ne *NodeError
		var fe *FieldError
		switch {
		case errors.As(e, &ne):
			d := Detail{Node: ne.Node, Op: ne.Op, Field: ne.Field(), Error: ne.Err.Error()}
			if errors.As(ne.Err, &fe) {
				d.Error = fe.Err.Error()
			}
			out = append(out, d)
		case errors.As(e, &fe):
			out = append(out, Detail{Field: fe.Field, Error: fe.Err.Error()})
		default:
			out = append(out, Detail{Error: e.Error()})
		}
	}
	return out
}
