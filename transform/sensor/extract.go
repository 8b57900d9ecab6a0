package sensor

import (
	"encoding/json"
	"regexp"
	"strings"

	"golang.org/x/net/html"

	"github.com/slogfeed/slogfeed/feedext"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// DefaultExtractRegex is the regular expression extract uses when its
// configuration gives none: the first decimal number of the text.
const DefaultExtractRegex = `([-+\x{2212}]?\d+(?:[.,]\d+)?)`

// ExtractConfig configures extract.
type ExtractConfig struct {
	// Field is the item field the number is read from (default "title").
	// HTML fields (summary, content) are reduced to their text first.
	Field string `json:"field,omitempty" jsonschema:"description=item field the number is read from (default title)"`
	// Regex is an RE2 expression whose first capture group is the number
	// (a decimal comma is accepted). Default: the first number.
	Regex string `json:"regex,omitempty" jsonschema:"description=RE2 expression whose first capture group is the number"`
	// Unit is the unit of the readings made.
	Unit string `json:"unit,omitempty" jsonschema:"description=unit of the readings made"`
	// SensorFrom names the item field that gives the reading's sensor id
	// (e.g. "author").
	SensorFrom string `json:"sensor_from,omitempty" jsonschema:"description=item field that gives the sensor id"`
	// Sensor is the sensor id when SensorFrom is not set or empty on an
	// item.
	Sensor string `json:"sensor,omitempty" jsonschema:"description=sensor id when sensor_from gives none"`
	// Keep passes items where nothing matches (without a reading)
	// instead of dropping them.
	Keep bool `json:"keep,omitempty" jsonschema:"description=keep items where nothing matches"`
}

type extractOp struct {
	field      string
	re         *regexp.Regexp
	unit       string
	sensorFrom string
	sensor     string
	keep       bool
}

func newExtract(raw json.RawMessage) (transform.Operator, error) {
	cfg, err := transform.Decode[ExtractConfig](raw)
	if err != nil {
		return nil, err
	}
	op := &extractOp{field: strings.TrimSpace(cfg.Field), keep: cfg.Keep}
	if op.field == "" {
		op.field = "title"
	}
	if err := transform.CheckField("field", op.field, false); err != nil {
		return nil, err
	}
	expr := cfg.Regex
	if expr == "" {
		expr = DefaultExtractRegex
	}
	if op.re, err = transform.CompileRegex("regex", expr); err != nil {
		return nil, err
	}
	if op.re.NumSubexp() < 1 {
		return nil, transform.Fieldf("regex", "needs a capture group around the number")
	}
	if err := checkText("unit", cfg.Unit, maxUnitRunes); err != nil {
		return nil, err
	}
	op.unit = strings.TrimSpace(cfg.Unit)
	if f := strings.TrimSpace(cfg.SensorFrom); f != "" {
		if err := transform.CheckField("sensor_from", f, false); err != nil {
			return nil, err
		}
		op.sensorFrom = f
	}
	if err := checkText("sensor", cfg.Sensor, maxSensorRunes); err != nil {
		return nil, err
	}
	op.sensor = strings.TrimSpace(cfg.Sensor)
	return op, nil
}

func (op *extractOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	c = ctxOrZero(c)
	items := flatten(in)
	out := make([]transform.Item, 0, len(items))
	for i := range items {
		// A match may take a while: look at the deadline every item.
		if err := c.Err(); err != nil {
			return nil, err
		}
		it := &items[i]
		if it.Reading != nil {
			out = append(out, *it)
			continue
		}
		v, ok := op.match(c, it)
		if !ok {
			if op.keep {
				out = append(out, *it)
			}
			continue
		}
		n := transform.Clone(*it)
		n.Reading = &storage.Reading{Value: v, Unit: op.unit, Sensor: op.sensorOf(it), Time: it.Published}
		out = append(out, n)
	}
	return out, nil
}

// match applies the expression to the item's field.
func (op *extractOp) match(c *transform.Context, it *transform.Item) (float64, bool) {
	x, ok := transform.Get(it, op.field)
	if !ok {
		return 0, false
	}
	text := transform.AsString(x)
	if op.field == "summary" || op.field == "content" {
		text = plainText(text)
	}
	m := op.re.FindStringSubmatch(c.RegexInput(text))
	if len(m) < 2 {
		return 0, false
	}
	return parseLocalNumber(m[1])
}

func (op *extractOp) sensorOf(it *transform.Item) string {
	if op.sensorFrom != "" {
		if x, ok := transform.Get(it, op.sensorFrom); ok {
			if s := strings.TrimSpace(plainText(transform.AsString(x))); s != "" {
				return trunc(s, maxSensorRunes)
			}
		}
	}
	return op.sensor
}

// plainText is the text of an HTML fragment, its whitespace collapsed.
func plainText(s string) string {
	if !strings.ContainsAny(s, "<&") {
		return strings.Join(strings.Fields(s), " ")
	}
	z := html.NewTokenizer(strings.NewReader(s))
	var b strings.Builder
	for {
		switch z.Next() {
		case html.ErrorToken:
			return strings.Join(strings.Fields(b.String()), " ")
		case html.TextToken:
			b.Write(z.Text())
		case html.StartTagToken, html.EndTagToken, html.SelfClosingTagToken:
			b.WriteByte(' ')
		}
	}
}

// parseLocalNumber parses a number as people write it in titles
// (feedext.ParseLocalNumber).
func parseLocalNumber(s string) (float64, bool) { return feedext.ParseLocalNumber(s) }

func init() {
	transform.Register(transform.Spec{
		Name:   "extract",
		Family: transform.FamilySensor,
		Doc: "Gives items without a typed reading one, read from a field by a regular expression (first capture group; a decimal comma is accepted). " +
			"Items that already carry a reading keep it; items where nothing matches are dropped unless keep is set.",
		Example:   `{"field":"title","regex":"(-?\\d+(?:[.,]\\d+)?)\\s*°?C","unit":"C","sensor_from":"author"}`,
		MinInputs: 1, MaxInputs: 1,
		Config: ExtractConfig{},
		New:    newExtract,
	})
}
