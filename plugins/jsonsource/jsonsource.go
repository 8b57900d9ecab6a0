package jsonsource

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jmespath-community/go-jmespath"
	"github.com/jmespath-community/go-jmespath/pkg/parsing"

	"github.com/slogfeed/slogfeed/feedext"
	"github.com/slogfeed/slogfeed/plugins"
	"github.com/slogfeed/slogfeed/plugins/sourcekit"
	"github.com/slogfeed/slogfeed/reader/parser"
)

// Name is the adapter's source type.
const Name = "json"

// Limits.
const (
	// MaxExprLen bounds each expression, in bytes.
	MaxExprLen = 256
	// MaxDepth bounds the nesting of arrays and objects in a document.
	MaxDepth = 64
	// MaxNodes bounds the values (and object keys) of a document.
	MaxNodes = 500_000
)

// AllowedFunctions are the JMESPath functions expressions may call: those
// whose result is never larger than their arguments.
var AllowedFunctions = []string{
	"abs", "avg", "ceil", "contains", "ends_with", "find_first", "find_last",
	"floor", "keys", "length", "lower", "max", "max_by", "min", "min_by",
	"not_null", "reverse", "sort", "sort_by", "starts_with", "sum",
	"to_number", "trim", "trim_left", "trim_right", "type", "upper", "values",
}

func init() { plugins.RegisterSource(Source{}) }

// Source is the json adapter (aggregator.Source).
type Source struct{}

// Config is the adapter's configuration.
type Config struct {
	Items      string `json:"items"`
	Time       string `json:"time"`
	Value      string `json:"value"`
	Unit       string `json:"unit,omitempty"`
	Sensor     string `json:"sensor,omitempty"`
	ID         string `json:"id,omitempty"`
	TimeFormat string `json:"time_format"`
}

// Name implements aggregator.Source.
func (Source) Name() string { return Name }

// Prepare checks and normalises a configuration: every expression
// compiles and is allowed, the time format is known.
func (Source) Prepare(raw json.RawMessage, _ time.Time) (json.RawMessage, error) {
	c, err := compile(raw)
	if err != nil {
		return nil, err
	}
	return json.Marshal(c.cfg)
}

// compiled is a checked configuration with its expressions compiled.
type compiled struct {
	cfg                                  Config
	items, time, value, unit, sensor, id jmespath.JMESPath
	format                               sourcekit.TimeFormat
}

func compile(raw json.RawMessage) (*compiled, error) {
	var cfg Config
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, fmt.Errorf("%w: json needs a configuration with at least time and value", sourcekit.ErrConfig)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("%w: %v", sourcekit.ErrConfig, err)
	}
	if strings.TrimSpace(cfg.Items) == "" {
		cfg.Items = "@"
	}
	c := &compiled{cfg: cfg}
	var err error
	if c.format, err = sourcekit.ParseTimeFormat(cfg.TimeFormat); err != nil {
		return nil, err
	}
	c.cfg.TimeFormat = string(c.format)
	for _, e := range []struct {
		name, expr     string
		required, root bool
		dst            *jmespath.JMESPath
	}{
		{"items", cfg.Items, true, true, &c.items},
		{"time", cfg.Time, true, false, &c.time},
		{"value", cfg.Value, true, false, &c.value},
		{"unit", cfg.Unit, false, false, &c.unit},
		{"sensor", cfg.Sensor, false, false, &c.sensor},
		{"id", cfg.ID, false, false, &c.id},
	} {
		if strings.TrimSpace(e.expr) == "" {
			if e.required {
				return nil, fmt.Errorf("%w: %s: an expression is required", sourcekit.ErrConfig, e.name)
			}
			continue
		}
		if *e.dst, err = compileExpr(e.expr, e.root); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", sourcekit.ErrConfig, e.name, err)
		}
	}
	return c, nil
}

// compileExpr compiles one expression after checking its length and
// what it calls; root allows the root reference $.
func compileExpr(expr string, root bool) (p jmespath.JMESPath, err error) {
	if len(expr) > MaxExprLen {
		return nil, fmt.Errorf("%d bytes, more than %d", len(expr), MaxExprLen)
	}
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("%s does not compile", sourcekit.Quote(expr))
		}
	}()
	ast, err := parsing.NewParser().Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("%s: %v (write a literal as 'text')", sourcekit.Quote(expr), err)
	}
	if err := check(ast, root); err != nil {
		return nil, fmt.Errorf("%s: %w", sourcekit.Quote(expr), err)
	}
	return jmespath.Compile(expr)
}

// check refuses functions outside AllowedFunctions and, unless root, the
// root reference.
func check(n parsing.ASTNode, root bool) error {
	switch n.NodeType {
	case parsing.ASTFunctionExpression:
		name, _ := n.Value.(string)
		if !slices.Contains(AllowedFunctions, name) {
			return fmt.Errorf("function %s is not allowed (allowed: %s)", sourcekit.Quote(name), strings.Join(AllowedFunctions, ", "))
		}
	case parsing.ASTRootNode:
		if !root {
			return errors.New("the root reference $ is not allowed inside a reading")
		}
	}
	for _, c := range n.Children {
		if err := check(c, root); err != nil {
			return err
		}
	}
	return nil
}

