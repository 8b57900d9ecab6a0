package sensor

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// Defaults of join.
const (
	DefaultJoinTolerance = time.Minute
	DefaultJoinMin       = 2
	DefaultJoinSensor    = "join"
	// joinListed is how many contributors a fused item's summary names.
	joinListed = 10
)

// JoinConfig configures join.
type JoinConfig struct {
	// By names the item field that tells the joined series apart
	// (default "sensor"); "feed" groups by the feed an item came from (by
	// input edge when it has none).
	By *string `json:"by,omitempty" jsonschema:"description=item field that tells the series apart (default sensor; feed: by input feed)"`
	// Stat is the statistic of a fused item: mean (default), median, min,
	// max, sum, count or stddev (population).
	Stat string `json:"stat,omitempty" jsonschema:"enum=mean,enum=median,enum=min,enum=max,enum=sum,enum=count,enum=stddev,description=statistic (default mean)"`
	// Tolerance is how far apart in time the joined readings may be
	// (default 1m).
	Tolerance *transform.Duration `json:"tolerance,omitempty" jsonschema:"description=how far apart the joined readings may be (default 1m)"`
	// Min is how many groups must have a new reading within tolerance
	// for a fused item (default 2).
	Min int `json:"min,omitempty" jsonschema:"minimum=1,maximum=10000,description=groups with a new reading needed for a fused item (default 2)"`
	// Unit is the fused reading's unit (default: the readings' unit when
	// they all agree).
	Unit string `json:"unit,omitempty" jsonschema:"description=unit of the fused reading (default: the readings' when they agree)"`
	// Sensor is the fused reading's sensor id (default "join").
	Sensor string `json:"sensor,omitempty" jsonschema:"description=sensor id of the fused reading (default join)"`
	// Emit is "round" (default: one fused item per aligned round) or
	// "each" (one after every reading once min groups are within
	// tolerance).
	Emit string `json:"emit,omitempty" jsonschema:"enum=round,enum=each,description=round (default) or each"`
}

type joinOp struct {
	by     grouper
	byFeed bool
	stat   string
	tol    time.Duration
	min    int
	unit   string
	sensor string
	each   bool

	groups   *groups[joinGroup]
	fused    int64 // time of the last fused item (Unix ns); valid when hasFused
	hasFused bool
	scratch  []float64
	vals     []float64
	points   []joinPoint // scratch of tryRounds
	count    map[string]int
	open     int64 // the earliest reading newer than fused; valid when hasOpen
	hasOpen  bool
	late     uint64 // late readings so far
}

// joinHistory is how many recent readings a group keeps, so that a round
// completes even when one group's next reading arrived before another
// group's reading of the round.
const joinHistory = 8

// joinGroup is a group's recent readings, oldest first (hist's last is
// its latest).
type joinGroup struct {
	hist   []joinPoint
	id     string // the latest reading's item id
	unit   string
	sensor string
}

// joinPoint is one reading of a group.
type joinPoint struct {
	t   int64
	v   float64
	key string // the group (in tryRounds' scratch only)
}

func newJoin(raw json.RawMessage) (transform.Operator, error) {
	cfg, err := decode[JoinConfig](raw, "tolerance")
	if err != nil {
		return nil, err
	}
	op := &joinOp{groups: newGroups[joinGroup](MaxGroups), min: DefaultJoinMin, sensor: DefaultJoinSensor}
	if cfg.By != nil && strings.TrimSpace(*cfg.By) == "feed" {
		op.byFeed = true
	} else if op.by, err = newGrouper(cfg.By, "sensor"); err != nil {
		return nil, err
	}
	if op.stat, err = parseStat(cfg.Stat, joinStats); err != nil {
		return nil, err
	}
	if op.tol, err = duration("tolerance", cfg.Tolerance, DefaultJoinTolerance, 0); err != nil {
		return nil, err
	}
	switch {
	case cfg.Min == 0:
	case cfg.Min < 0 || cfg.Min > MaxGroups:
		return nil, transform.Fieldf("min", "want 1 to %d groups", MaxGroups)
	default:
		op.min = cfg.Min
	}
	if err := checkText("unit", cfg.Unit, maxUnitRunes); err != nil {
		return nil, err
	}
	op.unit = strings.TrimSpace(cfg.Unit)
	if err := checkText("sensor", cfg.Sensor, maxSensorRunes); err != nil {
		return nil, err
	}
	if s := strings.TrimSpace(cfg.Sensor); s != "" {
		op.sensor = s
	}
	switch strings.ToLower(strings.TrimSpace(cfg.Emit)) {
	case "", "round":
	case "each":
		op.each = true
	default:
		return nil, transform.Fieldf("emit", "want \"round\" or \"each\", not %q", trunc(cfg.Emit, 20))
	}
	return op, nil
}

