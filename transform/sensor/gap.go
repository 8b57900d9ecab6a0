package sensor

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// Learning a group's period: the median of its last gapIntervals reading
// intervals, once it has gapMinIntervals of them.
const (
	gapIntervals    = 20
	gapMinIntervals = 3
	maxGapK         = 1000
)

// GapConfig configures gap.
type GapConfig struct {
	// Period is how often a group is expected to report. Unset, it is
	// learned per group as the median of its last 20 reading intervals
	// (once it has 3).
	Period *transform.Duration `json:"period,omitempty" jsonschema:"description=expected reporting period (default: learned per group)"`
	// K is how many periods of silence make a gap (default 3).
	K *float64 `json:"k,omitempty" jsonschema:"description=periods of silence that make a gap (default 3)"`
	// By names the item field that groups readings (default "sensor").
	By *string `json:"by,omitempty" jsonschema:"description=item field that groups readings (default sensor)"`
	// Lateness is how long a reading may arrive out of time order and
	// still be processed in order (default 0); see the package
	// documentation.
	Lateness *transform.Duration `json:"lateness,omitempty" jsonschema:"description=how long readings are waited for to process them in time order (default 0s)"`
}

type gapOp struct {
	period time.Duration // 0: learned
	k      float64
	by     grouper
	groups *groups[gapGroup]
	seq    *sequencer
}

// gapGroup is what gap remembers of a group.
type gapGroup struct {
	last      int64   // newest reading time (Unix ns)
	reported  bool    // a gap item was emitted for last
	intervals []int64 // the last intervals between readings, oldest first
	sensor    string
	feed      uint64
}

func newGap(raw json.RawMessage) (transform.Operator, error) {
	cfg, err := decode[GapConfig](raw, "period", "lateness")
	if err != nil {
		return nil, err
	}
	op := &gapOp{k: 3}
	op.reset()
	if op.period, err = duration("period", cfg.Period, 0, time.Second); err != nil {
		return nil, err
	}
	if cfg.K != nil {
		if !(*cfg.K > 0) || *cfg.K > maxGapK {
			return nil, transform.Fieldf("k", "want a number above 0 and at most %d", maxGapK)
		}
		op.k = *cfg.K
	}
	if op.by, err = newGrouper(cfg.By, "sensor"); err != nil {
		return nil, err
	}
	if op.seq, err = newSequencer(cfg.Lateness); err != nil {
		return nil, err
	}
	return op, nil
}

// reset forgets every group.
func (op *gapOp) reset() *groups[gapGroup] {
	op.groups = newGroups[gapGroup](MaxGroups)
	return op.groups
}

// expected is the group's period: the configured one, or the median of
// its intervals; ok is false while it cannot be learned yet.
func (op *gapOp) expected(g *gapGroup) (time.Duration, bool) {
	if op.period > 0 {
		return op.period, true
	}
	if len(g.intervals) < gapMinIntervals {
		return 0, false
	}
	xs := slices.Clone(g.intervals)
	slices.Sort(xs)
	n := len(xs)
	m := xs[n/2]
	if n%2 == 0 {
		m = xs[n/2-1]/2 + xs[n/2]/2
	}
	return time.Duration(m), m > 0
}

// isGap reports whether silence is a gap for a group of the given
// period.
func (op *gapOp) isGap(silence, period time.Duration) bool {
	return silence.Seconds() > op.k*period.Seconds()
}

