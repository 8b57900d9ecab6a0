package sensor

import (
	"bytes"
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// Limits of the sensor operators.
const (
	// MaxGroups bounds the groups a stateful operator remembers; beyond
	// it the least recently updated group is forgotten.
	MaxGroups = 10000
	// MaxWindow bounds the readings of one window (size, or the readings
	// a span holds).
	MaxWindow = 10000
	// MaxWindowTotal bounds the readings a window operator holds over all
	// its groups; beyond it the least recently updated groups are
	// forgotten.
	MaxWindowTotal = 1000000
	// MaxDuration bounds every duration of a configuration (span, every,
	// period, tolerance, grace).
	MaxDuration = 366 * 24 * time.Hour

	maxKeyBytes    = 256
	maxUnitRunes   = 64
	maxSensorRunes = 256
	maxStateBytes  = 64 << 20
	stateVersion   = 1
)

// Observation times usable by the operators that compute with time: a
// reading whose time lies outside [minTime, maxTime) counts as having no
// time. The range is narrow enough that the difference of two usable
// times, plus MaxDuration, fits a time.Duration.
var (
	minTime = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(2150, 1, 1, 0, 0, 0, 0, time.UTC)
)

// errState is wrapped by every LoadState error.
var errState = errors.New("sensor: unusable operator state")

// ctxOrZero returns c, or an empty Context when c is nil.
func ctxOrZero(c *transform.Context) *transform.Context {
	if c == nil {
		return &transform.Context{}
	}
	return c
}

// value returns the value of it's reading; ok is false when it has no
// reading or the value is not finite.
func value(it *transform.Item) (float64, bool) {
	r := it.Reading
	if r == nil || math.IsNaN(r.Value) || math.IsInf(r.Value, 0) {
		return 0, false
	}
	return r.Value, true
}

// obsTime is the observation time of it's reading (the item's publish time
// when the reading has none); ok is false when neither is usable.
func obsTime(it *transform.Item) (time.Time, bool) {
	t := it.Published
	if it.Reading != nil && !it.Reading.Time.IsZero() {
		t = it.Reading.Time
	}
	if !usableTime(t) {
		return time.Time{}, false
	}
	return t, true
}

func usableTime(t time.Time) bool {
	return !t.IsZero() && !t.Before(minTime) && t.Before(maxTime)
}

// nanoTime reads a saved Unix time in nanoseconds; ok is false when it is
// not a usable observation time.
func nanoTime(ns int64) (time.Time, bool) {
	t := time.Unix(0, ns).UTC()
	return t, usableTime(t)
}

// flatten returns the items of all inputs, in input order.
func flatten(in [][]transform.Item) []transform.Item {
	if len(in) == 1 {
		return in[0]
	}
	n := 0
	for _, xs := range in {
		n += len(xs)
	}
	out := make([]transform.Item, 0, n)
	for _, xs := range in {
		out = append(out, xs...)
	}
	return out
}

// checkEvery returns c.Err() every 256 iterations.
func checkEvery(c *transform.Context, i int) error {
	if i&255 == 0 {
		return c.Err()
	}
	return nil
}

// readingFunc handles one reading of a run: it, the item, and v, its
// value. It returns out with what it emits appended.
type readingFunc func(out []transform.Item, it *transform.Item, v float64) []transform.Item

// appendReadings appends to out what fn emits for each item of items that
// carries a reading, in order, checking c every 256 items. An item
// without a reading is appended unchanged, or left out with dropBare.
func appendReadings(c *transform.Context, out, items []transform.Item, dropBare bool, fn readingFunc) ([]transform.Item, error) {
	for i := range items {
		if err := checkEvery(c, i); err != nil {
			return nil, err
		}
		it := &items[i]
		if v, ok := value(it); ok {
			out = fn(out, it, v)
		} else if !dropBare {
			out = append(out, *it) // no reading: unchanged
		}
	}
	return out, nil
}

// grouper computes an item's group: the value of an item field, as text.
type grouper struct {
	field string // "" puts every item in one group
}

// newGrouper reads a "by" configuration (nil: def).
func newGrouper(by *string, def string) (grouper, error) {
	if by == nil {
		return grouper{field: def}, nil
	}
	f := strings.TrimSpace(*by)
	if f == "" {
		return grouper{}, nil
	}
	if err := transform.CheckField("by", f, false); err != nil {
		return grouper{}, err
	}
	return grouper{field: f}, nil
}

func (g grouper) key(it *transform.Item) string {
	if g.field == "" {
		return ""
	}
	v, ok := transform.Get(it, g.field)
	if !ok {
		return ""
	}
	return boundKey(transform.AsString(v))
}

// boundKey makes a group key valid UTF-8 (so that it survives the JSON
// of a saved state) and shortens a long one, keeping distinct keys
// distinct (with a hash of the whole).
func boundKey(k string) string {
	k = strings.ToValidUTF8(k, "\uFFFD")
	if len(k) <= maxKeyBytes {
		return k
	}
	h := fnv.New64a()
	h.Write([]byte(k))
	return strings.ToValidUTF8(k[:maxKeyBytes-17], "") + "#" + fmt.Sprintf("%016x", h.Sum64())
}

// name is what an item a group's readings made is named for: the
// sensor when the group is one sensor's (grouped by sensor), else the
// group's key, "" for one group of every reading (a pooled statistic is
// no one sensor's).
func (g grouper) name(r *storage.Reading, key string) string {
	if g.field == "sensor" {
		return sensorName(r, key)
	}
	return key
}

// ofName is " of name", or nothing for a pooled statistic's "".
func ofName(name string) string {
	if name == "" {
		return ""
	}
	return " of " + name
}

// sensorName is the name titles give a reading: its sensor, else its
// group.
func sensorName(r *storage.Reading, group string) string {
	if r != nil && r.Sensor != "" {
		return r.Sensor
	}
	return group
}

// groups is a bounded map of per-group state that forgets the least
// recently updated group when full.
type groups[V any] struct {
	max int
	// onEvict, when set, is called with every group that is removed.
	onEvict func(key string, v *V)
	m       map[string]*list.Element
	l       *list.List // of *entry[V], least recently updated first
}

type entry[V any] struct {
	key string
	val V
}

func newGroups[V any](max int) *groups[V] {
	return &groups[V]{max: max, m: make(map[string]*list.Element), l: list.New()}
}

// get returns the state of group key without marking it updated.
func (g *groups[V]) get(key string) (*V, bool) {
	e, ok := g.m[key]
	if !ok {
		return nil, false
	}
	return &e.Value.(*entry[V]).val, true
}

// touch returns the state of group key (a zero V for a new group) and
// marks it most recently updated, forgetting the least recently updated
// group when the map is full. created reports a new group.
func (g *groups[V]) touch(key string) (v *V, created bool) {
	if e, ok := g.m[key]; ok {
		g.l.MoveToBack(e)
		return &e.Value.(*entry[V]).val, false
	}
	for g.l.Len() >= g.max && g.l.Len() > 0 {
		g.removeElem(g.l.Front())
	}
	e := g.l.PushBack(&entry[V]{key: key})
	g.m[key] = e
	return &e.Value.(*entry[V]).val, true
}

// oldest returns the least recently updated group.
func (g *groups[V]) oldest() (string, *V, bool) {
	e := g.l.Front()
	if e == nil {
		return "", nil, false
	}
	en := e.Value.(*entry[V])
	return en.key, &en.val, true
}

func (g *groups[V]) remove(key string) {
	if e, ok := g.m[key]; ok {
		g.removeElem(e)
	}
}

func (g *groups[V]) removeElem(e *list.Element) {
	en := e.Value.(*entry[V])
	if g.onEvict != nil {
		g.onEvict(en.key, &en.val)
	}
	delete(g.m, en.key)
	g.l.Remove(e)
}

func (g *groups[V]) len() int { return g.l.Len() }

// each calls fn for every group, least recently updated first.
func (g *groups[V]) each(fn func(key string, v *V)) {
	for e := g.l.Front(); e != nil; e = e.Next() {
		en := e.Value.(*entry[V])
		fn(en.key, &en.val)
	}
}

// Statistics.
const (
	statMean   = "mean"
	statMin    = "min"
	statMax    = "max"
	statMedian = "median"
	statStddev = "stddev"
	statSum    = "sum"
	statCount  = "count"
	statFirst  = "first"
	statLast   = "last"
)

var (
	windowStats   = []string{statMean, statMin, statMax, statMedian, statStddev, statSum, statCount}
	resampleStats = []string{statMean, statMin, statMax, statMedian, statStddev, statSum, statCount, statFirst, statLast}
	joinStats     = []string{statMean, statMedian, statMin, statMax, statSum, statCount, statStddev}
)

// parseStat reads a "stat" configuration ("" gives mean).
func parseStat(s string, allowed []string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return statMean, nil
	}
	if !slices.Contains(allowed, s) {
		return "", transform.Fieldf("stat", "unknown statistic %q (want one of %s)", trunc(s, 20), strings.Join(allowed, ", "))
	}
	return s, nil
}

