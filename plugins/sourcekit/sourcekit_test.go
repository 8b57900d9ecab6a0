package sourcekit

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/reader/parser"
	"github.com/slogfeed/slogfeed/storage"
)

func TestParseTimeFormat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want TimeFormat
		err  bool
	}{
		{"", TimeAuto, false},
		{"unix", TimeUnix, false},
		{"unix_ms", TimeUnixMilli, false},
		{"rfc3339", TimeRFC3339, false},
		{"02.01.2006 15:04", "02.01.2006 15:04", false},
		{"hello", "", true}, // no layout element
		{strings.Repeat("2006", 20), "", true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseTimeFormat(tc.in)
			if tc.err {
				if !errors.Is(err, ErrConfig) {
					t.Fatalf("ParseTimeFormat(%q) = %q, %v; want ErrConfig", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseTimeFormat(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestTimeFormatText(t *testing.T) {
	want := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		format TimeFormat
		in     string
		ok     bool
	}{
		{TimeAuto, "2026-01-05T10:00:00Z", true},
		{TimeAuto, "2026-01-05T11:00:00+01:00", true},
		{TimeAuto, "1767607200", true},
		{TimeAuto, "1767607200000", true},
		{TimeRFC3339, "2026-01-05T10:00:00.000Z", true},
		{TimeUnix, "1767607200", true},
		{TimeUnixMilli, "1767607200000", true},
		{"02.01.2006 15:04", "05.01.2026 10:00", true},
		{TimeRFC3339, "1767607200", false},
		{TimeUnix, "yesterday", false},
		{TimeAuto, "", false},
		{TimeAuto, "-5", false},
		{TimeUnix, "1e300", false},
		{"02.01.2006 15:04", "2026-01-05", false},
	} {
		t.Run(string(tc.format)+"/"+tc.in, func(t *testing.T) {
			got, err := tc.format.Text(tc.in)
			if !tc.ok {
				if err == nil {
					t.Fatalf("Text(%q) = %v, want an error", tc.in, got)
				}
				return
			}
			if err != nil || !got.Equal(want) {
				t.Fatalf("Text(%q) = %v, %v; want %v", tc.in, got, err, want)
			}
		})
	}
}

func TestTimeFormatNumber(t *testing.T) {
	for _, tc := range []struct {
		format TimeFormat
		in     float64
		want   time.Time
	}{
		{TimeUnix, 1767607200.5, time.Date(2026, 1, 5, 10, 0, 0, 500_000_000, time.UTC)},
		{TimeUnixMilli, 1163438041250, time.Date(2006, 11, 13, 17, 14, 1, 250_000_000, time.UTC)},
		{TimeAuto, 1163438041250, time.Date(2006, 11, 13, 17, 14, 1, 250_000_000, time.UTC)},
		{TimeAuto, 1163438041, time.Date(2006, 11, 13, 17, 14, 1, 0, time.UTC)},
	} {
		got, err := tc.format.Number(tc.in)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("%s.Number(%v) = %v, %v; want %v", tc.format, tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1), 1e20} {
		if got, err := TimeUnix.Number(bad); err == nil {
			t.Errorf("Number(%v) = %v, want an error", bad, got)
		}
	}
	if _, err := TimeRFC3339.Number(5); err == nil {
		t.Error("rfc3339 took a number")
	}
}

func TestBuilder(t *testing.T) {
	now := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	at := func(min int) time.Time { return now.Add(time.Duration(min) * time.Minute) }
	t.Run("items", func(t *testing.T) {
		b := NewBuilder("row", parser.Options{Now: now, MaxItems: 2})
		for i, r := range []Record{
			{Time: at(-30), Value: 20.5, Unit: "C", Sensor: "north"},
			{Time: at(-10), Value: 21.25, Unit: "C", Sensor: "north"},
			{Time: at(-10), Value: 99, Unit: "C", Sensor: "north"}, // same id: ignored
			{Time: at(-20), Value: 7, ID: "custom-id"},
		} {
			n, ok := b.Next()
			if !ok || n != i+1 {
				t.Fatalf("Next = %d, %v", n, ok)
			}
			b.Add(n, r)
		}
		p, err := b.Parsed("title")
		if err != nil {
			t.Fatal(err)
		}
		if !p.Truncated || len(p.Items) != 2 || p.Skipped != nil {
			t.Fatalf("got %d items, truncated %v, skipped %v; want the newest 2, truncated", len(p.Items), p.Truncated, p.Skipped)
		}
		first := p.Items[0]
		wantID := "north@" + at(-10).Format(time.RFC3339Nano)
		if first.ID != wantID || first.Title != "21.25 C at north" || !first.Published.Equal(at(-10)) ||
			first.Reading == nil || first.Reading.Value != 21.25 || first.Reading.Unit != "C" || first.Reading.Sensor != "north" || !first.Reading.Time.Equal(at(-10)) {
			t.Errorf("first item = %+v (reading %+v)", first, first.Reading)
		}
		if p.Items[1].ID != "custom-id" || p.Items[1].Title != "7" {
			t.Errorf("second item = %+v", p.Items[1])
		}
	})
	t.Run("skips", func(t *testing.T) {
		b := NewBuilder("row", parser.Options{Now: now})
		n, _ := b.Next()
		b.Add(n, Record{Time: at(-1), Value: 1})
		n, _ = b.Next()
		b.Add(n, Record{Time: at(120), Value: 2}) // two hours ahead
		n, _ = b.Next()
		b.Skip(b.Errorf(n, "value", "%s is not a number", Quote("abc")))
		n, _ = b.Next()
		b.Add(n, Record{Time: at(-2), Value: math.Inf(1)})
		n, _ = b.Next()
		b.Add(n, Record{Value: 3})
		p, err := b.Parsed("")
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) != 1 || !errors.Is(p.Skipped, ErrRecordsSkipped) {
			t.Fatalf("items %d, skipped %v", len(p.Items), p.Skipped)
		}
		want := `4 of 5 rows skipped: row 2: field time: 2026-01-05T14:00:00Z is in the future; row 3: field value: "abc" is not a number; row 4: field value: not a finite number; …`
		if got := p.Skipped.Error(); got != want {
			t.Errorf("Skipped =\n%s\nwant\n%s", got, want)
		}
	})
	t.Run("all bad", func(t *testing.T) {
		b := NewBuilder("record", parser.Options{Now: now})
		for range 2 {
			n, _ := b.Next()
			b.Skip(b.Errorf(n, "time", "missing"))
		}
		p, err := b.Parsed("")
		if !errors.Is(err, ErrNoGoodRecords) || !errors.Is(err, ErrRecordsSkipped) || p != nil {
			t.Fatalf("Parsed = %v, %v; want ErrNoGoodRecords", p, err)
		}
		if want := "all 2 records skipped: record 1: field time: missing"; !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	})
	t.Run("empty", func(t *testing.T) {
		p, err := NewBuilder("row", parser.Options{}).Parsed("")
		if err != nil || len(p.Items) != 0 || p.Truncated {
			t.Fatalf("empty document: %+v, %v", p, err)
		}
	})
	t.Run("max records", func(t *testing.T) {
		b := NewBuilder("row", parser.Options{})
		n := 0
		for {
			if _, ok := b.Next(); !ok {
				break
			}
			n++
		}
		p, err := b.Parsed("")
		if n != MaxRecords || err != nil || !p.Truncated {
			t.Fatalf("read %d records (truncated %v, %v), want %d", n, p.Truncated, err, MaxRecords)
		}
	})
}

func TestTitleAndQuote(t *testing.T) {
	for _, tc := range []struct {
		r    storage.Reading
		want string
	}{
		{storage.Reading{Value: 21.3, Unit: "C", Sensor: "field-north"}, "21.3 C at field-north"},
		{storage.Reading{Value: -4}, "-4"},
		{storage.Reading{Value: 1e300, Unit: "x"}, "1e+300 x"},
	} {
		if got := Title(&tc.r); got != tc.want {
			t.Errorf("Title(%+v) = %q, want %q", tc.r, got, tc.want)
		}
	}
	if got := Quote(strings.Repeat("é", 50)); !strings.HasSuffix(got, `"…`) || len([]rune(got)) != 43 {
		t.Errorf("Quote of 50 runes = %q", got)
	}
}
