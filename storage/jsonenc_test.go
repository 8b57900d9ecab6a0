package storage

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// jsonFill fills v (a pointer) field by field, recursively, with values
// drawn from r that json.Marshal treats differently: empty and non-empty,
// nil and empty slices, strings needing every kind of escape, floats that
// switch to exponent form, times in several zones and out of range, raw
// JSON valid and not. Every exported field gets a value, so a field added
// to a record shows up in json.Marshal's output and, unless its appender
// writes it too, fails the comparison.
func jsonFill(r *rand.Rand, v reflect.Value, depth int) {
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(jsonTime(r)))
		return
	case reflect.TypeFor[json.RawMessage]():
		v.Set(reflect.ValueOf(jsonRaw(r)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(jsonStr(r))
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Int, reflect.Int64, reflect.Int32:
		switch r.IntN(4) {
		case 0:
			v.SetInt(0)
		case 1:
			v.SetInt(-r.Int64N(1 << 40))
		case 2:
			v.SetInt(math.MaxInt64 - r.Int64N(3))
		default:
			v.SetInt(r.Int64N(1 << 40))
		}
	case reflect.Uint, reflect.Uint64, reflect.Uint32, reflect.Uint8:
		max := uint64(1)<<(v.Type().Bits()) - 1
		if v.Type().Bits() == 64 {
			max = math.MaxUint64
		}
		switch r.IntN(3) {
		case 0:
			v.SetUint(0)
		case 1:
			v.SetUint(max)
		default:
			v.SetUint(r.Uint64() & max)
		}
	case reflect.Float64:
		v.SetFloat(jsonFloat(r))
	case reflect.Pointer:
		if r.IntN(3) == 0 || depth > 4 {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		jsonFill(r, p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		switch n := r.IntN(5); n {
		case 0:
			v.SetZero() // nil
		case 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0)) // empty, not nil
		default:
			s := reflect.MakeSlice(v.Type(), n-1, n-1)
			for i := range n - 1 {
				jsonFill(r, s.Index(i), depth+1)
			}
			v.Set(s)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				jsonFill(r, v.Field(i), depth+1)
			}
		}
	default:
		panic("jsonFill: no values for " + v.Type().String())
	}
}

var jsonStrs = []string{
	"", "plain", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnew\nline\rcr",
	"\b\f\x00\x01\x1f\x7f", "caf\u00e9 \u65e5\u672c", "\u2028\u2029", "bad \xff\xfe utf-8",
	"cut \xe2\x82", "emoji \U0001F600", "https://example.com/a?b=1&c=<2>",
}

func jsonStr(r *rand.Rand) string {
	if r.IntN(3) > 0 {
		return jsonStrs[r.IntN(len(jsonStrs))]
	}
	b := make([]byte, r.IntN(24))
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return string(b)
}

var jsonFloats = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.1, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 1.5e300,
	-2.5e-300, math.SmallestNonzeroFloat64, math.MaxFloat64, 123456.789,
	math.NaN(), math.Inf(1), math.Inf(-1),
}

func jsonFloat(r *rand.Rand) float64 {
	if r.IntN(2) == 0 {
		return jsonFloats[r.IntN(len(jsonFloats))]
	}
	return (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(60)-30))
}

var jsonZones = []*time.Location{
	time.UTC, time.FixedZone("plus", 5*3600+30*60), time.FixedZone("minus", -8*3600),
	time.FixedZone("secs", 3600+17), time.FixedZone("toofar", 24*3600+60), time.Local,
}

func jsonTime(r *rand.Rand) time.Time {
	switch r.IntN(8) {
	case 0:
		return time.Time{}
	case 1: // out of range: year 10000 or negative
		return time.Date(10000+r.IntN(5), 1, 1, 0, 0, 0, 0, time.UTC).AddDate(-20000*r.IntN(2), 0, 0)
	}
	t := time.Unix(r.Int64N(1<<35)-1<<33, r.Int64N(1e9)*int64(r.IntN(2)))
	return t.In(jsonZones[r.IntN(len(jsonZones))])
}

var jsonRaws = []string{
	``, `null`, `{"a": 1, "b": [1, 2 ,3]}`, ` "<&>" `, `{"x":"\u2028"}`, `{bad`, `[1,]`, `"a"  `,
}

func jsonRaw(r *rand.Rand) json.RawMessage {
	if r.IntN(6) == 0 {
		return nil
	}
	return json.RawMessage(jsonRaws[r.IntN(len(jsonRaws))])
}

