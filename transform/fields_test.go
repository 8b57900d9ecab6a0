package transform

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

func TestGetSet(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		field string
		set   any
		want  any
		err   bool
	}{
		{"title", "Hot", "Hot", false},
		{"title", 21.5, "21.5", false},
		{"summary", t0, "2026-11-21T12:00:00Z", false},
		{"categories", "a", []string{"a"}, false},
		{"categories", []string{"a", "b"}, []string{"a", "b"}, false},
		{"enclosure", "https://x/y.png", "https://x/y.png", false},
		{"value", "21,5", 21.5, false},
		{"value", "warm", nil, true},
		{"value", math.Inf(1), nil, true},
		{"lat", 91.0, nil, true},
		{"lon", -4.5, -4.5, false},
		{"unit", "C", "C", false},
		{"time", "2026-11-21T12:00:00Z", t0, false},
		{"time", 1.7636e9, time.Unix(1763600000, 0).UTC(), false},
		{"published", "Sat, 21 Nov 2026 12:00:00 +0000", t0, false},
		{"published", "yesterday", nil, true},
		{"id", "", nil, true},
		{"fetched", t0, nil, true},
		{"feed", 3.0, nil, true},
		{"colour", "red", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			it := Item{ID: "x", Published: t0}
			err := Set(&it, tt.field, tt.set)
			if tt.err {
				if err == nil {
					t.Fatalf("Set(%s, %v) succeeded", tt.field, tt.set)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, ok := Get(&it, tt.field)
			if !ok {
				t.Fatalf("Get(%s) not ok after Set", tt.field)
			}
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(tt.want)
			if string(gj) != string(wj) {
				t.Errorf("Get(%s) = %s, want %s", tt.field, gj, wj)
			}
		})
	}
}

func TestSetReadingGetsPublishTime(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	it := Item{ID: "x", Published: t0}
	if err := Set(&it, "value", 3.0); err != nil {
		t.Fatal(err)
	}
	if it.Reading == nil || !it.Reading.Time.Equal(t0) {
		t.Errorf("reading %+v, want observed at the publish time", it.Reading)
	}
	if err := Set(&it, "value", nil); err != nil || it.Reading != nil {
		t.Errorf("clearing value: %v, %+v", err, it.Reading)
	}
}

func TestGetMissing(t *testing.T) {
	it := Item{ID: "x"}
	for _, f := range Fields {
		if f.Name == "id" {
			continue
		}
		if _, ok := Get(&it, f.Name); ok {
			t.Errorf("Get(%s) ok on an empty item", f.Name)
		}
	}
	if _, ok := Get(&it, "nope"); ok {
		t.Error("unknown field ok")
	}
}

func TestCompare(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		a, b any
		want int
	}{
		{2.0, 10.0, -1},
		{"2", 10.0, -1}, // a number-like string compares as a number
		{"b", "a", 1},
		{t0, "2026-11-21T11:00:00Z", 1},
		{"2026-11-21T13:00:00Z", t0, 1},
		{3.0, 3.0, 0},
		{"x", 3.0, 1},
	}
	for _, tt := range tests {
		if got := Compare(tt.a, tt.b); got != tt.want {
			t.Errorf("Compare(%v, %v) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestClone(t *testing.T) {
	lat := 1.0
	it := Item{ID: "x", Categories: []string{"a"}, Enclosures: []storage.Enclosure{{URL: "u"}}, Reading: &storage.Reading{Value: 1, Lat: &lat}}
	c := Clone(it)
	c.Categories[0] = "b"
	c.Enclosures[0].URL = "v"
	c.Reading.Value = 2
	*c.Reading.Lat = 2
	if it.Categories[0] != "a" || it.Enclosures[0].URL != "u" || it.Reading.Value != 1 || *it.Reading.Lat != 1 {
		t.Errorf("Clone shares memory with the original: %+v", it)
	}
}

func TestDecode(t *testing.T) {
	type cfg struct {
		N     int      `json:"n"`
		Every Duration `json:"every"`
		Rules []struct {
			Value float64 `json:"value"`
		} `json:"rules"`
	}
	tests := []struct {
		in    string
		field string
		ok    bool
	}{
		{``, "", true},
		{`null`, "", true},
		{`{"n":3,"every":"5m"}`, "", true},
		{`{"every":90}`, "", true},
		{`{"n":"x"}`, "n", false},
		{`{"colour":1}`, "colour", false},
		{`{"rules":[{"value":"x"}]}`, "rules.value", false},
		{`{"n":1} {"n":2}`, "", false},
		{`{"n":`, "", false},
		{`{"every":"soon"}`, "every", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			v, err := Decode[cfg](json.RawMessage(tt.in))
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				if tt.in == `{"every":90}` && v.Every.D() != 90*time.Second {
					t.Errorf("every = %v", v.Every.D())
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a FieldError", err)
			}
			if tt.field != "" && fe.Field != tt.field {
				t.Errorf("field = %q, want %q (%v)", fe.Field, tt.field, err)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("not ErrInvalid: %v", err)
			}
		})
	}
}

func TestCompileRegexLimits(t *testing.T) {
	tests := []struct {
		expr  string
		limit bool
		ok    bool
	}{
		{`^\d+(\.\d+)?$`, false, true},
		{`(`, false, false},
		{string(make([]byte, 600)), true, false},
		{`(a{1,1000}){1,1000}`, false, false}, // refused by RE2's own repeat limit
		{`[a-z]{1000}[0-9]{1000}[A-Z]{1000}x{1000}y{1000}`, true, false},
	}
	for _, tt := range tests {
		t.Run(truncate(tt.expr, 20), func(t *testing.T) {
			_, err := CompileRegex("pattern", tt.expr)
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok %v", err, tt.ok)
			}
			if errors.Is(err, ErrLimit) != tt.limit {
				t.Errorf("ErrLimit = %v, want %v (%v)", !tt.limit, tt.limit, err)
			}
		})
	}
}

func FuzzCompileRegex(f *testing.F) {
	for _, s := range []string{`a+`, `(a|b)*c`, `(a{1,1000}){1,1000}`, `\p{Greek}+`, `(?i)x{2,}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		re, err := CompileRegex("p", expr)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != "p" {
				t.Fatalf("error %v does not name the field", err)
			}
			return
		}
		if len(expr) > DefaultLimits.MaxRegex {
			t.Fatalf("accepted a %d-byte regex", len(expr))
		}
		re.MatchString("sensor lab-1 21.5 C")
	})
}
