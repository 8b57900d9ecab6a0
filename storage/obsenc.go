package storage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// Stored observations. A bbolt node keeps every poll's Observation (500
// per feed by default), so their encoding is most of what a poll that
// brings no item adds to the data file. They are stored in a compact
// binary form:
//
//	obsTag                       one byte; JSON begins with '{'
//	flags                        uvarint, the obsF* bits
//	At                           zigzag varint Unix seconds, uvarint nanoseconds
//	  [obsFZones]                zigzag varint zone offset in seconds
//	[obsFPublished] n            uvarint, then per publish time p:
//	                             zigzag varint At's Unix second − p's,
//	                             uvarint p's nanoseconds, [obsFZones] offset
//	[obsFLatency] n              uvarint, then per latency a uvarint h:
//	                             0 and its 8 bytes (IEEE 754, little endian),
//	                             or j+1 for At.Sub(Published[j]).Seconds()
//	[obsFDesync] … [obsFDue]     zigzag varint of each Hints duration in
//	                             nanoseconds, or seconds with obsFSeconds
//	[obsFStatus]                 zigzag varint
//	[obsFErr]                    uvarint length, bytes
//
// Times carry their zone offset only when one of them is not UTC
// (obsFZones). A time decodes as JSON decodes it: UTC at offset 0, Local
// when Local has that offset then, a fixed zone otherwise; its monotonic
// reading is dropped. Empty Published and LatencyS read as nil. Values
// stored as JSON by an older slogfeed keep reading (decodeObservation).
//
// What is stored is what JSON could store: encodeObservation refuses a
// NaN or infinite latency, a time outside the years 0–9999 or with a zone
// offset of a day or more, and an observation whose JSON encoding would
// be larger than MaxObservationSize.
const obsTag = 0x01

// The flags of an encoded observation, those of most polls first (a
// flags value below 128 takes one byte).
const (
	obsFHit = 1 << iota
	obsFPublished
	obsFLatency
	obsFStatus
	obsFCacheFor
	obsFPeriod
	obsFSeconds // every Hints duration is whole seconds, stored as such
	obsFErr
	obsFMore
	obsFHasPhase
	obsFPhase
	obsFDesync
	obsFHasDue
	obsFDue
	obsFZones
	obsFAll = obsFZones<<1 - 1
)

// The Unix seconds of the first and last second of the years 0–9999 in
// UTC, and the largest zone offset: the times JSON can hold are within a
// day of them.
const (
	minObsSec = -62167219200 // 0000-01-01T00:00:00Z
	maxObsSec = 253402300799 // 9999-12-31T23:59:59Z
	maxZone   = 24*60*60 - 1
)