// compute returns statistic st of vals (in order; at least one). scratch
// is reused for the median. The result may be non-finite when the values
// overflow; callers drop such results.
func compute(st string, vals []float64, scratch *[]float64) float64 {
	n := len(vals)
	if n == 0 {
		return math.NaN()
	}
	switch st {
	case statCount:
		return float64(n)
	case statFirst:
		return vals[0]
	case statLast:
		return vals[n-1]
	case statMin:
		m := vals[0]
		for _, v := range vals[1:] {
			m = math.Min(m, v)
		}
		return m
	case statMax:
		m := vals[0]
		for _, v := range vals[1:] {
			m = math.Max(m, v)
		}
		return m
	case statSum:
		s := 0.0
		for _, v := range vals {
			s += v
		}
		return s
	case statMean:
		return mean(vals)
	case statStddev:
		m := mean(vals)
		ss := 0.0
		for _, v := range vals {
			d := v - m
			ss += d * d
		}
		return math.Sqrt(ss / float64(n))
	case statMedian:
		*scratch = append((*scratch)[:0], vals...)
		return median(*scratch)
	}
	return math.NaN()
}

// mean is the arithmetic mean of vals, without overflowing on large
// values.
func mean(vals []float64) float64 {
	s := 0.0
	for _, v := range vals {
		s += v
	}
	n := float64(len(vals))
	if !math.IsInf(s, 0) {
		return s / n
	}
	s = 0
	for _, v := range vals {
		s += v / n
	}
	return s
}

