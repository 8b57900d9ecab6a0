package sensor

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

func TestExtract(t *testing.T) {
	const tempCfg = `{"field":"title","regex":"(-?\\d+(?:[.,]\\d+)?)\\s*°?C","unit":"C","sensor_from":"author"}`
	withAuthor := func(id, title, author string) transform.Item {
		it := plain(id, title)
		it.Author = author
		return it
	}
	carrying := rd("r", "s", 5, t0)
	tests := []struct {
		name   string
		cfg    string
		in     transform.Item
		want   bool // an item comes out
		value  float64
		sensor string
		unit   string
	}{
		{"decimal point", tempCfg, withAuthor("a", "Lab: 21.3 °C", "lab-1"), true, 21.3, "lab-1", "C"},
		{"decimal comma", tempCfg, withAuthor("a", "Labor: 21,5°C", "lab-2"), true, 21.5, "lab-2", "C"},
		{"negative", tempCfg, withAuthor("a", "outside -3C", ""), true, -3, "", "C"},
		{"no match dropped", tempCfg, withAuthor("a", "battery low", "x"), false, 0, "", ""},
		{"no match kept", `{"regex":"(\\d+) ppm","keep":true}`, plain("a", "no number"), true, math.NaN(), "", ""},
		{"reading kept", tempCfg, carrying, true, 5, "s", "C"},
		{"default regex", `{"unit":"hPa","sensor":"baro"}`, plain("a", "pressure 1013,2 now"), true, 1013.2, "baro", "hPa"},
		{"unicode minus", `{}`, plain("a", "−4.5 degrees"), true, -4.5, "", ""},
		{"html summary", `{"field":"summary","regex":"Temp\\s*(-?\\d+(?:[.,]\\d+)?)"}`,
			transform.Item{ID: "a", Summary: "<p>Temp <b>17,25</b> &deg;C</p>", Published: t0}, true, 17.25, "", ""},
		{"empty field", `{"field":"summary"}`, plain("a", "12"), false, 0, "", ""},
		{"thousands", `{"regex":"([\\d.,]+) Pa"}`, plain("a", "101.325,5 Pa"), true, 101325.5, "", ""},
		{"not a number", `{"regex":"(x+)"}`, plain("a", "xxx"), false, 0, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := build(t, "extract", tt.cfg)
			in := []transform.Item{tt.in}
			before := deepCopy(in)
			out := apply(t, op, ctxAt(t0), in...)
			unchanged(t, before, in)
			if !tt.want {
				if len(out) != 0 {
					t.Fatalf("got %d items, want none", len(out))
				}
				return
			}
			if len(out) != 1 {
				t.Fatalf("got %d items, want 1", len(out))
			}
			got := out[0]
			if got.ID != tt.in.ID {
				t.Errorf("id %q, want %q", got.ID, tt.in.ID)
			}
			if math.IsNaN(tt.value) {
				if got.Reading != nil {
					t.Fatalf("kept item got a reading %+v", got.Reading)
				}
				return
			}
			r := got.Reading
			if r == nil {
				t.Fatal("no reading")
			}
			if r.Value != tt.value || r.Sensor != tt.sensor || r.Unit != tt.unit {
				t.Errorf("reading %v %q %q, want %v %q %q", r.Value, r.Unit, r.Sensor, tt.value, tt.unit, tt.sensor)
			}
			if tt.in.Reading == nil && !r.Time.Equal(tt.in.Published) {
				t.Errorf("time %v, want the publish time %v", r.Time, tt.in.Published)
			}
		})
	}
}

func TestExtractConfigErrors(t *testing.T) {
	configErrors(t, "extract", []struct{ cfg, field string }{
		{`{"regex":"\\d+"}`, "regex"},
		{`{"regex":"(\\d+"}`, "regex"},
		{`{"regex":"` + strings.Repeat("(a)", 300) + `"}`, "regex"},
		{`{"field":"colour"}`, "field"},
		{`{"sensor_from":"nobody"}`, "sensor_from"},
		{`{"unit":"` + strings.Repeat("u", 65) + `"}`, "unit"},
		{`{"sensor":"` + strings.Repeat("s", 300) + `"}`, "sensor"},
		{`{"keep":"yes"}`, "keep"},
		{`{"bogus":1}`, "bogus"},
	})
	if err := buildErr("extract", `{"regex":"`+strings.Repeat("(a)", 300)+`"}`); !errors.Is(err, transform.ErrLimit) {
		t.Errorf("long regex: %v, want ErrLimit", err)
	}
}

