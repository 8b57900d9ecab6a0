package pipes

import (
	"errors"
	"fmt"
	"html"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // time zones on machines without a zoneinfo database
	"unicode"
	"unicode/utf8"

	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/transform"
)

// RegexReplaceConfig is the configuration of "regex_replace".
type RegexReplaceConfig struct {
	// Field is the string item field changed.
	Field string `json:"field" jsonschema:"description=string item field changed"`
	// Pattern is an RE2 regular expression.
	Pattern string `json:"pattern" jsonschema:"description=RE2 regular expression"`
	// Replace replaces each match; $1 or ${name} insert a group, $$ a
	// dollar sign.
	Replace string `json:"replace" jsonschema:"description=replacement: $1 or ${name} insert a group and $$ a dollar"`
	// All replaces every match; otherwise only the first.
	All bool `json:"all,omitempty" jsonschema:"description=replace every match (default only the first)"`
}

// TemplateConfig is the configuration of "template".
type TemplateConfig struct {
	// Field is the string item field written (default "title").
	Field string `json:"field,omitempty" jsonschema:"description=string item field written (default title)"`
	// Template is the text with {field} and {field|format} placeholders
	// (see the package documentation).
	Template string `json:"template" jsonschema:"description=text with {field} and {field|format} placeholders"`
}

// DateFormatConfig is the configuration of "date_format".
type DateFormatConfig struct {
	// Field is the time item field formatted (default "published").
	Field string `json:"field,omitempty" jsonschema:"description=time item field formatted (default published)"`
	// Format is a Go layout ("2006-01-02 15:04") or one of rfc3339
	// (default), rfc1123, date, datetime, unix, kitchen.
	Format string `json:"format,omitempty" jsonschema:"description=Go layout or rfc3339 or rfc1123 or date or datetime or unix or kitchen"`
	// TZ is an IANA time zone ("Europe/Brussels"; default UTC).
	TZ string `json:"tz,omitempty" jsonschema:"description=IANA time zone (default UTC)"`
	// To is the string item field that receives the text.
	To string `json:"to" jsonschema:"description=string item field that receives the text"`
}

// Bounds of the text operators' configurations.
const (
	maxTemplate     = 4096
	maxPlaceholders = 64
	maxLayout       = 64
	maxTZ           = 64
)

func init() {
	register("regex_replace",
		"Replaces the first (or, with all, every) match of a regular expression in a string field; $1 and ${name} in the replacement insert groups.",
		`{"field":"title","pattern":"(\\d+)C","replace":"$1 °C","all":true}`, 1, 1, newRegexReplace)
	register("template",
		"Writes a string field from a template of the item's fields: {field} inserts a value, {field|%.1f} formats a number, {field|15:04} a time (in UTC); {{ and }} are literal braces.",
		`{"field":"title","template":"{sensor}: {value|%.1f} {unit} at {time|15:04}"}`, 1, 1, newTemplate)
	register("date_format",
		"Formats a time field into a string field with a Go layout or a named format (rfc3339, rfc1123, date, datetime, unix, kitchen) in a time zone.",
		`{"field":"published","format":"2006-01-02 15:04","tz":"Europe/Brussels","to":"title"}`, 1, 1, newDateFormat)
}

// ---- regex_replace

// replPart is a piece of a replacement: literal text, or a group (the
// first of groups that took part in the match).
type replPart struct {
	lit    string
	groups []int // nil for a literal; empty for a group the regex lacks
}

type regexReplaceOp struct {
	field string
	re    *regexp.Regexp
	repl  []replPart
	all   bool
}

func newRegexReplace(cfg RegexReplaceConfig) (transform.Operator, error) {
	if err := checkTypedField("field", cfg.Field, true, transform.TypeString); err != nil {
		return nil, err
	}
	if cfg.Pattern == "" {
		return nil, transform.Fieldf("pattern", "required")
	}
	re, err := transform.CompileRegex("pattern", cfg.Pattern)
	if err != nil {
		return nil, err
	}
	if len(cfg.Replace) > maxString {
		return nil, transform.Fieldf("replace", "%w: %d bytes, at most %d", transform.ErrLimit, len(cfg.Replace), maxString)
	}
	return &regexReplaceOp{field: canonical(cfg.Field), re: re, repl: parseReplacement(re, cfg.Replace), all: cfg.All}, nil
}