// median returns the median of xs (reordering it): the middle value, or
// the mean of the two middle values.
func median(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return math.NaN()
	}
	hi := selectK(xs, n/2)
	if n%2 == 1 {
		return hi
	}
	lo := xs[0]
	for _, v := range xs[:n/2] {
		lo = math.Max(lo, v)
	}
	return lo/2 + hi/2
}

// selectK reorders xs so that xs[k] is the k-th smallest, everything
// before it no larger and everything after no smaller, and returns it.
func selectK(xs []float64, k int) float64 {
	lo, hi := 0, len(xs)-1
	for lo < hi {
		// Median of three as pivot keeps sorted input linear.
		mid := lo + (hi-lo)/2
		if xs[mid] < xs[lo] {
			xs[mid], xs[lo] = xs[lo], xs[mid]
		}
		if xs[hi] < xs[lo] {
			xs[hi], xs[lo] = xs[lo], xs[hi]
		}
		if xs[hi] < xs[mid] {
			xs[hi], xs[mid] = xs[mid], xs[hi]
		}
		p := xs[mid]
		i, j := lo, hi
		for i <= j {
			for xs[i] < p {
				i++
			}
			for xs[j] > p {
				j--
			}
			if i <= j {
				xs[i], xs[j] = xs[j], xs[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return xs[k]
		}
	}
	return xs[k]
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// statUnit is the unit of statistic st over readings in unit: counts
// have none.
func statUnit(st, unit string) string {
	if st == statCount {
		return ""
	}
	return unit
}

// fmtNum writes a number for a title: six significant digits, no
// exponent, no trailing zeros.
func fmtNum(v float64) string {
	if math.Abs(v) >= 1e6 {
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	if err != nil {
		r = v
	}
	if r == 0 {
		r = 0 // no "-0"
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// withUnit writes a number and its unit as "21.3 C".
func withUnit(v float64, unit string) string {
	if unit == "" {
		return fmtNum(v)
	}
	return fmtNum(v) + " " + unit
}

// displayUnits are the units titles write differently.
var displayUnits = map[string]string{"C": "°C", "F": "°F", "degC": "°C", "degF": "°F"}

// readingTitle is the readable title of an item carrying r, as in
// "lab-1: 21.3 °C".
func readingTitle(r storage.Reading) string {
	v := fmtNum(r.Value)
	if u := r.Unit; u != "" {
		if d, ok := displayUnits[u]; ok {
			u = d
		}
		v += " " + u
	}
	if r.Sensor != "" {
		return r.Sensor + ": " + v
	}
	return v
}

// revalued is a copy of it whose reading has value v (tidied) in unit,
// titled after it (see readingTitle).
func revalued(it *transform.Item, v float64, unit string) transform.Item {
	n := transform.Clone(*it)
	n.Reading.Value = transform.TidyValue(v)
	n.Reading.Unit = unit
	n.Title = readingTitle(*n.Reading)
	return n
}

// humanDuration writes d to the second, without zero tails: "17m",
// "1h5m", "45s".
func humanDuration(d time.Duration) string {
	if d >= time.Second || d <= -time.Second {
		d = d.Round(time.Second)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// trunc cuts s to at most n runes.
func trunc(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n])
}

// checkText refuses a configuration string longer than n runes.
func checkText(field, s string, n int) error {
	if utf8.RuneCountInString(s) > n {
		return transform.Fieldf(field, "%w: longer than %d characters", transform.ErrLimit, n)
	}
	if !utf8.ValidString(s) {
		return transform.Fieldf(field, "not valid UTF-8")
	}
	return nil
}

// duration checks an optional duration field: nil gives def; the value
// must lie in [lo, MaxDuration].
func duration(field string, d *transform.Duration, def, lo time.Duration) (time.Duration, error) {
	if d == nil {
		return def, nil
	}
	v := d.D()
	if v < lo {
		if lo == 0 {
			return 0, transform.Fieldf(field, "must not be negative")
		}
		return 0, transform.Fieldf(field, "must be at least %v", lo)
	}
	if v > MaxDuration {
		return 0, transform.Fieldf(field, "%w: at most %v", transform.ErrLimit, MaxDuration)
	}
	return v, nil
}

// decode reads a configuration strictly (see transform.Decode). The
// durations are the JSON names of its transform.Duration fields: a bad
// duration is reported under its field's name.
func decode[T any](raw json.RawMessage, durations ...string) (T, error) {
	v, err := transform.Decode[T](raw)
	if err == nil {
		return v, nil
	}
	var fe *transform.FieldError
	if !errors.As(err, &fe) || fe.Field != "" || len(durations) == 0 {
		return v, err
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return v, err
	}
	for _, name := range durations {
		x, ok := fields[name]
		if !ok {
			continue
		}
		var d transform.Duration
		if derr := d.UnmarshalJSON(x); derr != nil && !bytes.Equal(bytes.TrimSpace(x), []byte("null")) {
			return v, &transform.FieldError{Field: name, Err: derr}
		}
	}
	return v, err
}

// State encoding.

// stateHeader is the version every saved state carries.
type stateHeader struct {
	V int `json:"v"`
}

// decodeState reads a saved state into v after checking its size and
// version. Unknown fields are refused: they mean another layout.
func decodeState(raw json.RawMessage, v any) error {
	if len(raw) > maxStateBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", errState, len(raw), maxStateBytes)
	}
	var h stateHeader
	if err := json.Unmarshal(raw, &h); err != nil {
		return fmt.Errorf("%w: %v", errState, err)
	}
	if h.V != stateVersion {
		return fmt.Errorf("%w: version %d, want %d", errState, h.V, stateVersion)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", errState, err)
	}
	return nil
}

// encodeState writes a state.
func encodeState(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("sensor: saving state: %w", err)
	}
	return b, nil
}

// saveGroups encodes st, the saved state of an operator with groups g,
// after listing the groups into *saved, st's list of groups: one entry a
// group, made by enc, least recently updated first so that loadGroups
// restores the order in which groups are forgotten. enc leaves a group
// out by returning false. st is the operator's own state type, so that it
// keeps its layout and any fields besides the groups; an operator with
// nothing to save returns a nil state itself.
func saveGroups[V, S any](st any, saved *[]S, g *groups[V], enc func(key string, v *V) (S, bool)) (json.RawMessage, error) {
	*saved = make([]S, 0, g.len())
	g.each(func(k string, v *V) {
		if s, ok := enc(k, v); ok {
			*saved = append(*saved, s)
		}
	})
	return encodeState(st)
}

// loadGroups restores the groups saved by saveGroups. It forgets every
// group (reset returns the emptied groups), decodes raw into st (see
// decodeState), keeps the newest MaxGroups entries of *saved, st's list of
// groups, and in order marks each entry's group, key(entry) made a valid
// key, updated and has dec fill it. dec refuses a malformed entry, the
// i-th kept one, with an error that names it (see malformed); loadGroups
// then forgets every group again and returns that error, so that a bad
// state leaves a fresh operator. Fields of st besides the groups are left
// to the caller.
func loadGroups[V, S any](raw json.RawMessage, st any, saved *[]S, reset func() *groups[V], key func(*S) string, dec func(i int, s *S, v *V) error) error {
	g := reset()
	if err := decodeState(raw, st); err != nil {
		return err
	}
	list := *saved
	if len(list) > MaxGroups {
		list = list[len(list)-MaxGroups:]
	}
	for i := range list {
		s := &list[i]
		v, _ := g.touch(boundKey(key(s)))
		if err := dec(i, s, v); err != nil {
			reset()
			return err
		}
	}
	return nil
}

// orderedState is the saved state of an operator that puts its input
// through a sequencer (window, deadband, threshold, gap, resample): its
// groups, one S a group, and its sequencer's.
type orderedState[S any] struct {
	V      int       `json:"v"`
	Groups []S       `json:"groups"`
	Order  *seqState `json:"order,omitempty"`
}

// saveOrdered is SaveState of an operator with groups g and sequencer
// seq: nil when neither holds anything, else an orderedState whose groups
// enc lists (see saveGroups).
func saveOrdered[V, S any](seq *sequencer, g *groups[V], enc func(key string, v *V) (S, bool)) (json.RawMessage, error) {
	order := seq.save()
	if g.len() == 0 && order == nil {
		return nil, nil
	}
	st := orderedState[S]{V: stateVersion, Order: order}
	return saveGroups(&st, &st.Groups, g, enc)
}

// loadOrdered is LoadState of an operator saved by saveOrdered: it
// restores the groups as loadGroups does, then the sequencer, which
// starts afresh too when the groups are refused.
func loadOrdered[V, S any](raw json.RawMessage, seq *sequencer, reset func() *groups[V], key func(*S) string, dec func(i int, s *S, v *V) error) error {
	var st orderedState[S]
	err := loadGroups(raw, &st, &st.Groups, reset, key, dec)
	return seq.loaded(err, &st.Order)
}

// malformed is the LoadState error of the i-th saved group when it is
// unusable.
func malformed(i int) error {
	return fmt.Errorf("%w: group %d is malformed", errState, i)
}