func TestConvert(t *testing.T) {
	reading := func(v float64, unit string) transform.Item {
		it := rd("r1", "lab-1", v, t0)
		it.Reading.Unit = unit
		return it
	}
	tests := []struct {
		name  string
		cfg   string
		in    transform.Item
		want  bool
		value float64
		unit  string
	}{
		{"C to F", `{"to":"F"}`, reading(100, "C"), true, 212, "F"},
		{"F to C", `{"to":"C"}`, reading(-40, "F"), true, -40, "C"},
		{"C to K", `{"to":"K"}`, reading(0, "°C"), true, 273.15, "K"},
		{"K to F", `{"to":"degF"}`, reading(273.15, "K"), true, 32, "F"},
		{"hPa to inHg", `{"to":"inHg"}`, reading(1013.25, "hPa"), true, 101325 / 3386.389, "inHg"},
		{"mbar to kPa", `{"to":"kPa"}`, reading(1000, "mbar"), true, 100, "kPa"},
		{"bar to mmHg", `{"to":"mmHg"}`, reading(1, "bar"), true, 1e5 / 133.322387415, "mmHg"},
		{"km/h to m/s", `{"to":"m/s"}`, reading(36, "km/h"), true, 10, "m/s"},
		{"kn to mph", `{"to":"mph"}`, reading(10, "knots"), true, 18520.0 / 3600 / 0.44704, "mph"},
		{"ft to m", `{"to":"m"}`, reading(10, "ft"), true, 3.048, "m"},
		{"in to mm", `{"to":"mm"}`, reading(1, "in"), true, 25.4, "mm"},
		{"percent to ppm", `{"to":"ppm"}`, reading(0.5, "%"), true, 5000, "ppm"},
		{"case ignored", `{"to":"hpa"}`, reading(1, "PA"), true, 0.01, "hPa"},
		{"from override", `{"from":"F","to":"C"}`, reading(212, "whatever"), true, 100, "C"},
		{"same unit", `{"to":"C"}`, reading(21.3, "C"), true, 21.3, "C"},
		{"unknown unit passes", `{"to":"F"}`, reading(3, "lux"), true, 3, "lux"},
		{"no unit passes", `{"to":"F"}`, reading(3, ""), true, 3, ""},
		{"incompatible passes", `{"to":"F"}`, reading(1013, "hPa"), true, 1013, "hPa"},
		{"unknown strict drops", `{"to":"F","strict":true}`, reading(3, "lux"), false, 0, ""},
		{"incompatible strict drops", `{"to":"F","strict":true}`, reading(1013, "hPa"), false, 0, ""},
		{"overflow drops", `{"to":"ppm"}`, reading(1e308, "1"), false, 0, ""},
		{"no reading passes", `{"to":"F","strict":true}`, plain("p", "x"), true, math.NaN(), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := build(t, "convert", tt.cfg)
			in := []transform.Item{tt.in}
			before := deepCopy(in)
			out := apply(t, op, ctxAt(t0), in...)
			unchanged(t, before, in)
			if !tt.want {
				if len(out) != 0 {
					t.Fatalf("got %v, want nothing", values(out))
				}
				return
			}
			if len(out) != 1 || out[0].ID != tt.in.ID {
				t.Fatalf("got %v, want the item", ids(out))
			}
			if math.IsNaN(tt.value) {
				if out[0].Reading != nil {
					t.Fatal("item without reading got one")
				}
				return
			}
			if r := out[0].Reading; !near([]float64{r.Value}, []float64{tt.value}) || r.Unit != tt.unit {
				t.Errorf("got %v %q, want %v %q", r.Value, r.Unit, tt.value, tt.unit)
			}
		})
	}
	t.Run("title", func(t *testing.T) {
		out := apply(t, build(t, "convert", `{"to":"F"}`), ctxAt(t0), reading(21.3, "C"))
		if want := "lab-1: 70.34 °F"; out[0].Title != want {
			t.Errorf("title %q, want %q", out[0].Title, want)
		}
	})
}

func TestConvertConfigErrors(t *testing.T) {
	configErrors(t, "convert", []struct{ cfg, field string }{
		{`{}`, "to"},
		{`{"to":"furlong"}`, "to"},
		{`{"to":"F","from":"stone"}`, "from"},
		{`{"to":"F","from":"hPa"}`, "from"},
		{`{"to":3}`, "to"},
		{`{"to":"F","strict":1}`, "strict"},
	})
}