// appendObservation appends o's binary encoding to dst, or fails for an
// observation JSON cannot hold (see obsTag).
func appendObservation(dst []byte, o *Observation) ([]byte, error) {
	flags := uint64(0)
	set := func(bit uint64, on bool) {
		if on {
			flags |= bit
		}
	}
	set(obsFHit, o.Hit)
	set(obsFMore, o.MoreData)
	set(obsFHasPhase, o.Hints.HasPhase)
	set(obsFHasDue, o.Hints.HasDue)
	set(obsFPublished, len(o.Published) > 0)
	set(obsFLatency, len(o.LatencyS) > 0)
	set(obsFDesync, o.Hints.Desync != 0)
	set(obsFPhase, o.Hints.Phase != 0)
	set(obsFCacheFor, o.Hints.CacheFor != 0)
	set(obsFPeriod, o.Hints.Period != 0)
	set(obsFDue, o.Hints.Due != 0)
	set(obsFStatus, o.Status != 0)
	set(obsFErr, o.Err != "")
	durs := obsDurations(o)
	seconds := true
	for _, d := range durs {
		seconds = seconds && d%time.Second == 0
	}
	set(obsFSeconds, seconds && flags&obsFDurations != 0)
	if err := checkObsTime(o.At); err != nil {
		return dst, fmt.Errorf("at: %w", err)
	}
	_, off := o.At.Zone()
	for i, p := range o.Published {
		if err := checkObsTime(p); err != nil {
			return dst, fmt.Errorf("published[%d]: %w", i, err)
		}
		if _, po := p.Zone(); po != 0 {
			off = po
		}
	}
	set(obsFZones, off != 0)
	for i, l := range o.LatencyS {
		if math.IsNaN(l) || math.IsInf(l, 0) {
			return dst, fmt.Errorf("latency_s[%d] is %v", i, l)
		}
	}
	if jsonSizeBound(o) > MaxObservationSize {
		// Rare (an error text of more than about 170 KB): the exact size.
		raw, err := json.Marshal(o)
		if err != nil {
			return dst, err
		}
		if len(raw) > MaxObservationSize {
			return dst, fmt.Errorf("%d bytes as JSON, more than %d", len(raw), MaxObservationSize)
		}
	}

	dst = append(dst, obsTag)
	dst = binary.AppendUvarint(dst, flags)
	at := o.At.Unix()
	dst = binary.AppendVarint(dst, at)
	dst = binary.AppendUvarint(dst, uint64(o.At.Nanosecond()))
	zones := flags&obsFZones != 0
	if zones {
		dst = appendZone(dst, o.At)
	}
	if len(o.Published) > 0 {
		dst = binary.AppendUvarint(dst, uint64(len(o.Published)))
		for _, p := range o.Published {
			dst = binary.AppendVarint(dst, at-p.Unix())
			dst = binary.AppendUvarint(dst, uint64(p.Nanosecond()))
			if zones {
				dst = appendZone(dst, p)
			}
		}
	}
	if len(o.LatencyS) > 0 {
		dst = binary.AppendUvarint(dst, uint64(len(o.LatencyS)))
		j := 0 // the publish time the next latency is likely derived from
		for _, l := range o.LatencyS {
			if k, ok := derivedLatency(o, l, j); ok {
				dst = binary.AppendUvarint(dst, uint64(k+1))
				j = k + 1
				continue
			}
			dst = append(dst, 0)
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(l))
		}
	}
	for i, d := range durs {
		switch {
		case flags&obsDurationBits[i] == 0:
		case flags&obsFSeconds != 0:
			dst = binary.AppendVarint(dst, int64(d/time.Second))
		default:
			dst = binary.AppendVarint(dst, int64(d))
		}
	}
	if o.Status != 0 {
		dst = binary.AppendVarint(dst, int64(o.Status))
	}
	if o.Err != "" {
		dst = binary.AppendUvarint(dst, uint64(len(o.Err)))
		dst = append(dst, o.Err...)
	}
	return dst, nil
}

// obsLatencySearch bounds how many publish times derivedLatency tries.
const obsLatencySearch = 16

// derivedLatency returns the index k of the publish time whose latency
// At.Sub(Published[k]).Seconds() is exactly l, looking from from on and
// then before it, obsLatencySearch of them at most (the aggregator
// appends latencies in the order of the items, usually that of
// Published).
func derivedLatency(o *Observation, l float64, from int) (int, bool) {
	at := o.At.Round(0) // as decoded: without a monotonic reading
	bits := math.Float64bits(l)
	n := len(o.Published)
	for i := range min(n, obsLatencySearch) {
		k := (from + i) % n
		if math.Float64bits(at.Sub(o.Published[k].Round(0)).Seconds()) == bits {
			return k, true
		}
	}
	return 0, false
}

// obsFDurations are the flags of the Hints durations.
const obsFDurations = obsFDesync | obsFPhase | obsFCacheFor | obsFPeriod | obsFDue

// obsDurationBits are the flags of the Hints durations in the order they
// are stored: Desync, Phase, CacheFor, Period, Due.
var obsDurationBits = [5]uint64{obsFDesync, obsFPhase, obsFCacheFor, obsFPeriod, obsFDue}

