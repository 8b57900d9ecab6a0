package sensor

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// Bounds of resample's median: the values one bucket keeps (beyond it a
// bucket keeps a rolling sample of its latest values) and over all
// groups.
const (
	maxBucketValues   = 10000
	minBucketValues   = 64
	maxResampleValues = 1000000
)

// ResampleConfig configures resample.
type ResampleConfig struct {
	// Every is the bucket length (at least 1s).
	Every transform.Duration `json:"every" jsonschema:"required,description=bucket length (e.g. 5m)"`
	// Stat is the statistic of a bucket: mean (default), min, max,
	// median, stddev (population), sum, count, first or last.
	Stat string `json:"stat,omitempty" jsonschema:"enum=mean,enum=min,enum=max,enum=median,enum=stddev,enum=sum,enum=count,enum=first,enum=last,description=statistic (default mean)"`
	// By names the item field that groups readings (default "sensor").
	By *string `json:"by,omitempty" jsonschema:"description=item field that groups readings (default sensor)"`
	// Align shifts the buckets: they start at Align + k·Every after the
	// Unix epoch (default 0).
	Align transform.Duration `json:"align,omitempty" jsonschema:"description=offset of the bucket starts (default 0s)"`
	// Grace is how long after a bucket's end the run's clock closes it
	// when no later reading of its group did (default: Every).
	Grace *transform.Duration `json:"grace,omitempty" jsonschema:"description=how long after its end a bucket closes by the clock (default every)"`
	// Lateness is how long a reading may arrive out of time order and
	// still be processed in order (default 0); see the package
	// documentation.
	Lateness *transform.Duration `json:"lateness,omitempty" jsonschema:"description=how long readings are waited for to process them in time order (default 0s)"`
}

type resampleOp struct {
	every time.Duration
	align int64 // in [0, every)
	grace time.Duration
	stat  string
	by    grouper

	groups  *groups[resGroup]
	values  int // median values held over all groups
	scratch []float64
	seq     *sequencer
}

// resGroup is one group's state: the end of its last closed bucket and
// its open bucket.
type resGroup struct {
	closed    int64 // end of the last closed bucket (Unix ns); valid when hasClosed
	hasClosed bool
	open      *bucket
}

