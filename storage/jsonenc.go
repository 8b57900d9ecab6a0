package storage

import (
	"encoding/json"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/slogfeed/slogfeed/schedule"
)

// The records a poll writes (its feed record, its observation, its new
// items) are encoded by hand-written appenders that give exactly the
// bytes json.Marshal gives: the stored format does not change, and
// neither does anything that reads it. json.Marshal walks the types by
// reflection, which took 6–12% of a poll's CPU (and, deep in the
// reflection, the stack growth of the goroutine running it). An appender
// reports false for anything json.Marshal would refuse (a time outside
// years 0–9999, a NaN, invalid raw JSON); the caller then calls
// json.Marshal for its error. jsonenc_test.go holds each appender to
// json.Marshal on values filled field by field by reflection, so that a
// field added to a record and not to its appender fails the test.

// encBufs holds scratch buffers the appenders write into before the
// result is copied out at its size.
var encBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// copyOut returns a copy of b, what an appender wrote into the scratch
// buffer *bp, and puts *bp back in the pool.
func copyOut(bp *[]byte, b []byte) []byte {
	out := make([]byte, len(b))
	copy(out, b)
	if cap(b) <= 1<<20 {
		*bp = b[:0]
		encBufs.Put(bp)
	}
	return out
}

// The marshal functions below call their appender directly and hand
// json.Marshal a copy of the value: a value passed to json.Marshal (an
// interface) escapes, and the caller's record would be allocated on the
// heap at every call, not only when the appender declines.

// marshalFeed is json.Marshal(f).
func marshalFeed(f *Feed) ([]byte, error) {
	bp := encBufs.Get().(*[]byte)
	if b, ok := appendFeedJSON((*bp)[:0], f); ok {
		return copyOut(bp, b), nil
	}
	encBufs.Put(bp)
	c := *f
	return json.Marshal(&c)
}

// marshalObservation is json.Marshal(o).
func marshalObservation(o *Observation) ([]byte, error) {
	bp := encBufs.Get().(*[]byte)
	if b, ok := appendObservationJSON((*bp)[:0], o); ok {
		return copyOut(bp, b), nil
	}
	encBufs.Put(bp)
	c := *o
	return json.Marshal(&c)
}

// marshalItem is json.Marshal(it) with Seq replaced by seq.
func marshalItem(it *Item, seq uint64) ([]byte, error) {
	bp := encBufs.Get().(*[]byte)
	if b, ok := appendItemSeqJSON((*bp)[:0], it, seq); ok {
		return copyOut(bp, b), nil
	}
	encBufs.Put(bp)
	c := *it
	c.Seq = seq
	return json.Marshal(&c)
}

const jsonHex = "0123456789abcdef"

// jsonSafe[b] reports that ASCII byte b stands for itself in a JSON string
// as json.Marshal writes it (HTML characters escaped).
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
	}
	return t
}()

// appendJSONString appends s as a JSON string, escaped as json.Marshal
// escapes it: HTML characters, U+2028 and U+2029 as \u escapes, invalid
// UTF-8 as \ufffd.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', jsonHex[c>>4], jsonHex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', jsonHex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendJSONTime appends t as time.Time's MarshalJSON does, or reports
// false where MarshalJSON fails.
func appendJSONTime(b []byte, t time.Time) ([]byte, bool) {
	b = append(b, '"')
	b, err := t.AppendText(b)
	if err != nil {
		return nil, false
	}
	return append(b, '"'), true
}

// appendJSONFloat appends f as json.Marshal writes a float64 (ES6 number
// formatting), or reports false for a NaN or an infinity.
func appendJSONFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 is written e-9.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

// appendJSONRaw appends raw as json.Marshal writes a json.RawMessage
// (compacted, HTML characters escaped; null when nil), or reports false
// when raw is not valid JSON.
func appendJSONRaw(b []byte, raw json.RawMessage) ([]byte, bool) {
	out, err := json.Marshal(raw)
	if err != nil {
		return nil, false
	}
	return append(b, out...), true
}

// appendJSONArray appends vs as a JSON array of what appendV writes, or
// reports false when appendV does for one of them.
func appendJSONArray[T any](b []byte, vs []T, appendV func([]byte, T) ([]byte, bool)) ([]byte, bool) {
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = appendV(b, v); !ok {
			return nil, false
		}
	}
	return append(b, ']'), true
}

// appendJSONStrings appends a []string (null when nil).
func appendJSONStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// jsonObj appends an object's fields: key writes the separator and the
// quoted name (names are plain ASCII, written as they are).
type jsonObj struct {
	b     []byte
	first bool
	ok    bool
}

func newJSONObj(b []byte) jsonObj { return jsonObj{b: append(b, '{'), first: true, ok: true} }

func (o *jsonObj) key(name string) {
	if !o.first {
		o.b = append(o.b, ',')
	}
	o.first = false
	o.b = append(o.b, '"')
	o.b = append(o.b, name...)
	o.b = append(o.b, '"', ':')
}

