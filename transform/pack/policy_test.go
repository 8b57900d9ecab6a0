package pack

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

const docPolicy = `{"levels":[
  {"above":1,   "filters":[{"op":"EVERY","config":{"n":2}}], "digest":["MEAN"]},
  {"above":1.5, "filters":[{"op":"DELTA","config":{"delta":1,"by":"sensor"}}],
                "digest":["MEAN","MIN","MAX"], "by":"sensor"},
  {"above":3,   "digest":["COUNT","MEAN"]}
]}`

func TestParsePolicy(t *testing.T) {
	p, err := ParsePolicy(json.RawMessage(docPolicy))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Levels) != 3 || p.Levels[0].Field != "value" || p.Levels[1].By != "sensor" || len(p.Levels[1].ops) != 1 {
		t.Errorf("parsed %+v", p)
	}
	for _, tc := range []struct {
		fill float64
		want int // level index, -1 none
	}{{0.5, -1}, {1, 0}, {1.49, 0}, {1.5, 1}, {2.9, 1}, {3, 2}, {100, 2}} {
		lv := p.Level(tc.fill)
		got := -1
		for i := range p.Levels {
			if lv == &p.Levels[i] {
				got = i
			}
		}
		if got != tc.want {
			t.Errorf("Level(%v) is level %d, want %d", tc.fill, got, tc.want)
		}
	}
}

func TestParsePolicyErrors(t *testing.T) {
	level := func(s string) string { return `{"levels":[` + s + `]}` }
	nine := strings.TrimSuffix(strings.Repeat(`{"above":1},`, 9), ",")
	steps := strings.TrimSuffix(strings.Repeat(`{"op":"FIRST","config":{"n":1}},`, 9), ",")
	tests := []struct {
		name, raw, field string
		limit            bool
	}{
		{"empty", ``, "", false},
		{"null", `null`, "", false},
		{"not an object", `[]`, "", false},
		{"malformed", `{"levels":`, "", false},
		{"trailing data", `{"levels":[{"above":1}]} {}`, "", false},
		{"too large", `{"levels":[{"above":1,"by":"` + strings.Repeat("x", MaxPolicySize) + `"}]}`, "", true},
		{"unknown field", `{"levels":[{"above":1}],"extra":1}`, "extra", false},
		{"no levels", `{"levels":[]}`, "levels", false},
		{"levels missing", `{}`, "levels", false},
		{"too many levels", level(nine), "levels", true},
		{"above negative", level(`{"above":-1}`), "levels[0].above", false},
		{"above huge", level(`{"above":1e300}`), "levels[0].above", false},
		{"above not ascending", level(`{"above":2},{"above":1.5}`), "levels[1].above", false},
		{"above repeated", level(`{"above":1},{"above":1}`), "levels[1].above", false},
		{"above a string", level(`{"above":"1"}`), "levels.above", false},
		{"too many steps", level(`{"above":1,"filters":[` + steps + `]}`), "levels[0].filters", true},
		{"no op", level(`{"above":1,"filters":[{"config":{"n":1}}]}`), "levels[0].filters[0].op", false},
		{"unknown op", level(`{"above":1,"filters":[{"op":"SORT"}]}`), "levels[0].filters[0].op", false},
		{"lower-case op", level(`{"above":1,"filters":[{"op":"every","config":{"n":2}}]}`), "levels[0].filters[0].op", false},
		{"digester as filter", level(`{"above":1,"filters":[{"op":"MEAN"}]}`), "levels[0].filters[0].op", false},
		{"bad config", level(`{"above":1},{"above":2,"filters":[{"op":"FIRST","config":{"n":1}},{"op":"EVERY","config":{"n":0}}]}`), "levels[1].filters[1].config.n", false},
		{"missing config", level(`{"above":1,"filters":[{"op":"EVERY"}]}`), "levels[0].filters[0].config.n", false},
		{"config not an object", level(`{"above":1,"filters":[{"op":"EVERY","config":[2]}]}`), "levels[0].filters[0].config", false},
		{"config unknown field", level(`{"above":1,"filters":[{"op":"EVERY","config":{"n":2,"m":1}}]}`), "levels[0].filters[0].config.m", false},
		{"config over a limit", level(`{"above":1,"filters":[{"op":"MATCH","config":{"field":"title","pattern":"` + strings.Repeat("a", 600) + `"}}]}`), "levels[0].filters[0].config.pattern", true},
		{"unknown digester", level(`{"above":1,"digest":["MEDIAN"]}`), "levels[0].digest[0]", false},
		{"digester twice", level(`{"above":1,"digest":["MEAN","MEAN"]}`), "levels[0].digest[1]", false},
		{"too many digesters", level(`{"above":1,"digest":["MEAN","MIN","MAX","SUM","COUNT","MEAN"]}`), "levels[0].digest", true},
		{"field not a number", level(`{"above":1,"digest":["MEAN"],"field":"title"}`), "levels[0].field", false},
		{"unknown field name", level(`{"above":1,"field":"nope"}`), "levels[0].field", false},
		{"unknown by", level(`{"above":1,"by":"nope"}`), "levels[0].by", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePolicy(json.RawMessage(tc.raw))
			if err == nil {
				t.Fatalf("ParsePolicy(%.80s) = %+v, want an error", tc.raw, p)
			}
			var fe *transform.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("%T %v is not a FieldError", err, err)
			}
			if fe.Field != tc.field {
				t.Errorf("error names %q, want %q (%v)", fe.Field, tc.field, err)
			}
			if errors.Is(err, transform.ErrLimit) != tc.limit || !tc.limit && !errors.Is(err, transform.ErrInvalid) {
				t.Errorf("%v: ErrLimit %v, want %v", err, errors.Is(err, transform.ErrLimit), tc.limit)
			}
		})
	}
}