// Parse implements aggregator.Source: the readings the items expression
// selects become items. A document that is not JSON, too deep or too
// large, or whose items expression does not select an array is an error;
// a reading without a usable time or value is skipped and counted.
func (Source) Parse(body []byte, contentType string, raw json.RawMessage, opt parser.Options) (p *parser.Parsed, err error) {
	c, err := compile(raw)
	if err != nil {
		return nil, err
	}
	doc, err := decode(body, contentType)
	if err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("%w: evaluating the expressions failed: %v", parser.ErrMalformed, r)
		}
	}()
	sel, err := c.items.Search(doc)
	if err != nil {
		return nil, fmt.Errorf("items %s: %v", sourcekit.Quote(c.cfg.Items), err)
	}
	list, ok := sel.([]any)
	if !ok {
		return nil, fmt.Errorf("items %s selects %s, not an array of readings", sourcekit.Quote(c.cfg.Items), describe(sel))
	}
	b := sourcekit.NewBuilder("record", opt)
	for _, rec := range list {
		n, ok := b.Next()
		if !ok {
			break
		}
		r, rerr := c.record(b, n, rec)
		if rerr != nil {
			b.Skip(rerr)
			continue
		}
		b.Add(n, r)
	}
	return b.Parsed("")
}

// record evaluates the field expressions on reading n.
func (c *compiled) record(b *sourcekit.Builder, n int, rec any) (sourcekit.Record, *sourcekit.RecordError) {
	var r sourcekit.Record
	tv, err := c.time.Search(rec)
	if err != nil {
		return r, b.Errorf(n, "time", "%v", err)
	}
	switch t := tv.(type) {
	case string:
		r.Time, err = c.format.Text(t)
	case float64:
		r.Time, err = c.format.Number(t)
	case nil:
		err = errors.New("missing")
	default:
		err = fmt.Errorf("%s is not a time", describe(tv))
	}
	if err != nil {
		return r, b.Errorf(n, "time", "%v", err)
	}
	vv, err := c.value.Search(rec)
	if err != nil {
		return r, b.Errorf(n, "value", "%v", err)
	}
	switch v := vv.(type) {
	case float64:
		r.Value = v
	case string:
		var ok bool
		if r.Value, ok = feedext.ParseLocalNumber(v); !ok {
			return r, b.Errorf(n, "value", "%s is not a number", sourcekit.Quote(v))
		}
	case nil:
		return r, b.Errorf(n, "value", "missing")
	default:
		return r, b.Errorf(n, "value", "%s is not a number", describe(vv))
	}
	for _, f := range []struct {
		name string
		expr jmespath.JMESPath
		dst  *string
	}{{"unit", c.unit, &r.Unit}, {"sensor", c.sensor, &r.Sensor}, {"id", c.id, &r.ID}} {
		if f.expr == nil {
			continue
		}
		v, err := f.expr.Search(rec)
		if err != nil {
			return r, b.Errorf(n, f.name, "%v", err)
		}
		if *f.dst, err = text(v); err != nil {
			return r, b.Errorf(n, f.name, "%v", err)
		}
	}
	return r, nil
}

// text turns a scalar into text ("" for null).
func text(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		if len(x) > sourcekit.MaxIDLen {
			return "", fmt.Errorf("%d bytes of text, more than %d", len(x), sourcekit.MaxIDLen)
		}
		return x, nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case bool:
		return strconv.FormatBool(x), nil
	}
	return "", fmt.Errorf("%s, not text", describe(v))
}

// describe names a JSON value's kind for an error message.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "nothing (null)"
	case []any:
		return fmt.Sprintf("an array of %d", len(x))
	case map[string]any:
		return "an object"
	case string:
		return "the text " + sourcekit.Quote(x)
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return "the number " + strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprintf("a %T", v)
}

// decode reads a JSON document after checking its nesting and size.
func decode(body []byte, contentType string) (any, error) {
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("%w: the response is empty", parser.ErrMalformed)
	}
	if trimmed[0] == '<' {
		mt, _, _ := mime.ParseMediaType(contentType)
		return nil, fmt.Errorf("%w: the response is markup (%.60s), not JSON", parser.ErrMalformed, mt)
	}
	if err := scan(trimmed); err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(trimmed, &doc); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("%w: JSON syntax error at byte %d: %v", parser.ErrMalformed, se.Offset, err)
		}
		return nil, fmt.Errorf("%w: %v", parser.ErrMalformed, err)
	}
	return doc, nil
}

// scan refuses a document nested deeper than MaxDepth or with more than
// MaxNodes values, before anything is allocated for it. It counts
// brackets, commas and colons outside strings; syntax is json's business.
func scan(b []byte) error {
	depth, nodes := 0, 1
	inString, escaped := false, false
	for i, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			if depth++; depth > MaxDepth {
				return fmt.Errorf("%w: JSON nested deeper than %d (at byte %d)", parser.ErrMalformed, MaxDepth, i)
			}
		case ']', '}':
			depth--
		case ',', ':':
			if nodes++; nodes > MaxNodes {
				return fmt.Errorf("%w: JSON with more than %d values", parser.ErrMalformed, MaxNodes)
			}
		}
	}
	return nil
}