func TestConvertTable(t *testing.T) {
	// Every unit converts to every unit of its kind and back.
	for _, a := range units {
		for _, b := range units {
			if a.dim != b.dim {
				continue
			}
			t.Run(a.name+" to "+b.name, func(t *testing.T) {
				v := 12.5
				back := convertValue(convertValue(v, a, b), b, a)
				if math.Abs(back-v) > 1e-9 {
					t.Errorf("%v %s → %s → %v", v, a.name, b.name, back)
				}
			})
		}
	}
}

func TestCalibrate(t *testing.T) {
	const cfg = `{"scale":1.02,"offset":-0.3,"unit":"C","sensors":{"lab-1":{"scale":1,"offset":0.4},"lab-2":{"offset":1}}}`
	tests := []struct {
		name   string
		cfg    string
		in     transform.Item
		value  float64
		unit   string
		title  string
		passed bool
	}{
		{"general", cfg, rd("a", "lab-9", 20, t0), 20*1.02 - 0.3, "C", "lab-9: 20.1 °C", false},
		{"override", cfg, rd("b", "lab-1", 20.9, t0), 21.3, "C", "lab-1: 21.3 °C", false},
		{"partial override keeps the scale", cfg, rd("c", "lab-2", 10, t0), 10*1.02 + 1, "C", "lab-2: 11.2 °C", false},
		{"new unit", `{"scale":0.001,"unit":"kPa"}`, rd("d", "p", 101325, t0), 101.325, "kPa", "p: 101.325 kPa", false},
		{"defaults", `{}`, rd("e", "", 7, t0), 7, "C", "7 °C", false},
		{"no reading", cfg, plain("f", "hello"), math.NaN(), "", "hello", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []transform.Item{tt.in}
			before := deepCopy(in)
			out := apply(t, build(t, "calibrate", tt.cfg), ctxAt(t0), in...)
			unchanged(t, before, in)
			if len(out) != 1 {
				t.Fatalf("got %d items", len(out))
			}
			got := out[0]
			if got.ID != tt.in.ID || got.Title != tt.title {
				t.Errorf("id %q title %q, want %q %q", got.ID, got.Title, tt.in.ID, tt.title)
			}
			if tt.passed {
				if got.Reading != nil {
					t.Error("item without reading got one")
				}
				return
			}
			if !near([]float64{got.Reading.Value}, []float64{tt.value}) || got.Reading.Unit != tt.unit {
				t.Errorf("got %v %q, want %v %q", got.Reading.Value, got.Reading.Unit, tt.value, tt.unit)
			}
			if !got.Reading.Time.Equal(tt.in.Reading.Time) {
				t.Error("observation time changed")
			}
		})
	}
}

func TestCalibrateConfigErrors(t *testing.T) {
	many := make([]string, MaxCalibrations+1)
	for i := range many {
		many[i] = `"s` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strings.Repeat("y", i/26) + `":{}`
	}
	configErrors(t, "calibrate", []struct{ cfg, field string }{
		{`{"scale":0}`, "scale"},
		{`{"scale":"2"}`, "scale"},
		{`{"offset":1e999}`, "offset"},
		{`{"unit":"` + strings.Repeat("u", 65) + `"}`, "unit"},
		{`{"sensors":{"lab-1":{"scale":0}}}`, "sensors.lab-1.scale"},
		{`{"sensors":{"lab-1":{"unit":"` + strings.Repeat("u", 65) + `"}}}`, "sensors.lab-1.unit"},
		{`{"sensors":{"":{}}}`, "sensors"},
		{`{"sensors":{` + strings.Join(many, ",") + `}}`, "sensors"},
		{`{"sensors":{"a":{"gain":2}}}`, "gain"},
	})
}