// joinReading is one reading of a batch.
type joinReading struct {
	it  *transform.Item
	key string
	t   int64
	v   float64
}

func (op *joinOp) key(it *transform.Item, input int) string {
	if !op.byFeed {
		return op.by.key(it)
	}
	if it.FeedID != 0 {
		return "feed/" + strconv.FormatUint(it.FeedID, 10)
	}
	return "input/" + strconv.Itoa(input)
}

func (op *joinOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	c = ctxOrZero(c)
	var out []transform.Item
	var rs []joinReading
	n := 0
	for input, items := range in {
		for i := range items {
			if err := checkEvery(c, n); err != nil {
				return nil, err
			}
			n++
			it := &items[i]
			v, ok := value(it)
			if !ok {
				out = append(out, *it) // no reading: unchanged
				continue
			}
			t, ok := obsTime(it)
			if !ok {
				continue // no usable time: dropped
			}
			rs = append(rs, joinReading{it: it, key: op.key(it, input), t: t.UnixNano(), v: v})
		}
	}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].t < rs[j].t })
	for i := range rs {
		if err := checkEvery(c, i); err != nil {
			return nil, err
		}
		r := &rs[i]
		if !op.each && op.hasOpen && r.t > op.open+int64(op.tol) {
			// r lies past the round of the earliest new reading: settle
			// the rounds before it, while the groups' short histories
			// still hold their readings.
			out = op.tryRounds(c, out)
		}
		if op.hasFused && r.t < op.fused-int64(op.tol) {
			// Too old for any fused item to come: late, shown.
			out = append(out, lateNotice(c, &lateReading{it: *r.it, key: r.key, mark: op.fused}, op.tol))
			op.late++
			continue
		}
		if !op.absorb(r) {
			continue
		}
		if !op.each && (!op.hasFused || r.t > op.fused) && (!op.hasOpen || r.t < op.open) {
			op.open, op.hasOpen = r.t, true
		}
		if op.each {
			if x, ok := op.tryEach(c, r); ok {
				out = append(out, x)
			}
		}
	}
	if !op.each {
		out = op.tryRounds(c, out)
	}
	return out, nil
}

// absorb adds r to its group's recent readings. A reading the group
// already has (same time) is ignored, as is one too old to take part in
// any future fused item; one older than the group's latest (a late
// arrival) is kept in order. It reports whether r was added.
func (op *joinOp) absorb(r *joinReading) bool {
	if op.hasFused && r.t < op.fused-int64(op.tol) {
		return false
	}
	if g, ok := op.groups.get(r.key); ok {
		i := sort.Search(len(g.hist), func(i int) bool { return g.hist[i].t >= r.t })
		if i < len(g.hist) && g.hist[i].t == r.t {
			return false
		}
	}
	g, _ := op.groups.touch(r.key)
	i := sort.Search(len(g.hist), func(i int) bool { return g.hist[i].t >= r.t })
	g.hist = append(g.hist, joinPoint{})
	copy(g.hist[i+1:], g.hist[i:])
	g.hist[i] = joinPoint{t: r.t, v: r.v}
	if len(g.hist) > joinHistory {
		g.hist = append(g.hist[:0], g.hist[len(g.hist)-joinHistory:]...)
	}
	if i == len(g.hist)-1 || len(g.hist) == 1 {
		rd := r.it.Reading
		g.id, g.unit, g.sensor = boundKey(r.it.ID), trunc(rd.Unit, maxUnitRunes), trunc(sensorName(rd, r.key), maxSensorRunes)
	}
	return true
}

// contributor is a group's reading taking part in a fused item.
type contributor struct {
	key string
	p   joinPoint
	g   *joinGroup
}