// checkAppender compares appendFn with json.Marshal on n values of T
// filled by jsonFill: the same bytes, or both refusing.
func checkAppender[T any](t *testing.T, seed uint64, n int, appendFn func([]byte, *T) ([]byte, bool)) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 0x736c6f67))
	refused := 0
	for i := range n {
		var v T
		jsonFill(r, reflect.ValueOf(&v).Elem(), 0)
		want, werr := json.Marshal(&v)
		got, ok := appendFn([]byte("prefix"), &v)
		switch {
		case werr != nil && ok:
			t.Fatalf("value %d: json.Marshal refused it (%v), the appender wrote %s\nvalue: %#v", i, werr, got, v)
		case werr != nil:
			refused++
		case !ok:
			t.Fatalf("value %d: the appender refused what json.Marshal wrote as %s\nvalue: %#v", i, want, v)
		case !bytes.Equal(got, append([]byte("prefix"), want...)):
			t.Fatalf("value %d differs:\n got %s\nwant prefix%s\nvalue: %#v", i, got, want, v)
		}
	}
	if refused == 0 || refused == n {
		t.Errorf("%d of %d values refused: the test should see both kinds", refused, n)
	}
}

func TestAppendersMatchMarshal(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 2000
	}
	t.Run("Feed", func(t *testing.T) { checkAppender(t, 1, n, appendFeedJSON) })
	t.Run("Observation", func(t *testing.T) { checkAppender(t, 2, n, appendObservationJSON) })
	t.Run("Item", func(t *testing.T) { checkAppender(t, 3, n, appendItemJSON) })
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range append(jsonStrs, "\u2027\u202a", "\xed\xa0\x80", "\xf4\x90\x80\x80", "a\x00b") {
		t.Run("", func(t *testing.T) {
			want, _ := json.Marshal(s)
			if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
				t.Errorf("%q: got %s, want %s", s, got, want)
			}
		})
	}
}

func TestAppendJSONFloat(t *testing.T) {
	for _, f := range jsonFloats {
		t.Run("", func(t *testing.T) {
			want, err := json.Marshal(f)
			got, ok := appendJSONFloat(nil, f)
			if (err == nil) != ok || !bytes.Equal(got, want) {
				t.Errorf("%v: got %s %v, want %s %v", f, got, ok, want, err)
			}
		})
	}
}

// FuzzAppendJSONString holds the string appender to json.Marshal on any
// bytes.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range jsonStrs {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	})
}

// FuzzAppendItemJSON holds the item appender to json.Marshal on items
// built from fuzzed strings and numbers.
func FuzzAppendItemJSON(f *testing.F) {
	f.Add("id", "<b>title</b>", "summary \u2028", int64(1700000000), 1.5, uint64(7))
	f.Fuzz(func(t *testing.T, id, title, summary string, sec int64, v float64, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 1))
		it := Item{ID: id, Title: title, Summary: summary, Content: summary + title,
			Published: time.Unix(sec, 0).UTC(), Fetched: time.Unix(sec/2, int64(seed%1e9)).In(jsonZones[seed%uint64(len(jsonZones))]),
			Reading: &Reading{Value: v, Unit: title, Time: jsonTime(r)}, Categories: []string{id, summary}}
		want, werr := json.Marshal(&it)
		got, ok := appendItemJSON(nil, &it)
		if (werr == nil) != ok || !bytes.Equal(got, want) {
			t.Errorf("got %s %v, want %s %v", got, ok, want, werr)
		}
	})
}

// BenchmarkMarshal compares each appender with json.Marshal on a record
// as a poll writes it (a remote feed, a miss, an item of a sensor feed).
func BenchmarkMarshal(b *testing.B) {
	at := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	f := Feed{ID: 4711, Kind: KindRemote, URL: "http://127.0.0.2:8080/feeds/4711.xml", Title: "Station 4711 <river level>",
		Policy: "auto", NextFetch: at.Add(5 * time.Minute), ETag: `"abc123"`, Polls: 1200, Hits: 300, Items: 6000,
		LatencySumS: 1234.5, LatencyCount: 300, LastFetch: at, LastHit: at.Add(-time.Hour), Retention: Retention{MaxItems: 500},
		Created: at.Add(-48 * time.Hour), Updated: at}
	o := Observation{At: at, Status: 304}
	v := 3.25
	it := Item{FeedID: 4711, ID: "urn:reading:4711:99", GUID: "urn:reading:4711:99", Link: "http://127.0.0.2:8080/r/99",
		Title: "Level 3.25 m", Summary: "<p>River level at <b>06:00</b>: 3.25 m</p>", Published: at, Fetched: at,
		Reading: &Reading{Value: v, Unit: "m", Sensor: "level", Time: at}}
	cases := []struct {
		name    string
		std     func() ([]byte, error)
		appends func() ([]byte, error)
	}{
		{"feed", func() ([]byte, error) { return json.Marshal(&f) }, func() ([]byte, error) { return marshalFeed(&f) }},
		{"observation", func() ([]byte, error) { return json.Marshal(&o) }, func() ([]byte, error) { return marshalObservation(&o) }},
		{"item", func() ([]byte, error) { return json.Marshal(&it) }, func() ([]byte, error) { return marshalItem(&it, it.Seq) }},
	}
	for _, c := range cases {
		want, _ := c.std()
		if got, _ := c.appends(); !bytes.Equal(got, want) {
			b.Fatalf("%s: the appender wrote %s, json.Marshal %s", c.name, got, want)
		}
		b.Run(c.name+"/json.Marshal", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = c.std()
			}
		})
		b.Run(c.name+"/appender", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = c.appends()
			}
		})
	}
}