func TestDeadband(t *testing.T) {
	type step struct {
		sensor string
		v      float64
	}
	tests := []struct {
		name  string
		cfg   string
		steps []step
		want  []string // ids passed
	}{
		{"delta", `{"delta":0.5}`, []step{{"a", 20}, {"a", 20.3}, {"a", 20.6}, {"a", 20.9}, {"a", 21.2}, {"a", 20.6}, {"a", 20.5}},
			[]string{"0", "2", "4", "5"}},
		{"groups apart", `{"delta":1}`, []step{{"a", 1}, {"b", 1}, {"a", 1.5}, {"b", 3}, {"a", 2.5}},
			[]string{"0", "1", "3", "4"}},
		{"one group", `{"delta":1,"by":""}`, []step{{"a", 1}, {"b", 1.5}, {"a", 3}},
			[]string{"0", "2"}},
		{"any change", `{}`, []step{{"a", 1}, {"a", 1}, {"a", 1.0001}, {"a", 1.0001}},
			[]string{"0", "2"}},
		{"exactly delta is not more", `{"delta":0.5}`, []step{{"a", 1}, {"a", 1.5}, {"a", 0.5}, {"a", 1.75}},
			[]string{"0", "3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in []transform.Item
			for i, s := range tt.steps {
				in = append(in, rd(string(rune('0'+i)), s.sensor, s.v, at(float64(i))))
			}
			out := apply(t, build(t, "deadband", tt.cfg), ctxAt(t0), in...)
			if !slices.Equal(ids(out), tt.want) {
				t.Errorf("passed %v, want %v", ids(out), tt.want)
			}
			// Split in two runs with the state in between: the same.
			for cut := 1; cut < len(in); cut++ {
				op := build(t, "deadband", tt.cfg)
				first := apply(t, op, ctxAt(t0), in[:cut]...)
				op = reload(t, op, "deadband", tt.cfg)
				second := apply(t, op, ctxAt(t0), in[cut:]...)
				if got := append(ids(first), ids(second)...); !slices.Equal(got, tt.want) {
					t.Errorf("cut at %d: passed %v, want %v", cut, got, tt.want)
				}
			}
		})
	}
	t.Run("no reading passes", func(t *testing.T) {
		out := apply(t, build(t, "deadband", `{"delta":1}`), ctxAt(t0), plain("x", "y"), rd("r", "a", 1, t0))
		if !slices.Equal(ids(out), []string{"x", "r"}) {
			t.Errorf("got %v", ids(out))
		}
	})
}

func TestDeadbandConfigErrors(t *testing.T) {
	configErrors(t, "deadband", []struct{ cfg, field string }{
		{`{"delta":-1}`, "delta"},
		{`{"delta":"1"}`, "delta"},
		{`{"by":"nothing"}`, "by"},
	})
}

func TestHelpers(t *testing.T) {
	t.Run("median", func(t *testing.T) {
		for n := 1; n < 40; n++ {
			xs := make([]float64, n)
			for i := range xs {
				xs[i] = float64((i * 7919) % 13)
			}
			s := slices.Clone(xs)
			slices.Sort(s)
			want := s[n/2]
			if n%2 == 0 {
				want = (s[n/2-1] + s[n/2]) / 2
			}
			if got := median(xs); got != want {
				t.Errorf("n=%d: median %v, want %v", n, got, want)
			}
		}
	})
	t.Run("fmtNum", func(t *testing.T) {
		for _, tt := range []struct {
			v    float64
			want string
		}{{21.3, "21.3"}, {70.34000000000001, "70.34"}, {negZero, "0"}, {21.3666666, "21.3667"}, {1234567.4, "1234567"}, {1e-7, "0.0000001"}} {
			if got := fmtNum(tt.v); got != tt.want {
				t.Errorf("fmtNum(%v) = %q, want %q", tt.v, got, tt.want)
			}
		}
	})
	t.Run("humanDuration", func(t *testing.T) {
		for _, tt := range []struct {
			d    string
			want string
		}{{"17m", "17m"}, {"1h", "1h"}, {"1h5m", "1h5m"}, {"45s", "45s"}, {"5m0.4s", "5m"}, {"2h0m3s", "2h0m3s"}} {
			d, _ := time.ParseDuration(tt.d)
			if got := humanDuration(d); got != tt.want {
				t.Errorf("humanDuration(%s) = %q, want %q", tt.d, got, tt.want)
			}
		}
	})
	t.Run("readingTitle", func(t *testing.T) {
		if got := readingTitle(storage.Reading{Value: 21.3, Unit: "C", Sensor: "lab-1"}); got != "lab-1: 21.3 °C" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("boundKey", func(t *testing.T) {
		a, b := boundKey(strings.Repeat("k", 300)+"a"), boundKey(strings.Repeat("k", 300)+"b")
		if a == b || len(a) > maxKeyBytes || len(b) > maxKeyBytes {
			t.Errorf("long keys %q and %q", a, b)
		}
	})
	t.Run("groups evict the least recently updated", func(t *testing.T) {
		g := newGroups[int](3)
		for _, k := range []string{"a", "b", "c"} {
			v, _ := g.touch(k)
			*v = 1
		}
		g.touch("a")
		g.touch("d")
		if _, ok := g.get("b"); ok || g.len() != 3 {
			t.Errorf("b should be forgotten, have %d groups", g.len())
		}
		if _, ok := g.get("a"); !ok {
			t.Error("a was forgotten")
		}
	})
}

// negZero is -0 (the literal -0.0 is +0 in Go).
var negZero = math.Copysign(0, -1)
