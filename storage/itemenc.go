package storage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// Stored items. Item records are most of the data file of a node of many
// feeds, so they are stored in a compact binary form:
//
//	itemTag                      one byte; JSON begins with '{', an
//	                             observation with obsTag
//	flags                        uvarint, the itemF* bits
//	FeedID                       uvarint
//	ID                           string: uvarint length, bytes
//	[itemFGUID] GUID             string (itemFGUIDIsID: GUID is ID)
//	[itemFLink] Link             string (itemFLinkIsID: Link is ID)
//	[itemFTitle] … [itemFAuthor] Title, Summary, Content, Author: strings
//	[itemFCategories]            uvarint n ≥ 1, then n strings
//	[itemFEnclosures]            uvarint n ≥ 1, then per enclosure its
//	                             URL and Type strings, zigzag varint Length
//	Fetched                      zigzag varint Unix seconds, uvarint
//	                             nanoseconds, [itemFZones] zigzag varint
//	                             zone offset in seconds (whole minutes)
//	[itemFPublished] Published   a time relative to Fetched: zigzag varint
//	                             of its Unix second minus Fetched's, then
//	                             as Fetched
//	[itemFUpdated] Updated       a time relative to the base: Published's
//	                             second, or Fetched's without Published
//	[itemFReading] Reading       uvarint rF* flags, Value (a number), [Unit]
//	                             [Sensor] strings, [rFTime] Time relative
//	                             to the base (else Time is Published),
//	                             [rFLat] Lat, [rFLon] Lon numbers
//	[itemFDigest] Digest         uvarint dF* flags, [Field] string, Count
//	                             zigzag varint, Sum, Min, Max numbers,
//	                             [dFFrom] From, [dFTo] To relative to the
//	                             base, [dFItems] uvarint n ≥ 1 and n strings
//
// A number is a uvarint k: 0 and its 8 bytes (IEEE 754, little endian),
// or k ≥ 1 and a zigzag varint m, the number being m/10^(k−1) exactly
// (sensor values and positions are short decimals: 21.3 takes 3 bytes).
// Seq is not stored: the record's key is its Seq.
//
// What reads back is what the JSON an older slogfeed stored reads back:
// times as in obsenc.go (UTC at offset 0, Local when Local has that
// offset then, a fixed zone otherwise, no monotonic reading; a zone offset
// that is not whole minutes is cut to whole minutes beside the same wall
// clock, as JSON writes it, and such a time whose offset is then 0 reads
// in UTC), invalid UTF-8 replaced byte by byte with U+FFFD, empty
// Categories, Enclosures and Digest.Items as nil, a zero Updated, From or
// To as the zero time. Values stored as JSON keep reading (decodeItem).
//
// What is stored is what JSON could store: appendItem refuses a number
// that is not finite and a time outside the years 0–9999 or with a zone
// offset of a day or more; encodeItem refuses an item whose JSON encoding
// would be larger than MaxItemSize.
const itemTag = 0x02

// The flags of an encoded item, those of most items first (a flags value
// below 128 takes one byte).
const (
	itemFGUIDIsID = 1 << iota
	itemFLinkIsID
	itemFTitle
	itemFSummary
	itemFPublished
	itemFReading
	itemFLink
	itemFGUID
	itemFContent
	itemFAuthor
	itemFCategories
	itemFEnclosures
	itemFUpdated
	itemFDigest
	itemFZones
	itemFAll = itemFZones<<1 - 1
)

// The flags of an encoded reading.
const (
	rFUnit = 1 << iota
	rFSensor
	rFTime
	rFLat
	rFLon
	rFAll = rFLon<<1 - 1
)

// The flags of an encoded digest.
const (
	dFField = 1 << iota
	dFFrom
	dFTo
	dFItems
	dFAll = dFItems<<1 - 1
)

// maxDecimals is the largest k−1 of a number stored as m/10^(k−1): every
// power of ten up to it is exact in a float64.
const maxDecimals = 15