// obsDurations lists o's Hints durations in the order they are stored.
func obsDurations(o *Observation) [5]time.Duration {
	h := &o.Hints
	return [5]time.Duration{h.Desync, h.Phase, h.CacheFor, h.Period, h.Due}
}

// checkObsTime refuses a time JSON cannot hold.
func checkObsTime(t time.Time) error {
	if y := t.Year(); y < 0 || y > 9999 {
		return fmt.Errorf("year %d outside 0–9999", y)
	}
	if _, off := t.Zone(); off < -maxZone || off > maxZone {
		return fmt.Errorf("zone offset %ds is a day or more", off)
	}
	return nil
}

// appendZone appends t's zone offset.
func appendZone(dst []byte, t time.Time) []byte {
	_, off := t.Zone()
	return binary.AppendVarint(dst, int64(off))
}

// jsonSizeBound is at least the size of o's JSON encoding: a string's
// byte takes at most 6 bytes (\u00XX), a time at most 37, a number 25.
func jsonSizeBound(o *Observation) int {
	return 256 + 38*(1+len(o.Published)) + 25*len(o.LatencyS) + 6*len(o.Err)
}

// errObsCorrupt is the error of a binary observation that cannot be
// decoded.
var errObsCorrupt = errors.New("bad binary observation")

// obsReader reads the fields of a binary observation, remembering the
// first error.
type obsReader struct {
	b   []byte
	err error
}

func (r *obsReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at byte %d from the end", errObsCorrupt, what, len(r.b))
	}
	r.b = nil
}

func (r *obsReader) uvarint(what string) uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *obsReader) varint(what string) int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// time reads a time of Unix second sec: its nanoseconds and, with zones,
// its offset.
func (r *obsReader) time(sec int64, zones bool, what string) time.Time {
	ns := r.uvarint(what)
	var off int64
	if zones {
		off = r.varint(what)
	}
	if r.err != nil {
		return time.Time{}
	}
	if off == 0 { // UTC, the usual case: no zone to look up
		if sec < minObsSec || sec > maxObsSec || ns >= 1e9 {
			r.fail(what + " out of range")
			return time.Time{}
		}
		return time.Unix(sec, int64(ns)).UTC()
	}
	if sec < minObsSec-maxZone || sec > maxObsSec+maxZone || ns >= 1e9 || off < -maxZone || off > maxZone {
		r.fail(what + " out of range")
		return time.Time{}
	}
	t := time.Unix(sec, int64(ns))
	if _, lo := t.Zone(); lo != int(off) { // else Local, which time.Unix gives
		t = t.In(time.FixedZone("", int(off)))
	}
	if checkObsTime(t) != nil { // its year where it was taken
		r.fail(what + " out of range")
		return time.Time{}
	}
	return t
}

// obsHeader is what precedes the latencies of a binary observation.
type obsHeader struct {
	flags     uint64
	at        time.Time
	published []time.Time
}

// readHeader reads the tag, flags, At and Published, appending the
// publish times to pub (which the header's published then aliases).
func (r *obsReader) readHeader(pub []time.Time) obsHeader {
	var h obsHeader
	if len(r.b) == 0 || r.b[0] != obsTag {
		r.fail("tag")
		return h
	}
	r.b = r.b[1:]
	h.flags = r.uvarint("flags")
	if h.flags&^obsFAll != 0 {
		r.fail(fmt.Sprintf("unknown flags %#x", h.flags&^obsFAll))
		return h
	}
	zones := h.flags&obsFZones != 0
	at := r.varint("at")
	h.at = r.time(at, zones, "at")
	if r.err == nil && h.flags&obsFPublished != 0 {
		n := r.uvarint("published count")
		if n == 0 || n > uint64(len(r.b))/2 { // 2 bytes at least each
			r.fail("published count")
			return h
		}
		if pub == nil {
			pub = make([]time.Time, 0, n)
		}
		for range n {
			d := r.varint("published")
			if r.err != nil {
				return h
			}
			if d < at-maxObsSec-maxZone || d > at-minObsSec+maxZone { // at is within them
				r.fail("published out of range")
				return h
			}
			pub = append(pub, r.time(at-d, zones, "published"))
		}
		h.published = pub
	}
	return h
}