// seqs numbers items as the store would.
func seqs(items []Item) []Item {
	for i := range items {
		items[i].Seq = uint64(100 + i)
	}
	return items
}

func TestPolicyApply(t *testing.T) {
	p, err := ParsePolicy(json.RawMessage(docPolicy))
	if err != nil {
		t.Fatal(err)
	}
	q := seqs(testQueue())
	tests := []struct {
		name    string
		fill    float64
		keep    []string
		digests []string // digester/group
		counts  []int64
	}{
		{"below every level", 0.9, nil, nil, nil},
		{"level 1: every other item, the rest digested", 1.2, []string{"a", "c", "e"}, []string{"MEAN/"}, []int64{2}},
		{"level 2: delta by sensor", 2, []string{"a", "c", "d"}, []string{"MEAN/s1", "MEAN/s2", "MIN/s1", "MIN/s2", "MAX/s1", "MAX/s2"}, []int64{1, 1, 1, 1, 1, 1}},
		{"level 3: everything digested", 5, nil, []string{"COUNT/", "MEAN/"}, []int64{5, 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keep, digests, err := p.Apply(testContext(), "7", tc.fill, q)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(keep), tc.keep) {
				t.Errorf("kept %v, want %v", ids(keep), tc.keep)
			}
			for i, k := range keep {
				if k.Seq != q[slices.Index(ids(q), k.ID)].Seq {
					t.Errorf("kept item %d has seq %d", i, k.Seq)
				}
			}
			var got []string
			var counts []int64
			for _, d := range digests {
				got = append(got, strings.TrimPrefix(d.Categories[1], "digest:")+"/"+d.Reading.Sensor)
				counts = append(counts, d.Digest.Count)
			}
			if !slices.Equal(got, tc.digests) || !slices.Equal(counts, tc.counts) {
				t.Errorf("digests %v %v, want %v %v", got, counts, tc.digests, tc.counts)
			}
		})
	}
}