// pow10 holds the exact powers of ten 10^0 … 10^maxDecimals.
var pow10 = func() (p [maxDecimals + 1]float64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// encTime is a time as the binary form stores it: what JSON would read
// back.
type encTime struct {
	sec int64
	ns  uint32
	off int32
}

// zeroSec is the Unix second of the zero time.
const zeroSec = -62135596800

// isZero reports whether t reads back as the zero time.
func (t encTime) isZero() bool { return t.sec == zeroSec && t.ns == 0 && t.off == 0 }

// newEncTime returns t as JSON would store it, or fails for a time JSON
// cannot hold.
func newEncTime(t time.Time) (encTime, error) {
	_, off := t.Zone()
	if off%60 != 0 {
		// Rare (local mean time of the 19th century, a made-up zone):
		// JSON writes the offset in whole minutes beside the wall clock,
		// which reads back as another time.
		raw, err := t.MarshalJSON()
		if err != nil {
			return encTime{}, err
		}
		var u time.Time
		if err := u.UnmarshalJSON(raw); err != nil {
			return encTime{}, err
		}
		t = u
		_, off = t.Zone()
	}
	if err := checkObsTime(t); err != nil {
		return encTime{}, err
	}
	return encTime{sec: t.Unix(), ns: uint32(t.Nanosecond()), off: int32(off)}, nil
}

// itemTimes are an item's times, converted by newEncTime.
type itemTimes struct {
	fetched, published, updated, reading, from, to encTime
}

// encodeTimes converts an item's times and reports whether one of them
// has a zone offset.
func encodeTimes(it *Item) (ts itemTimes, zones bool, err error) {
	conv := func(dst *encTime, t time.Time, what string) {
		if err != nil {
			return
		}
		var e error
		if *dst, e = newEncTime(t); e != nil {
			err = fmt.Errorf("%s: %w", what, e)
		}
		zones = zones || dst.off != 0
	}
	conv(&ts.fetched, it.Fetched, "fetched")
	conv(&ts.published, it.Published, "published")
	ts.updated = encTime{sec: zeroSec} // as JSON, which leaves a zero Updated out
	if !it.Updated.IsZero() {
		conv(&ts.updated, it.Updated, "updated")
	}
	if r := it.Reading; r != nil {
		conv(&ts.reading, r.Time, "reading time")
	}
	if d := it.Digest; d != nil {
		if !d.From.IsZero() {
			conv(&ts.from, d.From, "digest from")
		}
		if !d.To.IsZero() {
			conv(&ts.to, d.To, "digest to")
		}
	}
	return ts, zones, err
}

// appendItem appends it's binary encoding to dst (its Seq left out), or
// fails for an item JSON cannot hold (see itemTag). It does not bound the
// size: encodeItem does.
func appendItem(dst []byte, it *Item) ([]byte, error) {
	ts, zones, err := encodeTimes(it)
	if err != nil {
		return dst, err
	}
	if r := it.Reading; r != nil {
		if !finite(r.Value) || r.Lat != nil && !finite(*r.Lat) || r.Lon != nil && !finite(*r.Lon) {
			return dst, errors.New("reading holds a number that is not finite")
		}
	}
	if d := it.Digest; d != nil && (!finite(d.Sum) || !finite(d.Min) || !finite(d.Max)) {
		return dst, errors.New("digest holds a number that is not finite")
	}
	flags := uint64(0)
	set := func(bit uint64, on bool) {
		if on {
			flags |= bit
		}
	}
	set(itemFGUIDIsID, it.GUID != "" && it.GUID == it.ID)
	set(itemFGUID, it.GUID != "" && it.GUID != it.ID)
	set(itemFLinkIsID, it.Link != "" && it.Link == it.ID)
	set(itemFLink, it.Link != "" && it.Link != it.ID)
	set(itemFTitle, it.Title != "")
	set(itemFSummary, it.Summary != "")
	set(itemFContent, it.Content != "")
	set(itemFAuthor, it.Author != "")
	set(itemFCategories, len(it.Categories) > 0)
	set(itemFEnclosures, len(it.Enclosures) > 0)
	set(itemFPublished, !ts.published.isZero())
	set(itemFUpdated, !ts.updated.isZero())
	set(itemFReading, it.Reading != nil)
	set(itemFDigest, it.Digest != nil)
	set(itemFZones, zones)

	dst = append(dst, itemTag)
	dst = binary.AppendUvarint(dst, flags)
	dst = binary.AppendUvarint(dst, it.FeedID)
	dst = appendText(dst, it.ID)
	for _, f := range [...]struct {
		bit uint64
		s   string
	}{{itemFGUID, it.GUID}, {itemFLink, it.Link}, {itemFTitle, it.Title}, {itemFSummary, it.Summary},
		{itemFContent, it.Content}, {itemFAuthor, it.Author}} {
		if flags&f.bit != 0 {
			dst = appendText(dst, f.s)
		}
	}
	if len(it.Categories) > 0 {
		dst = binary.AppendUvarint(dst, uint64(len(it.Categories)))
		for _, c := range it.Categories {
			dst = appendText(dst, c)
		}
	}
	if len(it.Enclosures) > 0 {
		dst = binary.AppendUvarint(dst, uint64(len(it.Enclosures)))
		for _, e := range it.Enclosures {
			dst = appendText(dst, e.URL)
			dst = appendText(dst, e.Type)
			dst = binary.AppendVarint(dst, e.Length)
		}
	}
	dst = appendEncTime(dst, ts.fetched, 0, zones)
	base := ts.fetched.sec
	if flags&itemFPublished != 0 {
		dst = appendEncTime(dst, ts.published, base, zones)
		base = ts.published.sec
	}
	if flags&itemFUpdated != 0 {
		dst = appendEncTime(dst, ts.updated, base, zones)
	}
	if r := it.Reading; r != nil {
		rf := uint64(0)
		if r.Unit != "" {
			rf |= rFUnit
		}
		if r.Sensor != "" {
			rf |= rFSensor
		}
		if ts.reading != ts.published {
			rf |= rFTime
		}
		if r.Lat != nil {
			rf |= rFLat
		}
		if r.Lon != nil {
			rf |= rFLon
		}
		dst = binary.AppendUvarint(dst, rf)
		dst = appendNumber(dst, r.Value)
		if rf&rFUnit != 0 {
			dst = appendText(dst, r.Unit)
		}
		if rf&rFSensor != 0 {
			dst = appendText(dst, r.Sensor)
		}
		if rf&rFTime != 0 {
			dst = appendEncTime(dst, ts.reading, base, zones)
		}
		if r.Lat != nil {
			dst = appendNumber(dst, *r.Lat)
		}
		if r.Lon != nil {
			dst = appendNumber(dst, *r.Lon)
		}
	}
	if d := it.Digest; d != nil {
		df := uint64(0)
		if d.Field != "" {
			df |= dFField
		}
		if !d.From.IsZero() {
			df |= dFFrom
		}
		if !d.To.IsZero() {
			df |= dFTo
		}
		if len(d.Items) > 0 {
			df |= dFItems
		}
		dst = binary.AppendUvarint(dst, df)
		if df&dFField != 0 {
			dst = appendText(dst, d.Field)
		}
		dst = binary.AppendVarint(dst, d.Count)
		dst = appendNumber(dst, d.Sum)
		dst = appendNumber(dst, d.Min)
		dst = appendNumber(dst, d.Max)
		if df&dFFrom != 0 {
			dst = appendEncTime(dst, ts.from, base, zones)
		}
		if df&dFTo != 0 {
			dst = appendEncTime(dst, ts.to, base, zones)
		}
		if len(d.Items) > 0 {
			dst = binary.AppendUvarint(dst, uint64(len(d.Items)))
			for _, s := range d.Items {
				dst = appendText(dst, s)
			}
		}
	}
	return dst, nil
}

// appendEncTime appends t relative to the Unix second base.
func appendEncTime(dst []byte, t encTime, base int64, zones bool) []byte {
	dst = binary.AppendVarint(dst, t.sec-base)
	dst = binary.AppendUvarint(dst, uint64(t.ns))
	if zones {
		dst = binary.AppendVarint(dst, int64(t.off))
	}
	return dst
}

// appendText appends s as JSON would store it: invalid UTF-8 replaced,
// byte by byte, by U+FFFD.
func appendText(dst []byte, s string) []byte {
	if !utf8.ValidString(s) {
		s = validUTF8(s)
	}
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// validUTF8 replaces each byte of s that is not part of a valid UTF-8
// sequence by U+FFFD, as encoding/json does.
func validUTF8(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// appendNumber appends a finite v: as m/10^k when that is v exactly
// (every bit, the sign of a zero included) for some k ≤ maxDecimals and
// |m| < 2^53, else its 8 bytes.
func appendNumber(dst []byte, v float64) []byte {
	bits := math.Float64bits(v)
	for k, p := range pow10 {
		x := v * p
		if !(math.Abs(x) < 1<<53) {
			break
		}
		if x != math.Trunc(x) {
			continue
		}
		if m := int64(x); math.Float64bits(float64(m)/p) == bits {
			dst = binary.AppendUvarint(dst, uint64(k+1))
			return binary.AppendVarint(dst, m)
		}
	}
	dst = append(dst, 0)
	return binary.LittleEndian.AppendUint64(dst, bits)
}

// itemJSONBound is at least the size of it's JSON encoding: a string's
// byte takes at most 6 bytes (\u00XX, or \ufffd for an invalid byte), a
// time 37, a number 25, the names and punctuation of all fields less
// than the constants.
func itemJSONBound(it *Item) int {
	n, text := 512, len(it.ID)+len(it.GUID)+len(it.Link)+len(it.Title)+len(it.Summary)+len(it.Content)+len(it.Author)
	for _, c := range it.Categories {
		n, text = n+3, text+len(c)
	}
	for _, e := range it.Enclosures {
		n, text = n+64, text+len(e.URL)+len(e.Type)
	}
	if r := it.Reading; r != nil {
		n, text = n+256, text+len(r.Unit)+len(r.Sensor)
	}
	if d := it.Digest; d != nil {
		n, text = n+384, text+len(d.Field)
		for _, s := range d.Items {
			n, text = n+3, text+len(s)
		}
	}
	return n + 6*text
}

// encodeItem encodes it in the binary form, or fails with ErrInvalid when
// JSON could not hold it or its JSON encoding with seq for its Seq would
// be larger than MaxItemSize (the bound every backend applies).
func encodeItem(it *Item, seq uint64) ([]byte, error) {
	if itemJSONBound(it) > MaxItemSize {
		// Rare (an item of more than about 170 KB of text): the exact
		// size.
		raw, err := marshalItem(it, seq)
		if err != nil {
			return nil, invalidf("item cannot be encoded: %v", err)
		}
		if len(raw) > MaxItemSize {
			return nil, invalidf("item is %d bytes encoded, more than %d", len(raw), MaxItemSize)
		}
	}
	n := 48 + len(it.ID) + len(it.GUID) + len(it.Link) + len(it.Title) + len(it.Summary) + len(it.Content) + len(it.Author)
	if it.Reading != nil {
		n += 32 + len(it.Reading.Unit) + len(it.Reading.Sensor)
	}
	raw, err := appendItem(make([]byte, 0, n), it)
	if err != nil {
		return nil, invalidf("item cannot be encoded: %v", err)
	}
	return raw, nil
}

// errItemCorrupt is the error of a binary item that cannot be decoded.
var errItemCorrupt = errors.New("bad binary item")

// itemReader reads the fields of a binary item, remembering the first
// error. s is the record as one string: the item's strings are slices of
// it, one allocation for all of them.
type itemReader struct {
	raw []byte
	s   string
	i   int
	err error
}

func (r *itemReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at byte %d", errItemCorrupt, what, r.i)
	}
	r.i = len(r.raw)
}

func (r *itemReader) left() int { return len(r.raw) - r.i }

func (r *itemReader) uvarint(what string) uint64 {
	v, n := binary.Uvarint(r.raw[r.i:])
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.i += n
	return v
}

func (r *itemReader) varint(what string) int64 {
	v, n := binary.Varint(r.raw[r.i:])
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.i += n
	return v
}

// text reads a string.
func (r *itemReader) text(what string) string {
	n := r.uvarint(what)
	if r.err != nil {
		return ""
	}
	if n > uint64(r.left()) {
		r.fail(what + " length")
		return ""
	}
	if r.s == "" {
		r.s = string(r.raw)
	}
	s := r.s[r.i : r.i+int(n)]
	if !utf8.ValidString(s) {
		r.fail(what + " not UTF-8")
		return ""
	}
	r.i += int(n)
	return s
}

// count reads the number of entries of a list whose entries take at
// least min bytes each.
func (r *itemReader) count(min int, what string) int {
	n := r.uvarint(what)
	if r.err == nil && (n == 0 || n > uint64(r.left()/min)) {
		r.fail(what)
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

// texts reads a list of strings.
func (r *itemReader) texts(what string) []string {
	n := r.count(1, what+" count")
	out := make([]string, 0, min(n, 32))
	for range n {
		if s := r.text(what); r.err == nil {
			out = append(out, s)
		}
	}
	return out
}

// number reads a number.
func (r *itemReader) number(what string) float64 {
	k := r.uvarint(what)
	switch {
	case r.err != nil:
		return 0
	case k == 0:
		if r.left() < 8 {
			r.fail(what)
			return 0
		}
		v := math.Float64frombits(binary.LittleEndian.Uint64(r.raw[r.i:]))
		r.i += 8
		if !finite(v) {
			r.fail(what + " not finite")
			return 0
		}
		return v
	case k > maxDecimals+1:
		r.fail(what + " decimals")
		return 0
	}
	m := r.varint(what)
	if m <= -1<<53 || m >= 1<<53 {
		r.fail(what + " out of range")
		return 0
	}
	return float64(m) / pow10[k-1]
}

// time reads a time relative to the Unix second base (within the years
// JSON can hold, or 0).
func (r *itemReader) time(base int64, zones bool, what string) (time.Time, int64) {
	d := r.varint(what)
	ns := r.uvarint(what)
	var off int64
	if zones {
		off = r.varint(what)
	}
	if r.err != nil {
		return time.Time{}, 0
	}
	// base is 0 or the second of a time read before, within a day of
	// the years 0–9999: no overflow.
	if d < (minObsSec-maxZone)-(maxObsSec+maxZone) || d > (maxObsSec+maxZone)-(minObsSec-maxZone) {
		r.fail(what + " out of range")
		return time.Time{}, 0
	}
	sec := base + d
	if off == 0 { // UTC, the usual case: no zone to look up
		if sec < minObsSec || sec > maxObsSec || ns >= 1e9 {
			r.fail(what + " out of range")
			return time.Time{}, 0
		}
		return time.Unix(sec, int64(ns)).UTC(), sec
	}
	if sec < minObsSec-maxZone || sec > maxObsSec+maxZone || ns >= 1e9 || off < -maxZone || off > maxZone || off%60 != 0 {
		r.fail(what + " out of range") // offsets are stored in whole minutes, as JSON writes them
		return time.Time{}, 0
	}
	t := time.Unix(sec, int64(ns))
	if _, lo := t.Zone(); lo != int(off) { // else Local, which time.Unix gives
		t = t.In(time.FixedZone("", int(off)))
	}
	if checkObsTime(t) != nil { // its year where it was taken
		r.fail(what + " out of range")
		return time.Time{}, 0
	}
	return t, sec
}

// header reads the tag, the flags, FeedID and ID.
func (r *itemReader) header(it *Item) uint64 {
	if len(r.raw) == 0 || r.raw[0] != itemTag {
		r.fail("tag")
		return 0
	}
	r.i = 1
	flags := r.uvarint("flags")
	if flags&^itemFAll != 0 {
		r.fail(fmt.Sprintf("unknown flags %#x", flags&^itemFAll))
		return 0
	}
	if flags&itemFGUIDIsID != 0 && flags&itemFGUID != 0 || flags&itemFLinkIsID != 0 && flags&itemFLink != 0 {
		r.fail("two sources of a field")
		return 0
	}
	it.FeedID = r.uvarint("feed id")
	it.ID = r.text("id")
	return flags
}

// decodeBinaryItem decodes a binary item stored under seq.
func decodeBinaryItem(seq uint64, raw []byte) (Item, error) {
	r := itemReader{raw: raw}
	it := Item{Seq: seq}
	flags := r.header(&it)
	zones := flags&itemFZones != 0
	if flags&itemFGUIDIsID != 0 {
		it.GUID = it.ID
	}
	if flags&itemFLinkIsID != 0 {
		it.Link = it.ID
	}
	for _, f := range [...]struct {
		bit  uint64
		dst  *string
		what string
	}{{itemFGUID, &it.GUID, "guid"}, {itemFLink, &it.Link, "link"}, {itemFTitle, &it.Title, "title"},
		{itemFSummary, &it.Summary, "summary"}, {itemFContent, &it.Content, "content"}, {itemFAuthor, &it.Author, "author"}} {
		if flags&f.bit != 0 {
			*f.dst = r.text(f.what)
		}
	}
	if flags&itemFCategories != 0 {
		it.Categories = r.texts("category")
	}
	if flags&itemFEnclosures != 0 {
		n := r.count(3, "enclosure count")
		it.Enclosures = make([]Enclosure, 0, min(n, 32))
		for range n {
			e := Enclosure{URL: r.text("enclosure url"), Type: r.text("enclosure type"), Length: r.varint("enclosure length")}
			if r.err != nil {
				break
			}
			it.Enclosures = append(it.Enclosures, e)
		}
	}
	var base int64
	it.Fetched, base = r.time(0, zones, "fetched")
	if flags&itemFPublished != 0 {
		it.Published, base = r.time(base, zones, "published")
	}
	if flags&itemFUpdated != 0 {
		it.Updated, _ = r.time(base, zones, "updated")
	}
	if flags&itemFReading != 0 {
		rd := &Reading{}
		rf := r.uvarint("reading flags")
		if rf&^rFAll != 0 {
			r.fail("unknown reading flags")
		}
		rd.Value = r.number("reading value")
		if rf&rFUnit != 0 {
			rd.Unit = r.text("reading unit")
		}
		if rf&rFSensor != 0 {
			rd.Sensor = r.text("reading sensor")
		}
		if rf&rFTime != 0 {
			rd.Time, _ = r.time(base, zones, "reading time")
		} else {
			rd.Time = it.Published
		}
		if rf&rFLat != 0 {
			lat := r.number("reading lat")
			rd.Lat = &lat
		}
		if rf&rFLon != 0 {
			lon := r.number("reading lon")
			rd.Lon = &lon
		}
		it.Reading = rd
	}
	if flags&itemFDigest != 0 {
		d := &Digest{}
		df := r.uvarint("digest flags")
		if df&^dFAll != 0 {
			r.fail("unknown digest flags")
		}
		if df&dFField != 0 {
			d.Field = r.text("digest field")
		}
		d.Count = r.varint("digest count")
		d.Sum, d.Min, d.Max = r.number("digest sum"), r.number("digest min"), r.number("digest max")
		if df&dFFrom != 0 {
			d.From, _ = r.time(base, zones, "digest from")
		}
		if df&dFTo != 0 {
			d.To, _ = r.time(base, zones, "digest to")
		}
		if df&dFItems != 0 {
			d.Items = r.texts("digest item")
		}
		it.Digest = d
	}
	if r.err == nil && r.left() > 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return Item{}, r.err
	}
	return it, nil
}

// decodeItem decodes the item record stored under seq: binary, or JSON as
// an older slogfeed stored it.
func decodeItem(seq uint64, v []byte) (Item, error) {
	if len(v) > 0 && v[0] == itemTag {
		it, err := decodeBinaryItem(seq, v)
		if err != nil {
			return Item{}, corruptf("item seq %d: %v", seq, err)
		}
		return it, nil
	}
	var it Item
	if err := json.Unmarshal(v, &it); err != nil {
		return Item{}, corruptf("item seq %d: %v", seq, err)
	}
	if it.Seq != seq {
		return Item{}, corruptf("item record %d holds seq %d", seq, it.Seq)
	}
	return it, nil
}

// itemRecordID returns the ID of a stored item record without decoding
// the rest of it.
func itemRecordID(raw []byte) (string, error) {
	if len(raw) > 0 && raw[0] == itemTag {
		r := itemReader{raw: raw, i: 1}
		if flags := r.uvarint("flags"); flags&^itemFAll != 0 {
			r.fail("unknown flags")
		}
		r.uvarint("feed id")
		n := r.uvarint("id")
		if r.err == nil && n > uint64(r.left()) {
			r.fail("id length")
		}
		if r.err != nil {
			return "", r.err
		}
		return string(raw[r.i : r.i+int(n)]), nil
	}
	var rec struct {
		ID string `json:"id"`
	}
	err := json.Unmarshal(raw, &rec)
	return rec.ID, err
}