// parseReplacement reads a replacement as regexp.Regexp.Expand does: $name
// or ${name} is a group by number or name (the longest run of letters,
// digits and '_' after $), $$ a '$', and a '$' that starts neither is
// itself.
func parseReplacement(re *regexp.Regexp, s string) []replPart {
	var parts []replPart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, replPart{lit: lit.String()})
			lit.Reset()
		}
	}
	for len(s) > 0 {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			lit.WriteString(s)
			break
		}
		lit.WriteString(s[:i])
		s = s[i+1:]
		if strings.HasPrefix(s, "$") {
			lit.WriteByte('$')
			s = s[1:]
			continue
		}
		name, rest, ok := groupRef(s)
		if !ok {
			lit.WriteByte('$')
			continue
		}
		s = rest
		flush()
		groups := []int{}
		if n, err := strconv.Atoi(name); err == nil && (name == "0" || name[0] != '0') {
			if n <= re.NumSubexp() {
				groups = append(groups, n)
			}
		} else {
			for gi, gn := range re.SubexpNames() {
				if gi > 0 && gn == name {
					groups = append(groups, gi)
				}
			}
		}
		parts = append(parts, replPart{groups: groups})
	}
	flush()
	return parts
}

// groupRef reads the name of a group reference after a '$': a run of
// letters, digits and '_', maybe in braces.
func groupRef(s string) (name, rest string, ok bool) {
	brace := strings.HasPrefix(s, "{")
	if brace {
		s = s[1:]
	}
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' {
			break
		}
		i += size
	}
	if i == 0 {
		return "", "", false
	}
	name = s[:i]
	if brace {
		if i >= len(s) || s[i] != '}' {
			return "", "", false
		}
		i++
	}
	return name, s[i:], true
}

// expand writes the replacement for match m of s.
func (o *regexReplaceOp) expand(b *boundedBuilder, s string, m []int) {
	for _, p := range o.repl {
		if p.groups == nil {
			b.WriteString(p.lit)
			continue
		}
		for _, g := range p.groups {
			if 2*g+1 < len(m) && m[2*g] >= 0 {
				b.WriteString(s[m[2*g]:m[2*g+1]])
				break
			}
		}
	}
}

func (o *regexReplaceOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	out := concat(in)
	limit := maxText(c)
	for i := range out {
		// A match may take a good part of a second: look at the deadline
		// before every item.
		if err := c.Err(); err != nil {
			return nil, err
		}
		v, ok := transform.Get(&out[i], o.field)
		if !ok {
			continue
		}
		full := v.(string)
		s := c.RegexInput(full) // the rest of the field stays as it is
		var ms [][]int
		if o.all {
			ms = o.re.FindAllStringSubmatchIndex(s, -1)
		} else if m := o.re.FindStringSubmatchIndex(s); m != nil {
			ms = [][]int{m}
		}
		if len(ms) == 0 {
			continue
		}
		b := boundedBuilder{max: limit}
		last := 0
		for _, m := range ms {
			if b.full {
				break
			}
			b.WriteString(s[last:m[0]])
			o.expand(&b, s, m)
			last = m[1]
		}
		b.WriteString(full[last:])
		text := b.String()
		if err := c.Grow(len(text)); err != nil {
			return nil, err
		}
		it := transform.Clone(out[i])
		if err := transform.Set(&it, o.field, text); err != nil {
			continue // an id cannot become empty: leave the item as it is
		}
		out[i] = it
	}
	return out, nil
}

// ---- formats of times and numbers

// timeFormat formats times: a Go layout, or Unix seconds.
type timeFormat struct {
	layout string
	unix   bool
}

var namedFormats = map[string]string{
	"rfc3339":  time.RFC3339,
	"rfc1123":  time.RFC1123,
	"date":     "2006-01-02",
	"datetime": "2006-01-02 15:04:05",
	"kitchen":  time.Kitchen,
}

// Two times that differ in every element a layout can show.
var (
	layoutProbeA = time.Date(2001, 2, 3, 4, 5, 6, 123456789, time.UTC)
	layoutProbeB = time.Date(2012, 11, 12, 16, 17, 18, 987654321, time.UTC)
)

// parseTimeFormat reads a named format or a Go layout from configuration
// field path.
func parseTimeFormat(path, s string) (timeFormat, error) {
	if s == "unix" {
		return timeFormat{unix: true}, nil
	}
	if l, ok := namedFormats[s]; ok {
		return timeFormat{layout: l}, nil
	}
	if len(s) > maxLayout {
		return timeFormat{}, transform.Fieldf(path, "%w: layout is %d bytes, at most %d", transform.ErrLimit, len(s), maxLayout)
	}
	if layoutProbeA.Format(s) == layoutProbeB.Format(s) {
		return timeFormat{}, transform.Fieldf(path, "%q shows no part of a time: want a Go layout such as \"2006-01-02 15:04\" or one of rfc3339, rfc1123, date, datetime, unix, kitchen", clip(s))
	}
	return timeFormat{layout: s}, nil
}