// appendLatencies appends the latencies of the binary observation after
// the header h to dst.
func (r *obsReader) appendLatencies(h *obsHeader, dst []float64) []float64 {
	if h.flags&obsFLatency == 0 || r.err != nil {
		return dst
	}
	n := r.uvarint("latency count")
	if n == 0 || n > uint64(len(r.b)) { // 1 byte at least each
		r.fail("latency count")
		return dst
	}
	for range n {
		k := r.uvarint("latency")
		var l float64
		switch {
		case r.err != nil:
			return dst
		case k == 0:
			if len(r.b) < 8 {
				r.fail("latency")
				return dst
			}
			l = math.Float64frombits(binary.LittleEndian.Uint64(r.b))
			r.b = r.b[8:]
			if math.IsNaN(l) || math.IsInf(l, 0) {
				r.fail("latency not finite")
				return dst
			}
		case k <= uint64(len(h.published)):
			l = h.at.Sub(h.published[k-1]).Seconds()
		default:
			r.fail("latency of a publish time not there")
			return dst
		}
		dst = append(dst, l)
	}
	return dst
}

// decodeBinaryObservation decodes a binary observation.
func decodeBinaryObservation(raw []byte) (Observation, error) {
	r := obsReader{b: raw}
	h := r.readHeader(nil)
	o := Observation{At: h.at, Published: h.published,
		Hit: h.flags&obsFHit != 0, MoreData: h.flags&obsFMore != 0}
	o.Hints.HasPhase = h.flags&obsFHasPhase != 0
	o.Hints.HasDue = h.flags&obsFHasDue != 0
	o.LatencyS = r.appendLatencies(&h, nil)
	var durs [5]time.Duration
	for i, bit := range obsDurationBits {
		if h.flags&bit == 0 {
			continue
		}
		v := r.varint("hints")
		if h.flags&obsFSeconds != 0 {
			if v < math.MinInt64/int64(time.Second) || v > math.MaxInt64/int64(time.Second) {
				r.fail("hint out of range")
			}
			v *= int64(time.Second)
		}
		if durs[i] = time.Duration(v); v == 0 && r.err == nil {
			r.fail("zero hint")
		}
	}
	o.Hints.Desync, o.Hints.Phase, o.Hints.CacheFor, o.Hints.Period, o.Hints.Due = durs[0], durs[1], durs[2], durs[3], durs[4]
	if h.flags&obsFSeconds != 0 && h.flags&obsFDurations == 0 {
		r.fail("seconds without a duration")
	}
	if h.flags&obsFStatus != 0 {
		s := r.varint("status")
		if s == 0 || int64(int(s)) != s {
			r.fail("status")
		}
		o.Status = int(s)
	}
	if h.flags&obsFErr != 0 {
		n := r.uvarint("err length")
		if n == 0 || n > uint64(len(r.b)) {
			r.fail("err length")
		} else {
			o.Err = string(r.b[:n])
			r.b = r.b[n:]
		}
	}
	if r.err == nil && len(r.b) > 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return Observation{}, r.err
	}
	return o, nil
}

// decodeObservation decodes a stored observation: binary, or JSON as an
// older slogfeed stored it.
func decodeObservation(raw []byte) (Observation, error) {
	if len(raw) > 0 && raw[0] == obsTag {
		return decodeBinaryObservation(raw)
	}
	var o Observation
	err := json.Unmarshal(raw, &o)
	return o, err
}

// observationAt returns when a stored observation was made.
func observationAt(raw []byte) (time.Time, error) {
	if len(raw) > 0 && raw[0] == obsTag {
		r := obsReader{b: raw}
		var stack [8]time.Time
		h := r.readHeader(stack[:0])
		return h.at, r.err
	}
	var o struct {
		At time.Time `json:"at"`
	}
	err := json.Unmarshal(raw, &o)
	return o.At, err
}
