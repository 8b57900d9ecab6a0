package ulb

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slogfeed/slogfeed/feedext"
	"github.com/slogfeed/slogfeed/plugins"
	"github.com/slogfeed/slogfeed/plugins/sourcekit"
	"github.com/slogfeed/slogfeed/reader/parser"
)

// Name is the adapter's source type.
const Name = "ulb"

// Limits and defaults.
const (
	// MaxLineLen bounds a trace line, in bytes.
	MaxLineLen = 4096
	// MaxSpeed bounds the time compression.
	MaxSpeed = 10_000
	// DefaultBacklog is how many readings a fetch returns by default.
	DefaultBacklog = 20
	// MaxBacklog bounds Config.Backlog.
	MaxBacklog = 1000
	// maxMoteLen bounds a mote id, in bytes.
	maxMoteLen = 64
	// maxUnixMilli is 9999-12-31T23:59:59.999Z.
	maxUnixMilli = 253402300799999
)

// Quantity is a measured quantity of a trace line.
type Quantity struct {
	// Column is its position on the line, from 0 (A is 0).
	Column int
	// Unit is the unit of its readings ("" for raw light counts).
	Unit string
}

// Quantities are the quantities a replay can publish, by name.
var Quantities = map[string]Quantity{
	"internal_temperature": {3, "C"},
	"voltage":              {4, "V"},
	"humidity":             {5, "%"},
	"temperature":          {6, "C"},
	"par":                  {7, ""},
	"tsr":                  {8, ""},
}

func init() { plugins.RegisterSource(Source{}) }

// Source is the ulb adapter (aggregator.Source and
// aggregator.TimedSource).
type Source struct{}

// Config is the adapter's configuration.
type Config struct {
	Mote     Mote      `json:"mote"`
	Quantity string    `json:"quantity"`
	Speed    float64   `json:"speed"`
	Start    time.Time `json:"start"`
	Loop     *bool     `json:"loop"`
	Backlog  int       `json:"backlog"`
	Sensor   string    `json:"sensor"`
}

// Mote is a mote id, given as a JSON number or text.
type Mote string

// UnmarshalJSON reads a number or text.
func (m *Mote) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*m = Mote(s)
		return nil
	}
	if _, err := strconv.ParseUint(string(b), 10, 64); err != nil {
		return fmt.Errorf("mote is a mote id (a whole number or text), not %s", sourcekit.Quote(string(b)))
	}
	*m = Mote(b)
	return nil
}

// Name implements aggregator.Source.
func (Source) Name() string { return Name }

// Timed implements aggregator.TimedSource: a replay depends on the time.
func (Source) Timed() bool { return true }

// Prepare checks a configuration, fills in the defaults and sets the
// replay's start to now when it has none.
func (Source) Prepare(raw json.RawMessage, now time.Time) (json.RawMessage, error) {
	c, err := parseConfig(raw)
	if err != nil {
		return nil, err
	}
	if c.Start.IsZero() {
		c.Start = now.UTC().Truncate(time.Millisecond)
	}
	return json.Marshal(c)
}