// within returns, for every group with a reading in [lo, hi], its latest
// such reading, by key.
func (op *joinOp) within(lo, hi int64) []contributor {
	var cs []contributor
	op.groups.each(func(k string, g *joinGroup) {
		for i := len(g.hist) - 1; i >= 0; i-- {
			if p := g.hist[i]; p.t >= lo && p.t <= hi {
				cs = append(cs, contributor{k, p, g})
				break
			}
		}
	})
	sort.Slice(cs, func(i, j int) bool { return cs[i].key < cs[j].key })
	return cs
}

// tryRounds emits the fused item of every aligned round that is
// complete: a round starts at the earliest reading newer than the last
// fused item, spans tolerance, and is complete when at least min groups
// have a new reading in it. Its fused item takes, for every group, the
// latest reading within tolerance before the round's newest reading.
// A round that stays incomplete while a later one completes is skipped
// (its readings are older than the later fused item).
func (op *joinOp) tryRounds(c *transform.Context, out []transform.Item) []transform.Item {
	tol := int64(op.tol)
	pts := op.points[:0]
	op.groups.each(func(k string, g *joinGroup) {
		for _, p := range g.hist {
			if !op.hasFused || p.t > op.fused {
				p.key = k
				pts = append(pts, p)
			}
		}
	})
	sort.Slice(pts, func(i, j int) bool {
		if pts[i].t != pts[j].t {
			return pts[i].t < pts[j].t
		}
		return pts[i].key < pts[j].key
	})
	op.points = pts[:0]
	if op.count == nil {
		op.count = make(map[string]int)
	}
	for start := 0; start < len(pts); {
		if c.Err() != nil {
			return out
		}
		// The round anchored at pts[start]: its end, and whether it
		// holds min distinct groups.
		clear(op.count)
		end, newest := start, pts[start].t
		for end < len(pts) && pts[end].t-pts[start].t <= tol {
			op.count[pts[end].key]++
			newest = pts[end].t
			end++
		}
		if len(op.count) < op.min {
			start++ // this anchor cannot complete now; try the next
			continue
		}
		cs := op.within(newest-tol, newest)
		if x, ok := op.item(cs, newest, c.DeriveID(time.Unix(0, newest).UTC().Format(time.RFC3339Nano))); ok {
			out = append(out, x)
		}
		op.fused, op.hasFused = newest, true
		start = end
	}
	op.hasOpen = false
	for _, p := range pts {
		if !op.hasFused || p.t > op.fused {
			op.open, op.hasOpen = p.t, true
			break
		}
	}
	return out
}

// tryEach emits a fused item after reading r when at least min groups
// have a reading within tolerance before it.
func (op *joinOp) tryEach(c *transform.Context, r *joinReading) (transform.Item, bool) {
	cs := op.within(r.t-int64(op.tol), r.t)
	if len(cs) < op.min || (op.hasFused && r.t <= op.fused) {
		return transform.Item{}, false
	}
	op.fused, op.hasFused = r.t, true
	return op.item(cs, r.t, c.DeriveID(time.Unix(0, r.t).UTC().Format(time.RFC3339Nano), r.it.ID))
}

// item makes the fused item of the contributors, observed at newest.
func (op *joinOp) item(cs []contributor, newest int64, id string) (transform.Item, bool) {
	op.vals = op.vals[:0]
	unit, agree := "", true
	for i, x := range cs {
		op.vals = append(op.vals, x.p.v)
		if i == 0 {
			unit = x.g.unit
		} else if x.g.unit != unit {
			agree = false
		}
	}
	s := compute(op.stat, op.vals, &op.scratch)
	if !finite(s) {
		return transform.Item{}, false
	}
	switch {
	case op.unit != "":
		unit = op.unit
	case !agree:
		unit = ""
	}
	unit = statUnit(op.stat, unit)
	at := time.Unix(0, newest).UTC()
	oldest := newest
	var b strings.Builder
	for i, x := range cs {
		oldest = min(oldest, x.p.t)
		if i < joinListed {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(trunc(x.g.sensor, 64))
			b.WriteByte(' ')
			b.WriteString(withUnit(x.p.v, x.g.unit))
		}
	}
	if len(cs) > joinListed {
		fmt.Fprintf(&b, " and %d more", len(cs)-joinListed)
	}
	return transform.Item{
		ID:        id,
		Title:     fmt.Sprintf("%s %s of %d: %s", op.sensor, op.stat, len(cs), withUnit(s, unit)),
		Summary:   fmt.Sprintf("%s of %d readings observed from %s to %s: %s.", op.stat, len(cs), fmtTime(time.Unix(0, oldest)), fmtTime(at), b.String()),
		Published: at,
		Reading:   &storage.Reading{Value: transform.TidyValue(s), Unit: unit, Sensor: op.sensor, Time: at},
	}, true
}