func (o *jsonObj) str(name, v string) {
	o.key(name)
	o.b = appendJSONString(o.b, v)
}

func (o *jsonObj) strOmit(name, v string) {
	if v != "" {
		o.str(name, v)
	}
}

func (o *jsonObj) int(name string, v int64) {
	o.key(name)
	o.b = strconv.AppendInt(o.b, v, 10)
}

func (o *jsonObj) intOmit(name string, v int64) {
	if v != 0 {
		o.int(name, v)
	}
}

func (o *jsonObj) uint(name string, v uint64) {
	o.key(name)
	o.b = strconv.AppendUint(o.b, v, 10)
}

func (o *jsonObj) bool(name string, v bool) {
	o.key(name)
	o.b = strconv.AppendBool(o.b, v)
}

func (o *jsonObj) boolOmit(name string, v bool) {
	if v {
		o.bool(name, v)
	}
}

func (o *jsonObj) float(name string, v float64) {
	o.key(name)
	if o.ok {
		o.b, o.ok = appendJSONFloat(o.b, v)
	}
}

func (o *jsonObj) floatOmit(name string, v float64) {
	if v != 0 {
		o.float(name, v)
	}
}

func (o *jsonObj) time(name string, v time.Time) {
	o.key(name)
	if o.ok {
		o.b, o.ok = appendJSONTime(o.b, v)
	}
}

// timeOmitZero is a field tagged omitzero.
func (o *jsonObj) timeOmitZero(name string, v time.Time) {
	if !v.IsZero() {
		o.time(name, v)
	}
}

func (o *jsonObj) rawOmit(name string, v json.RawMessage) {
	if len(v) > 0 && o.ok {
		o.key(name)
		o.b, o.ok = appendJSONRaw(o.b, v)
	}
}

func (o *jsonObj) strsOmit(name string, v []string) {
	if len(v) > 0 {
		o.key(name)
		o.b = appendJSONStrings(o.b, v)
	}
}

func (o *jsonObj) end() ([]byte, bool) {
	if !o.ok {
		return nil, false
	}
	return append(o.b, '}'), true
}

// appendFeedJSON appends json.Marshal(f), or reports false where it fails.
func appendFeedJSON(b []byte, f *Feed) ([]byte, bool) {
	o := newJSONObj(b)
	o.uint("id", f.ID)
	o.str("kind", string(f.Kind))
	o.strOmit("url", f.URL)
	o.strOmit("slug", f.Slug)
	o.strOmit("title", f.Title)
	o.strOmit("site", f.Site)
	o.strsOmit("category", f.Category)
	o.str("policy", f.Policy)
	o.floatOmit("weight", f.Weight)
	o.boolOmit("ignore_cache", f.IgnoreCache)
	o.key("sleep")
	o.b = appendSleepJSON(o.b, &f.Sleep, &o.ok)
	o.intOmit("update_hint", int64(f.UpdateHint))
	o.time("next_fetch", f.NextFetch)
	o.strOmit("etag", f.ETag)
	o.strOmit("last_modified", f.LastModified)
	o.strOmit("last_error", f.LastError)
	o.intOmit("error_count", int64(f.ErrorCount))
	o.time("last_error_at", f.LastErrorAt)
	o.time("retry_after", f.RetryAfter)
	o.int("polls", f.Polls)
	o.int("hits", f.Hits)
	o.int("items", f.Items)
	o.float("latency_sum_s", f.LatencySumS)
	o.int("latency_count", f.LatencyCount)
	o.time("last_fetch", f.LastFetch)
	o.time("last_hit", f.LastHit)
	o.key("retention")
	r := newJSONObj(o.b)
	r.intOmit("max_items", int64(f.Retention.MaxItems))
	r.intOmit("max_age", int64(f.Retention.MaxAge))
	o.b, _ = r.end()
	if e := f.Extract; e != nil {
		o.key("extract")
		x := newJSONObj(o.b)
		x.str("field", e.Field)
		x.str("regex", e.Regex)
		x.strOmit("unit", e.Unit)
		o.b, _ = x.end()
	}
	o.rawOmit("reduce", f.Reduce)
	if src := f.Source; src != nil && o.ok {
		o.key("source")
		s := newJSONObj(o.b)
		s.str("type", src.Type)
		s.rawOmit("config", src.Config)
		o.b, o.ok = s.end()
		if !o.ok {
			return nil, false
		}
	}
	o.strOmit("warning", f.Warning)
	o.intOmit("invalid_utf8", f.InvalidUTF8)
	o.intOmit("bad_dates", f.BadDates)
	o.strOmit("last_repair", f.LastRepair)
	o.timeOmitZero("last_repair_at", f.LastRepairAt)
	o.boolOmit("repairs_per_item", f.RepairsPerItem)
	o.time("created", f.Created)
	o.time("updated", f.Updated)
	return o.end()
}