// TestPolicyCarriesDigests runs reductions in a row, feeding each one's
// digests back as the next one's oldest items, as the store does.
func TestPolicyCarriesDigests(t *testing.T) {
	p, err := ParsePolicy(json.RawMessage(`{"levels":[
		{"above":1,"filters":[{"op":"EVERY","config":{"n":2}}],"digest":["MEAN"]},
		{"above":3,"digest":["MEAN","MAX"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := testContext()
	all := manyReadings(30)
	// Round 1, level 2: everything into MEAN and MAX.
	_, d1, err := p.Apply(c, "1", 4, seqs(slices.Clone(all[:10])))
	if err != nil || len(d1) != 2 {
		t.Fatalf("round 1: %v, %v", d1, err)
	}
	// Round 2, level 1: the MEAN digest merges, MAX is kept as it is.
	in := seqs(append(slices.Clone(d1), all[10:20]...))
	keep, d2, err := p.Apply(c, "1", 1.5, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(d2) != 1 || d2[0].ID != d1[0].ID || d2[0].Digest.Count != 15 {
		t.Fatalf("round 2 digests %+v, want the MEAN of 15 readings with id %s", d2, d1[0].ID)
	}
	if len(keep) != 6 || keep[0].ID != d1[1].ID || keep[0].Seq != in[1].Seq {
		t.Fatalf("round 2 kept %v, want the MAX digest and 5 readings", ids(keep))
	}
	// Round 3, level 2 again: both merge.
	in = seqs(append(append(slices.Clone(keep), d2...), all[20:]...))
	keep, d3, err := p.Apply(c, "1", 3, in)
	if err != nil || len(keep) != 0 || len(d3) != 2 {
		t.Fatalf("round 3: kept %v, digests %v, %v", ids(keep), d3, err)
	}
	mean, mx := d3[0], d3[1]
	if mean.ID != d1[0].ID || mx.ID != d1[1].ID {
		t.Errorf("digest ids changed: %s %s, were %s %s", mean.ID, mx.ID, d1[0].ID, d1[1].ID)
	}
	want, _ := Summarise("value", all)
	if mean.Digest.Count != 30 || mean.Digest.Sum != want.Sum || mean.Reading.Value != want.Sum/30 {
		t.Errorf("MEAN digest %+v, want count 30 sum %v", mean.Digest, want.Sum)
	}
	// MAX missed the readings dropped in round 2, at a level without it.
	if mx.Digest.Count != 25 || mx.Reading.Value != 29 || !mx.Digest.From.Equal(want.From) || !mx.Digest.To.Equal(want.To) {
		t.Errorf("MAX digest %+v value %v", mx.Digest, mx.Reading.Value)
	}
	// Another feed's digests are ordinary items there.
	keep, d4, err := p.Apply(c, "2", 3, seqs(slices.Clone(d3[:1])))
	if err != nil || len(keep) != 0 || len(d4) != 2 || d4[0].ID == mean.ID || d4[0].Digest.Count != 30 {
		t.Errorf("in another scope: kept %v, digests %+v, %v", ids(keep), d4, err)
	}
}

func TestPolicyLevelWithoutDigesters(t *testing.T) {
	p, err := ParsePolicy(json.RawMessage(`{"levels":[{"above":1,"filters":[{"op":"GT","config":{"field":"value","value":15}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	keep, digests, err := p.Apply(testContext(), "1", 2, seqs(testQueue()))
	if err != nil || len(digests) != 0 || !slices.Equal(ids(keep), []string{"c", "d", "e"}) {
		t.Errorf("kept %v, digests %v, %v", ids(keep), digests, err)
	}
}

func TestFill(t *testing.T) {
	for _, tc := range []struct {
		r    storage.Retention
		over int
		want float64
	}{{storage.Retention{MaxItems: 10}, 5, 1.5}, {storage.Retention{MaxItems: 10}, 40, 5}, {storage.Retention{}, 100, 1}, {storage.Retention{MaxAge: 1}, 3, 1}} {
		if got := Fill(tc.r, tc.over); got != tc.want {
			t.Errorf("Fill(%+v, %d) = %v, want %v", tc.r, tc.over, got, tc.want)
		}
	}
}

func TestPolicyFilterErrorsAreReported(t *testing.T) {
	p, err := ParsePolicy(json.RawMessage(`{"levels":[{"above":1,"digest":["COUNT"],"by":"sensor"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	q := make([]Item, MaxGroups+1)
	for i := range q {
		q[i] = rd(fmt.Sprint(i), fmt.Sprint("s", i), 1, 0)
	}
	if _, _, err := p.Apply(testContext(), "1", 2, seqs(q)); !errors.Is(err, transform.ErrLimit) {
		t.Errorf("Apply over the group limit: %v", err)
	}
}