// joinState is join's saved state.
type joinState struct {
	V      int         `json:"v"`
	Fused  *int64      `json:"fused,omitempty"`
	Late   uint64      `json:"late,omitempty"`
	Groups []joinSaved `json:"groups"`
}

type joinSaved struct {
	K  string           `json:"k"`
	H  []joinSavedPoint `json:"h"` // recent readings, oldest first
	ID string           `json:"id,omitempty"`
	U  string           `json:"u,omitempty"`
	S  string           `json:"s,omitempty"`
}

type joinSavedPoint struct {
	T int64   `json:"t"` // Unix ns
	X float64 `json:"x"`
}

func (op *joinOp) SaveState() (json.RawMessage, error) {
	if op.groups.len() == 0 && !op.hasFused && op.late == 0 {
		return nil, nil
	}
	st := joinState{V: stateVersion, Late: op.late}
	if op.hasFused {
		f := op.fused
		st.Fused = &f
	}
	return saveGroups(&st, &st.Groups, op.groups, func(k string, g *joinGroup) (joinSaved, bool) {
		h := make([]joinSavedPoint, len(g.hist))
		for i, p := range g.hist {
			h[i] = joinSavedPoint{T: p.t, X: p.v}
		}
		return joinSaved{K: k, H: h, ID: g.id, U: g.unit, S: g.sensor}, true
	})
}

func (op *joinOp) LoadState(raw json.RawMessage) error {
	var st joinState
	err := loadGroups(raw, &st, &st.Groups, op.reset, func(sg *joinSaved) string { return sg.K },
		func(i int, sg *joinSaved, g *joinGroup) error {
			if len(sg.H) == 0 || len(sg.H) > joinHistory {
				return fmt.Errorf("%w: group %d has %d readings", errState, i, len(sg.H))
			}
			hist := make([]joinPoint, len(sg.H))
			for j, h := range sg.H {
				if _, ok := nanoTime(h.T); !ok || !finite(h.X) || (j > 0 && h.T <= hist[j-1].t) {
					return malformed(i)
				}
				hist[j] = joinPoint{t: h.T, v: h.X}
			}
			*g = joinGroup{hist: hist, id: boundKey(sg.ID), unit: trunc(sg.U, maxUnitRunes), sensor: trunc(sg.S, maxSensorRunes)}
			return nil
		})
	if err != nil {
		return err
	}
	if st.Fused != nil {
		if _, ok := nanoTime(*st.Fused); !ok {
			op.reset()
			return fmt.Errorf("%w: fused time out of range", errState)
		}
		op.fused, op.hasFused = *st.Fused, true
	}
	op.late = st.Late
	op.groups.each(func(_ string, g *joinGroup) {
		for _, p := range g.hist {
			if (!op.hasFused || p.t > op.fused) && (!op.hasOpen || p.t < op.open) {
				op.open, op.hasOpen = p.t, true
			}
		}
	})
	return nil
}

// reset forgets every group and the fused time.
func (op *joinOp) reset() *groups[joinGroup] {
	op.groups = newGroups[joinGroup](MaxGroups)
	op.fused, op.hasFused = 0, false
	op.late = 0
	op.open, op.hasOpen = 0, false
	return op.groups
}

func init() {
	transform.Register(transform.Spec{
		Name:   "join",
		Family: transform.FamilySensor,
		Doc: "Fuses several sensors by time (as-of join): keeps each group's recent readings and, for every aligned round in which at least min groups " +
			"have a new reading within tolerance, emits one item whose value is their mean (median, min, max, sum, count, stddev). All inputs are pooled; " +
			"a round completes even when one sensor's next reading arrives before another's reading of the round.",
		Example:   `{"by":"sensor","stat":"mean","tolerance":"2m","min":20,"unit":"C","sensor":"region"}`,
		MinInputs: 1, MaxInputs: -1,
		Config: JoinConfig{},
		New:    newJoin,
	})
}