// appendSleepJSON appends a schedule.SleepPlan (no JSON tags: Go's field
// names), clearing *ok where a window's time cannot be encoded.
func appendSleepJSON(b []byte, p *schedule.SleepPlan, ok *bool) []byte {
	o := newJSONObj(b)
	o.uint("SkipHours", uint64(p.SkipHours))
	o.uint("SkipDays", uint64(p.SkipDays))
	o.key("Daily")
	if p.Daily == nil {
		o.b = append(o.b, "null"...)
	} else {
		o.b = append(o.b, '[')
		for i, w := range p.Daily {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			d := newJSONObj(o.b)
			d.int("From", int64(w.From))
			d.int("To", int64(w.To))
			o.b, _ = d.end()
		}
		o.b = append(o.b, ']')
	}
	o.key("Windows")
	if p.Windows == nil {
		o.b = append(o.b, "null"...)
	} else {
		o.b = append(o.b, '[')
		for i, w := range p.Windows {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			d := newJSONObj(o.b)
			d.time("Start", w.Start)
			d.time("End", w.End)
			var wok bool
			if o.b, wok = d.end(); !wok {
				*ok = false
				return b
			}
		}
		o.b = append(o.b, ']')
	}
	out, _ := o.end()
	return out
}

// appendObservationJSON appends json.Marshal(o), or reports false where it
// fails.
func appendObservationJSON(b []byte, ob *Observation) ([]byte, bool) {
	o := newJSONObj(b)
	o.time("at", ob.At)
	o.bool("hit", ob.Hit)
	if len(ob.Published) > 0 && o.ok {
		o.key("published")
		if o.b, o.ok = appendJSONArray(o.b, ob.Published, appendJSONTime); !o.ok {
			return nil, false
		}
	}
	o.boolOmit("more", ob.MoreData)
	o.key("hints")
	h := newJSONObj(o.b)
	h.int("Desync", int64(ob.Hints.Desync))
	h.int("Phase", int64(ob.Hints.Phase))
	h.bool("HasPhase", ob.Hints.HasPhase)
	h.int("CacheFor", int64(ob.Hints.CacheFor))
	h.int("Period", int64(ob.Hints.Period))
	h.int("Due", int64(ob.Hints.Due))
	h.bool("HasDue", ob.Hints.HasDue)
	o.b, _ = h.end()
	if len(ob.LatencyS) > 0 && o.ok {
		o.key("latency_s")
		if o.b, o.ok = appendJSONArray(o.b, ob.LatencyS, appendJSONFloat); !o.ok {
			return nil, false
		}
	}
	o.intOmit("status", int64(ob.Status))
	o.strOmit("err", ob.Err)
	return o.end()
}

// appendItemJSON appends json.Marshal(it), or reports false where it
// fails.
func appendItemJSON(b []byte, it *Item) ([]byte, bool) {
	return appendItemSeqJSON(b, it, it.Seq)
}

// appendItemSeqJSON is appendItemJSON with Seq replaced by seq.
func appendItemSeqJSON(b []byte, it *Item, seq uint64) ([]byte, bool) {
	o := newJSONObj(b)
	o.uint("feed_id", it.FeedID)
	o.str("id", it.ID)
	o.uint("seq", seq)
	o.strOmit("guid", it.GUID)
	o.strOmit("link", it.Link)
	o.strOmit("title", it.Title)
	o.strOmit("summary", it.Summary)
	o.strOmit("content", it.Content)
	o.strOmit("author", it.Author)
	o.strsOmit("categories", it.Categories)
	if len(it.Enclosures) > 0 {
		o.key("enclosures")
		o.b = append(o.b, '[')
		for i := range it.Enclosures {
			e := &it.Enclosures[i]
			if i > 0 {
				o.b = append(o.b, ',')
			}
			x := newJSONObj(o.b)
			x.str("url", e.URL)
			x.strOmit("type", e.Type)
			x.intOmit("length", e.Length)
			o.b, _ = x.end()
		}
		o.b = append(o.b, ']')
	}
	o.time("published", it.Published)
	o.time("updated", it.Updated)
	o.time("fetched", it.Fetched)
	if r := it.Reading; r != nil && o.ok {
		o.key("reading")
		x := newJSONObj(o.b)
		x.float("value", r.Value)
		x.strOmit("unit", r.Unit)
		x.strOmit("sensor", r.Sensor)
		x.time("time", r.Time)
		if r.Lat != nil {
			x.float("lat", *r.Lat)
		}
		if r.Lon != nil {
			x.float("lon", *r.Lon)
		}
		if o.b, o.ok = x.end(); !o.ok {
			return nil, false
		}
	}
	if d := it.Digest; d != nil && o.ok {
		o.key("digest")
		x := newJSONObj(o.b)
		x.str("field", d.Field)
		x.int("count", d.Count)
		x.float("sum", d.Sum)
		x.float("min", d.Min)
		x.float("max", d.Max)
		x.timeOmitZero("from", d.From)
		x.timeOmitZero("to", d.To)
		x.strsOmit("items", d.Items)
		if o.b, o.ok = x.end(); !o.ok {
			return nil, false
		}
	}
	return o.end()
}