// bucket aggregates the readings of one open bucket.
type bucket struct {
	Start int64   `json:"start"` // Unix ns
	N     int64   `json:"n"`
	Sum   float64 `json:"sum"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
	First float64 `json:"first"`
	Last  float64 `json:"last"`
	Mean  float64 `json:"mean"` // running mean and sum of squared
	M2    float64 `json:"m2"`   // deviations (Welford)
	// Vals holds values for the median.
	Vals []float64 `json:"vals,omitempty"`
	// What the emitted item carries, from the bucket's last reading.
	Sensor string   `json:"sensor,omitempty"`
	Unit   string   `json:"unit,omitempty"`
	Author string   `json:"author,omitempty"`
	Feed   uint64   `json:"feed,omitempty"`
	Lat    *float64 `json:"lat,omitempty"`
	Lon    *float64 `json:"lon,omitempty"`

	// Mixed: the readings' units differ; FirstUnit is then the first
	// reading's.
	Mixed     bool   `json:"mixed,omitempty"`
	FirstUnit string `json:"first_unit,omitempty"`
}

func newResample(raw json.RawMessage) (transform.Operator, error) {
	cfg, err := decode[ResampleConfig](raw, "every", "align", "grace", "lateness")
	if err != nil {
		return nil, err
	}
	op := &resampleOp{}
	op.reset()
	if cfg.Every == 0 {
		return nil, transform.Fieldf("every", "missing: the bucket length (e.g. \"5m\")")
	}
	ev := cfg.Every
	if op.every, err = duration("every", &ev, 0, time.Second); err != nil {
		return nil, err
	}
	if op.stat, err = parseStat(cfg.Stat, resampleStats); err != nil {
		return nil, err
	}
	if op.by, err = newGrouper(cfg.By, "sensor"); err != nil {
		return nil, err
	}
	a := cfg.Align.D()
	if a > MaxDuration || a < -MaxDuration {
		return nil, transform.Fieldf("align", "%w: at most %v either way", transform.ErrLimit, MaxDuration)
	}
	op.align = int64(a) % int64(op.every)
	if op.align < 0 {
		op.align += int64(op.every)
	}
	if op.grace, err = duration("grace", cfg.Grace, op.every, 0); err != nil {
		return nil, err
	}
	if op.seq, err = newSequencer(cfg.Lateness); err != nil {
		return nil, err
	}
	return op, nil
}

// reset forgets every group.
func (op *resampleOp) reset() *groups[resGroup] {
	op.groups = newGroups[resGroup](MaxGroups)
	op.groups.onEvict = func(_ string, g *resGroup) {
		if g.open != nil {
			op.values -= len(g.open.Vals)
		}
	}
	op.values = 0
	return op.groups
}

// bucketStart is the start of the bucket holding Unix time ns.
func (op *resampleOp) bucketStart(ns int64) int64 {
	e := int64(op.every)
	d := ns - op.align
	k := d / e
	if d%e < 0 {
		k--
	}
	return k*e + op.align
}

func (op *resampleOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	c = ctxOrZero(c)
	var tooLate []lateReading
	out, late, err := op.seq.readings(c, in, op.by, false, func(out []transform.Item, it *transform.Item, key string, v float64) []transform.Item {
		return op.fold(c, out, &tooLate, it, key, v)
	})
	if err != nil {
		return nil, err
	}
	late = append(late, tooLate...)
	// The clock closes the buckets whose end + grace has passed.
	i := 0
	op.groups.each(func(key string, g *resGroup) {
		if err != nil || g.open == nil {
			return
		}
		if err = checkEvery(c, i); err != nil {
			return
		}
		i++
		end := time.Unix(0, g.open.Start).Add(op.every)
		if c.Now.IsZero() || c.Now.Before(end.Add(op.grace)) {
			return
		}
		if x, ok := op.close(c, key, g); ok {
			out = append(out, x)
		}
	})
	if err != nil {
		return nil, err
	}
	return append(out, op.seq.notices(c, late)...), nil
}

// fold puts the reading it of group key into its group's open bucket,
// appending to out the bucket it closes. A reading for a bucket already
// closed is appended to *late instead.
func (op *resampleOp) fold(c *transform.Context, out []transform.Item, late *[]lateReading, it *transform.Item, key string, v float64) []transform.Item {
	t, ok := obsTime(it)
	if !ok {
		return out // no usable time: dropped
	}
	start := op.bucketStart(t.UnixNano())
	g, _ := op.groups.touch(key)
	if g.hasClosed && start < g.closed {
		// Late for a bucket the clock closed: shown, not folded in.
		*late = append(*late, lateReading{it: *it, key: key, mark: g.closed - 1})
		op.seq.late++
		return out
	}
	if g.open != nil {
		switch {
		case start < g.open.Start:
			// A later bucket opened: this one counts as closed.
			*late = append(*late, lateReading{it: *it, key: key, mark: g.open.Start})
			op.seq.late++
			return out
		case start > g.open.Start:
			if x, ok := op.close(c, key, g); ok {
				out = append(out, x)
			}
		}
	}
	if g.open == nil {
		g.open = &bucket{Start: start}
	}
	op.add(g.open, v, it)
	return out
}

// add puts a reading into a bucket.
func (op *resampleOp) add(b *bucket, v float64, it *transform.Item) {
	b.N++
	if b.N == 1 {
		b.Min, b.Max, b.First = v, v, v
	}
	b.Sum += v
	b.Min = math.Min(b.Min, v)
	b.Max = math.Max(b.Max, v)
	b.Last = v
	d := v - b.Mean
	b.Mean += d / float64(b.N)
	b.M2 += d * (v - b.Mean)
	if op.stat == statMedian {
		op.keep(b, v)
	}
	r := it.Reading
	if b.N > 1 && !b.Mixed && trunc(r.Unit, maxUnitRunes) != trunc(b.Unit, maxUnitRunes) {
		b.Mixed, b.FirstUnit = true, b.Unit
	}
	b.Sensor, b.Unit, b.Author, b.Feed = r.Sensor, r.Unit, trunc(it.Author, maxSensorRunes), it.FeedID
	b.Lat, b.Lon = nil, nil
	if r.Lat != nil && r.Lon != nil {
		lat, lon := *r.Lat, *r.Lon
		b.Lat, b.Lon = &lat, &lon
	}
}

// keep stores v for the median: while the bucket and the total allow,
// it is added; beyond, it replaces the oldest kept value.
func (op *resampleOp) keep(b *bucket, v float64) {
	if len(b.Vals) < maxBucketValues && (len(b.Vals) < minBucketValues || op.values < maxResampleValues) {
		b.Vals = append(b.Vals, v)
		op.values++
		return
	}
	if len(b.Vals) > 0 {
		b.Vals[int((b.N-1)%int64(len(b.Vals)))] = v
	}
}

// close emits the group's open bucket and closes it.
func (op *resampleOp) close(c *transform.Context, key string, g *resGroup) (transform.Item, bool) {
	b := g.open
	g.open = nil
	op.values -= len(b.Vals)
	end := b.Start + int64(op.every)
	g.closed, g.hasClosed = end, true
	if b.N == 0 {
		return transform.Item{}, false
	}
	var s float64
	switch op.stat {
	case statMean:
		s = b.Mean
		if !finite(s) {
			s = b.Sum / float64(b.N)
		}
	case statMin:
		s = b.Min
	case statMax:
		s = b.Max
	case statSum:
		s = b.Sum
	case statCount:
		s = float64(b.N)
	case statFirst:
		s = b.First
	case statLast:
		s = b.Last
	case statStddev:
		s = math.Sqrt(b.M2 / float64(b.N))
	case statMedian:
		s = compute(statMedian, b.Vals, &op.scratch)
	}
	if !finite(s) {
		return transform.Item{}, false
	}
	start, stop := time.Unix(0, b.Start).UTC(), time.Unix(0, end).UTC()
	unit := statUnit(op.stat, b.unit(op.stat))
	name := op.by.name(&storage.Reading{Sensor: b.Sensor}, key)
	r := &storage.Reading{Value: transform.TidyValue(s), Unit: unit, Sensor: name, Time: start, Lat: b.Lat, Lon: b.Lon}
	if name == "" {
		r.Lat, r.Lon = nil, nil // a pooled statistic is from nowhere in particular
	}
	return transform.Item{
		FeedID:    b.Feed,
		ID:        c.DeriveID(key, start.Format(time.RFC3339Nano)),
		Title:     strings.TrimSpace(fmt.Sprintf("%s %s(%s) at %s: %s", name, op.stat, humanDuration(op.every), fmtTime(start), withUnit(s, unit))),
		Summary:   fmt.Sprintf("%s of %d readings%s from %s to %s.", op.stat, b.N, ofName(name), fmtTime(start), fmtTime(stop)),
		Author:    b.Author,
		Published: stop,
		Reading:   r,
	}, true
}

// unit is the unit of the bucket's statistic stat: its readings' unit;
// when they differ, the first or last reading's for first and last, and
// none for the others.
func (b *bucket) unit(stat string) string {
	switch {
	case !b.Mixed, stat == statLast:
		return b.Unit
	case stat == statFirst:
		return b.FirstUnit
	}
	return ""
}

type resampleGrp struct {
	K      string  `json:"k"`
	Closed *int64  `json:"closed,omitempty"`
	Open   *bucket `json:"open,omitempty"`
}

func (op *resampleOp) SaveState() (json.RawMessage, error) {
	return saveOrdered(op.seq, op.groups, func(k string, g *resGroup) (resampleGrp, bool) {
		sg := resampleGrp{K: k, Open: g.open}
		if g.hasClosed {
			c := g.closed
			sg.Closed = &c
		}
		return sg, true
	})
}

func (op *resampleOp) LoadState(raw json.RawMessage) error {
	return loadOrdered(raw, op.seq, op.reset, func(sg *resampleGrp) string { return sg.K },
		func(i int, sg *resampleGrp, g *resGroup) error {
			if err := op.loadGroup(sg, g); err != nil {
				return fmt.Errorf("%w: group %d: %v", errState, i, err)
			}
			return nil
		})
}

// loadGroup fills g, the group saved as sg, and counts its median
// values; an error says why sg is unusable.
func (op *resampleOp) loadGroup(sg *resampleGrp, g *resGroup) error {
	if g.open != nil { // a repeated key replaces the earlier one
		op.values -= len(g.open.Vals)
	}
	*g = resGroup{}
	if sg.Closed != nil {
		if _, ok := nanoTime(*sg.Closed); !ok {
			return fmt.Errorf("closed time %d out of range", *sg.Closed)
		}
		g.closed, g.hasClosed = *sg.Closed, true
	}
	b := sg.Open
	if b == nil {
		return nil
	}
	if _, ok := nanoTime(b.Start); !ok || b.N < 0 {
		return fmt.Errorf("open bucket malformed")
	}
	if b.Start != op.bucketStart(b.Start) {
		return nil // the buckets changed (every or align): start afresh for this group
	}
	if g.hasClosed && b.Start < g.closed {
		return fmt.Errorf("open bucket before the closed one")
	}
	for _, v := range []float64{b.Sum, b.Min, b.Max, b.First, b.Last, b.Mean, b.M2} {
		if !finite(v) {
			return fmt.Errorf("open bucket holds a non-finite number")
		}
	}
	if len(b.Vals) > maxBucketValues {
		b.Vals = b.Vals[len(b.Vals)-maxBucketValues:]
	}
	for _, v := range b.Vals {
		if !finite(v) {
			return fmt.Errorf("open bucket holds a non-finite number")
		}
	}
	if op.stat != statMedian {
		b.Vals = nil
	}
	if b.Lat != nil && b.Lon != nil {
		if *b.Lat < -90 || *b.Lat > 90 || *b.Lon < -180 || *b.Lon > 180 {
			b.Lat, b.Lon = nil, nil
		}
	} else {
		b.Lat, b.Lon = nil, nil
	}
	b.Sensor, b.Unit, b.Author = trunc(b.Sensor, maxSensorRunes), trunc(b.Unit, maxUnitRunes), trunc(b.Author, maxSensorRunes)
	b.FirstUnit = trunc(b.FirstUnit, maxUnitRunes)
	g.open = b
	op.values += len(b.Vals)
	return nil
}

func init() {
	transform.Register(transform.Spec{
		Name:   "resample",
		Family: transform.FamilySensor,
		Doc: "Fixed time buckets per group: once a bucket closes (a later reading of its group arrived, or the run's clock passed its end plus grace) " +
			"it emits one item whose value is the bucket's statistic, observed at the bucket's start. Late readings for closed buckets are dropped.",
		Example:   `{"every":"5m","stat":"mean","by":"sensor","align":"0s","grace":"1m"}`,
		MinInputs: 1, MaxInputs: 1,
		Config: ResampleConfig{},
		New:    newResample,
	})
}