func (op *gapOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	c = ctxOrZero(c)
	out, late, err := op.seq.readings(c, in, op.by, true, func(out []transform.Item, it *transform.Item, key string, _ float64) []transform.Item {
		return op.observe(c, out, it, key)
	})
	if err != nil {
		return nil, err
	}
	out = append(out, op.seq.notices(c, late)...)
	// Silence up to now.
	i := 0
	op.groups.each(func(key string, g *gapGroup) {
		if err != nil || g.reported {
			return
		}
		if err = checkEvery(c, i); err != nil {
			return
		}
		i++
		if c.Now.IsZero() {
			return
		}
		// The last allow of it may be readings the sequencer holds back
		// for the lateness allowance: they have arrived, not silence.
		silence := c.Now.Sub(time.Unix(0, g.last))
		if p, ok := op.expected(g); ok && op.isGap(silence-op.seq.allow, p) {
			out = append(out, op.gapItem(c, key, g, silence, p))
			g.reported = true
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// observe takes the reading it of group key into its group, appending a
// gap item to out when the silence before it was a gap.
func (op *gapOp) observe(c *transform.Context, out []transform.Item, it *transform.Item, key string) []transform.Item {
	t, ok := obsTime(it)
	if !ok {
		return out
	}
	ns := t.UnixNano()
	g, created := op.groups.touch(key)
	g.sensor, g.feed = trunc(sensorName(it.Reading, key), maxSensorRunes), it.FeedID
	if created {
		g.last = ns
		return out
	}
	if ns <= g.last {
		return out // repeated (the sequencer keeps the order): the newest reading stays
	}
	silence := time.Duration(ns - g.last)
	if p, ok := op.expected(g); ok && !g.reported && op.isGap(silence, p) {
		out = append(out, op.gapItem(c, key, g, silence, p))
	}
	g.intervals = append(g.intervals, ns-g.last)
	if len(g.intervals) > gapIntervals {
		g.intervals = slices.Delete(g.intervals, 0, len(g.intervals)-gapIntervals)
	}
	g.last, g.reported = ns, false
	return out
}

func (op *gapOp) gapItem(c *transform.Context, key string, g *gapGroup, silence, period time.Duration) transform.Item {
	last := time.Unix(0, g.last).UTC()
	name := g.sensor
	if name == "" {
		name = key
	}
	title := fmt.Sprintf("no reading for %s (expected every %s)", humanDuration(silence), humanDuration(period))
	if name != "" {
		title = name + ": " + title
	}
	return transform.Item{
		FeedID:     g.feed,
		ID:         c.DeriveID(key, last.Format(time.RFC3339Nano)),
		Title:      title,
		Summary:    fmt.Sprintf("%s: last reading at %s, silent for %s; expected every %s (a gap is %g periods).", nameOr(name), fmtTime(last), humanDuration(silence), humanDuration(period), op.k),
		Categories: []string{"gap"},
		Published:  c.Now,
		Reading:    &storage.Reading{Sensor: g.sensor, Value: silence.Seconds(), Unit: "s", Time: last},
	}
}

type gapSaved struct {
	K         string  `json:"k"`
	Last      int64   `json:"last"`
	Reported  bool    `json:"reported,omitempty"`
	Intervals []int64 `json:"intervals,omitempty"`
	Sensor    string  `json:"sensor,omitempty"`
	Feed      uint64  `json:"feed,omitempty"`
}

func (op *gapOp) SaveState() (json.RawMessage, error) {
	return saveOrdered(op.seq, op.groups, func(k string, g *gapGroup) (gapSaved, bool) {
		return gapSaved{K: k, Last: g.last, Reported: g.reported, Intervals: g.intervals, Sensor: g.sensor, Feed: g.feed}, true
	})
}

func (op *gapOp) LoadState(raw json.RawMessage) error {
	return loadOrdered(raw, op.seq, op.reset, func(sg *gapSaved) string { return sg.K },
		func(i int, sg *gapSaved, g *gapGroup) error {
			if _, ok := nanoTime(sg.Last); !ok {
				return malformed(i)
			}
			if len(sg.Intervals) > gapIntervals {
				sg.Intervals = sg.Intervals[len(sg.Intervals)-gapIntervals:]
			}
			iv := make([]int64, 0, len(sg.Intervals))
			for _, x := range sg.Intervals {
				if x > 0 {
					iv = append(iv, x)
				}
			}
			*g = gapGroup{last: sg.Last, reported: sg.Reported, intervals: iv, sensor: trunc(sg.Sensor, maxSensorRunes), feed: sg.Feed}
			return nil
		})
}

func init() {
	transform.Register(transform.Spec{
		Name:   "gap",
		Family: transform.FamilySensor,
		Doc: "Reports silent sensors: when a group has sent nothing for more than k periods (given, or learned as the median of its last 20 intervals), " +
			"emits one gap item for it (category gap). Readings are not passed on; it also fires on runs without input.",
		Example:   `{"period":"5m","k":3,"by":"sensor"}`,
		MinInputs: 1, MaxInputs: 1,
		Config: GapConfig{},
		New:    newGap,
	})
}