func parseConfig(raw json.RawMessage) (Config, error) {
	var c Config
	if len(bytes.TrimSpace(raw)) == 0 {
		return c, fmt.Errorf("%w: ulb needs a configuration with at least the mote", sourcekit.ErrConfig)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("%w: %v", sourcekit.ErrConfig, err)
	}
	if c.Quantity == "" {
		c.Quantity = "temperature"
	}
	if c.Speed == 0 {
		c.Speed = 1
	}
	if c.Loop == nil {
		yes := true
		c.Loop = &yes
	}
	if c.Backlog == 0 {
		c.Backlog = DefaultBacklog
	}
	if c.Sensor == "" {
		c.Sensor = "mote-" + string(c.Mote)
	}
	switch {
	case c.Mote == "" || len(c.Mote) > maxMoteLen || strings.ContainsFunc(string(c.Mote), func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return c, fmt.Errorf("%w: mote is required: a mote id of the trace (column B), such as 20", sourcekit.ErrConfig)
	case c.Speed < 0 || c.Speed > MaxSpeed || math.IsNaN(c.Speed):
		return c, fmt.Errorf("%w: speed %v is not in (0, %d]", sourcekit.ErrConfig, c.Speed, MaxSpeed)
	case c.Backlog < 1 || c.Backlog > MaxBacklog:
		return c, fmt.Errorf("%w: backlog %d is not in [1, %d]", sourcekit.ErrConfig, c.Backlog, MaxBacklog)
	case !c.Start.IsZero() && (c.Start.Year() < 1970 || c.Start.Year() > 9999):
		return c, fmt.Errorf("%w: start %v is not between 1970 and 9999", sourcekit.ErrConfig, c.Start)
	case len(c.Sensor) > sourcekit.MaxSensorRunes:
		return c, fmt.Errorf("%w: sensor is longer than %d bytes", sourcekit.ErrConfig, sourcekit.MaxSensorRunes)
	}
	if _, ok := Quantities[c.Quantity]; !ok {
		names := make([]string, 0, len(Quantities))
		for n := range Quantities {
			names = append(names, n)
		}
		slices.Sort(names)
		return c, fmt.Errorf("%w: quantity %s is not one of %s", sourcekit.ErrConfig, sourcekit.Quote(c.Quantity), strings.Join(names, ", "))
	}
	return c, nil
}

// point is one reading of the replayed mote: its offset from the trace's
// first arrival and its value.
type point struct {
	line  int
	off   time.Duration
	value float64
}

// trace is what a replay needs of a trace file.
type trace struct {
	points []point       // the mote's readings, by offset
	span   time.Duration // last arrival − first arrival, whole file
	motes  []string      // the motes seen (for an error)
}

// Parse implements aggregator.Source: the newest Backlog readings of the
// mote whose replay time has come by opt.Now, published at their replay
// times.
func (Source) Parse(body []byte, _ string, raw json.RawMessage, opt parser.Options) (*parser.Parsed, error) {
	c, err := parseConfig(raw)
	if err != nil {
		return nil, err
	}
	if c.Start.IsZero() {
		return nil, fmt.Errorf("%w: start is not set (Prepare sets it)", sourcekit.ErrConfig)
	}
	b := sourcekit.NewBuilder("line", opt)
	tr, err := read(body, c, b)
	if err != nil {
		return nil, err
	}
	q := Quantities[c.Quantity]
	for _, rp := range tr.replay(c, opt.Now) {
		b.Add(rp.line, sourcekit.Record{Time: rp.at, Value: rp.value, Unit: q.Unit, Sensor: c.Sensor})
	}
	return b.Parsed(fmt.Sprintf("%s %s (trace replay)", c.Sensor, c.Quantity))
}

// read parses a trace file, keeping the configured mote's readings.
// Lines that are blank or start with '#' are ignored; malformed lines are
// skipped and counted in b. Beyond sourcekit.MaxRecords lines the rest
// of the file is ignored.
func read(body []byte, c Config, b *sourcekit.Builder) (trace, error) {
	col := Quantities[c.Quantity].Column
	var tr trace
	var first, last int64
	haveTime := false
	seen := map[string]bool{}
	for lineNo := 1; len(body) > 0; lineNo++ {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		if len(bytes.TrimSpace(line)) == 0 || bytes.TrimSpace(line)[0] == '#' {
			continue
		}
		if _, ok := b.Next(); !ok {
			break
		}
		if len(line) > MaxLineLen {
			b.Skip(b.Errorf(lineNo, "", "longer than %d bytes", MaxLineLen))
			continue
		}
		f := bytes.Fields(line)
		ms, ok := millis(f[0])
		if !ok {
			b.Skip(b.Errorf(lineNo, "time", "%s is not a Unix time in milliseconds", sourcekit.Quote(string(f[0]))))
			continue
		}
		if len(f) < 2 {
			b.Skip(b.Errorf(lineNo, "mote", "missing"))
			continue
		}
		if !haveTime || ms < first {
			first, haveTime = ms, true
		}
		last = max(last, ms)
		mote := string(f[1])
		if len(seen) < 64 && !seen[mote] {
			seen[mote] = true
			tr.motes = append(tr.motes, mote)
		}
		if mote != string(c.Mote) {
			continue
		}
		if len(f) <= col {
			b.Skip(b.Errorf(lineNo, c.Quantity, "missing (the line has %d columns)", len(f)))
			continue
		}
		v, ok := feedext.ParseLocalNumber(string(f[col]))
		if !ok {
			b.Skip(b.Errorf(lineNo, c.Quantity, "%s is not a number", sourcekit.Quote(string(f[col]))))
			continue
		}
		tr.points = append(tr.points, point{line: lineNo, off: time.Duration(ms), value: v}) // absolute until the end
	}
	if len(tr.points) == 0 {
		if _, err := b.Parsed(""); err != nil {
			return tr, fmt.Errorf("%w: not a ULB trace: %w", parser.ErrMalformed, err)
		}
		if len(tr.motes) == 0 {
			return tr, fmt.Errorf("%w: the trace is empty", parser.ErrMalformed)
		}
		slices.SortFunc(tr.motes, compareMotes)
		return tr, fmt.Errorf("mote %s has no readings of %s in the trace (motes: %s)", sourcekit.Quote(string(c.Mote)), c.Quantity, strings.Join(tr.motes, ", "))
	}
	for i := range tr.points {
		tr.points[i].off = time.Duration(int64(tr.points[i].off)-first) * time.Millisecond
	}
	slices.SortStableFunc(tr.points, func(x, y point) int { return cmp.Compare(x.off, y.off) })
	tr.span = time.Duration(last-first) * time.Millisecond
	return tr, nil
}

// millis parses a Unix time in milliseconds, optionally with a fraction
// (dropped).
func millis(b []byte) (int64, bool) {
	if i := bytes.IndexAny(b, ".,"); i >= 0 {
		for _, c := range b[i+1:] {
			if c < '0' || c > '9' {
				return 0, false
			}
		}
		b = b[:i]
	}
	if len(b) == 0 || b[0] < '0' || b[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || v > maxUnixMilli {
		return 0, false
	}
	return v, true
}

// compareMotes orders mote ids shortest first, so that numeric ids come
// in numeric order.
func compareMotes(x, y string) int {
	return cmp.Or(cmp.Compare(len(x), len(y)), strings.Compare(x, y))
}

// replayed is a reading at its replay time.
type replayed struct {
	point
	at time.Time
}

// cycle is the length of one loop of the trace: its span plus the mote's
// mean interval.
func (tr trace) cycle() time.Duration {
	gap := time.Minute
	if n := len(tr.points); n > 1 {
		gap = (tr.points[n-1].off - tr.points[0].off) / time.Duration(n-1)
	}
	return tr.span + max(gap, time.Millisecond)
}

// replay returns the newest c.Backlog readings whose replay time is at or
// before now, newest first. A zero now replays the whole first loop.
func (tr trace) replay(c Config, now time.Time) []replayed {
	cycle := float64(tr.cycle())
	var elapsed float64 // trace time replayed by now
	if now.IsZero() {
		elapsed = cycle - 1
	} else {
		elapsed = float64(now.Sub(c.Start)) * c.Speed
	}
	if elapsed < 0 || math.IsNaN(elapsed) {
		return nil
	}
	k := 0.0
	if *c.Loop {
		k = math.Floor(elapsed / cycle)
	}
	at := func(k float64, off time.Duration) time.Time {
		return c.Start.Add(time.Duration((k*cycle + float64(off)) / c.Speed))
	}
	var out []replayed
	within := elapsed - k*cycle // trace time into loop k
	for ; k >= 0 && len(out) < c.Backlog; k-- {
		i, _ := slices.BinarySearchFunc(tr.points, within, func(p point, t float64) int {
			if float64(p.off) <= t {
				return -1
			}
			return 1
		})
		for i--; i >= 0 && len(out) < c.Backlog; i-- {
			out = append(out, replayed{point: tr.points[i], at: at(k, tr.points[i].off)})
		}
		within = cycle // earlier loops were replayed whole
	}
	return out
}