func (f timeFormat) format(t time.Time) string {
	if f.unix {
		return strconv.FormatInt(t.Unix(), 10)
	}
	return t.Format(f.layout)
}

// numberVerb is a printf verb for numbers: %[flags][width][.prec]verb
// with verb one of f e g d x, width and precision of at most two digits.
var numberVerb = regexp.MustCompile(`^%[-+ #0]{0,5}[0-9]{0,2}(?:\.[0-9]{1,2})?[fegdx]$`)

// formatNumber formats v with a verb numberVerb accepts; d and x print
// the nearest integer.
func formatNumber(verb string, v float64) string {
	switch verb[len(verb)-1] {
	case 'd', 'x':
		if math.Abs(v) < 1<<62 {
			return fmt.Sprintf(verb, int64(math.Round(v)))
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return fmt.Sprintf(verb, v)
}

// ---- template

// tmplPart is a piece of a template: literal text or a placeholder.
type tmplPart struct {
	lit   string
	field string // "" for literal text
	verb  string // printf verb of a number field
	tf    *timeFormat
}

type templateOp struct {
	field string
	parts []tmplPart
	// html is set when field holds HTML (summary, content), plain when
	// it holds plain text (title, author, unit, sensor).
	html, plain bool
}

// htmlField reports the string item fields that hold HTML.
func htmlField(name string) bool { return name == "summary" || name == "content" }

// plainField reports the string item fields that hold plain text shown to
// readers.
func plainField(name string) bool {
	return name == "title" || name == "author" || name == "unit" || name == "sensor"
}

func newTemplate(cfg TemplateConfig) (transform.Operator, error) {
	if cfg.Field == "" {
		cfg.Field = "title"
	}
	if err := checkTypedField("field", cfg.Field, true, transform.TypeString); err != nil {
		return nil, err
	}
	parts, err := parseTemplate("template", cfg.Template)
	if err != nil {
		return nil, err
	}
	field := canonical(cfg.Field)
	return &templateOp{field: field, parts: parts, html: htmlField(field), plain: plainField(field)}, nil
}

// parseTemplate reads a template from configuration field path.
func parseTemplate(path, s string) ([]tmplPart, error) {
	if s == "" {
		return nil, transform.Fieldf(path, "required")
	}
	if len(s) > maxTemplate {
		return nil, transform.Fieldf(path, "%w: %d bytes, at most %d", transform.ErrLimit, len(s), maxTemplate)
	}
	if !utf8.ValidString(s) {
		return nil, transform.Fieldf(path, "not valid UTF-8")
	}
	var parts []tmplPart
	var lit strings.Builder
	placeholders := 0
	for i := 0; i < len(s); {
		switch s[i] {
		case '{':
			if strings.HasPrefix(s[i:], "{{") {
				lit.WriteByte('{')
				i += 2
				continue
			}
			end := strings.IndexAny(s[i+1:], "{}")
			if end < 0 || s[i+1+end] != '}' {
				return nil, transform.Fieldf(path, "placeholder at byte %d has no closing '}' (write {{ for a literal brace)", i)
			}
			placeholders++
			if placeholders > maxPlaceholders {
				return nil, transform.Fieldf(path, "%w: more than %d placeholders", transform.ErrLimit, maxPlaceholders)
			}
			p, err := parsePlaceholder(path, s[i+1:i+1+end])
			if err != nil {
				return nil, err
			}
			if lit.Len() > 0 {
				parts = append(parts, tmplPart{lit: lit.String()})
				lit.Reset()
			}
			parts = append(parts, p)
			i += end + 2
		case '}':
			if !strings.HasPrefix(s[i:], "}}") {
				return nil, transform.Fieldf(path, "'}' at byte %d closes no placeholder (write }} for a literal brace)", i)
			}
			lit.WriteByte('}')
			i += 2
		default:
			j := strings.IndexAny(s[i:], "{}")
			if j < 0 {
				j = len(s) - i
			}
			lit.WriteString(s[i : i+j])
			i += j
		}
	}
	if lit.Len() > 0 {
		parts = append(parts, tmplPart{lit: lit.String()})
	}
	return parts, nil
}

// parsePlaceholder reads "field" or "field|format".
func parsePlaceholder(path, s string) (tmplPart, error) {
	name, format, hasFormat := strings.Cut(s, "|")
	name, format = strings.TrimSpace(name), strings.TrimSpace(format)
	if name == "" {
		return tmplPart{}, transform.Fieldf(path, "placeholder {%s} names no field", clip(s))
	}
	f, err := transform.Field(name)
	if err != nil {
		return tmplPart{}, &transform.FieldError{Field: path, Err: fmt.Errorf("placeholder {%s}: %w", clip(s), err)}
	}
	p := tmplPart{field: f.Name}
	if !hasFormat || format == "" {
		return p, nil
	}
	switch f.Type {
	case transform.TypeNumber:
		if !numberVerb.MatchString(format) {
			return tmplPart{}, transform.Fieldf(path, "placeholder {%s}: %q is not a number format: want %%[flags][width][.precision]verb with verb f, e, g, d or x (e.g. %%.1f)", clip(s), clip(format))
		}
		p.verb = format
	case transform.TypeTime:
		tf, err := parseTimeFormat(path, format)
		if err != nil {
			var fe *transform.FieldError
			if errors.As(err, &fe) {
				return tmplPart{}, &transform.FieldError{Field: path, Err: fmt.Errorf("placeholder {%s}: %w", clip(s), fe.Err)}
			}
			return tmplPart{}, err
		}
		p.tf = &tf
	default:
		return tmplPart{}, transform.Fieldf(path, "placeholder {%s}: formats apply to number and time fields, %s is a %s field", clip(s), name, f.Type)
	}
	return p, nil
}

func (o *templateOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	out := concat(in)
	limit := maxText(c)
	for i := range out {
		if err := tick(c, i); err != nil {
			return nil, err
		}
		text := o.render(&out[i], limit)
		if o.plain {
			text = sanitize.Text(text, 0)
		}
		if err := c.Grow(len(text)); err != nil {
			return nil, err
		}
		it := transform.Clone(out[i])
		if err := transform.Set(&it, o.field, text); err != nil {
			it = out[i] // an id cannot become empty: leave the item as it is
		}
		out[i] = it
	}
	return out, nil
}

// render returns the template's text for it, at most limit bytes.
func (o *templateOp) render(it *transform.Item, limit int) string {
	b := boundedBuilder{max: limit}
	for _, p := range o.parts {
		if b.full {
			break
		}
		if p.field == "" {
			b.WriteString(p.lit)
			continue
		}
		v, ok := transform.Get(it, p.field)
		if !ok {
			continue
		}
		switch {
		case p.verb != "":
			n, _ := v.(float64)
			b.WriteString(formatNumber(p.verb, n))
		case p.tf != nil:
			t, _ := v.(time.Time)
			b.WriteString(p.tf.format(t.UTC()))
		default:
			s := transform.AsString(v)
			switch {
			case o.html && !htmlField(p.field):
				s = html.EscapeString(s)
			case o.plain && htmlField(p.field):
				s = sanitize.PlainText(s, 0)
			}
			b.WriteString(s)
		}
	}
	return b.String()
}

// ---- date_format

type dateFormatOp struct {
	field, to string
	tf        timeFormat
	loc       *time.Location
}

func newDateFormat(cfg DateFormatConfig) (transform.Operator, error) {
	if cfg.Field == "" {
		cfg.Field = "published"
	}
	if err := checkTypedField("field", cfg.Field, false, transform.TypeTime); err != nil {
		return nil, err
	}
	if cfg.To == "" {
		return nil, transform.Fieldf("to", "required: the string field that receives the text")
	}
	if err := checkTypedField("to", cfg.To, true, transform.TypeString); err != nil {
		return nil, err
	}
	if cfg.Format == "" {
		cfg.Format = "rfc3339"
	}
	tf, err := parseTimeFormat("format", cfg.Format)
	if err != nil {
		return nil, err
	}
	loc, err := loadTZ("tz", cfg.TZ)
	if err != nil {
		return nil, err
	}
	return &dateFormatOp{field: cfg.Field, to: canonical(cfg.To), tf: tf, loc: loc}, nil
}

// loadTZ reads an IANA time zone from configuration field path ("" and
// "UTC" are UTC; the machine's "Local" zone is refused).
func loadTZ(path, name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if len(name) > maxTZ {
		return nil, transform.Fieldf(path, "%w: time zone name is %d bytes, at most %d", transform.ErrLimit, len(name), maxTZ)
	}
	if name == "Local" {
		return nil, transform.Fieldf(path, "the machine's local zone is not allowed: name a zone such as \"Europe/Brussels\"")
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, transform.Fieldf(path, "unknown time zone %q (want an IANA name such as \"Europe/Brussels\")", clip(name))
	}
	return loc, nil
}

func (o *dateFormatOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	out := concat(in)
	for i := range out {
		if err := tick(c, i); err != nil {
			return nil, err
		}
		v, ok := transform.Get(&out[i], o.field)
		if !ok {
			continue
		}
		t, _ := v.(time.Time)
		it := transform.Clone(out[i])
		if err := transform.Set(&it, o.to, o.tf.format(t.In(o.loc))); err != nil {
			continue
		}
		out[i] = it
	}
	return out, nil
}
