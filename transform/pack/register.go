package pack

import (
	"encoding/json"

	"github.com/slogfeed/slogfeed/transform"
)

// opSpec is one PACK operator: the registry's Spec without the common
// parts.
type opSpec struct {
	name, doc, example string
	config             any
	build              func(json.RawMessage) (transform.Operator, error)
}

var filterSpecs = []opSpec{
	{"GT", "Keeps the items whose field is greater than value (numbers numerically, times chronologically, text by bytes); items without the field are dropped.",
		`{"field":"value","value":20}`, CompareConfig{}, newCompare(func(r int) bool { return r > 0 })},
	{"GE", "Keeps the items whose field is greater than or equal to value; items without the field are dropped.",
		`{"field":"value","value":20}`, CompareConfig{}, newCompare(func(r int) bool { return r >= 0 })},
	{"EQ", "Keeps the items whose field equals value; items without the field are dropped.",
		`{"field":"sensor","value":"lab-1"}`, CompareConfig{}, newCompare(func(r int) bool { return r == 0 })},
	{"NE", "Keeps the items whose field differs from value; items without the field are dropped.",
		`{"field":"unit","value":"F"}`, CompareConfig{}, newCompare(func(r int) bool { return r != 0 })},
	{"LT", "Keeps the items whose field is less than value; items without the field are dropped.",
		`{"field":"value","value":20}`, CompareConfig{}, newCompare(func(r int) bool { return r < 0 })},
	{"LE", "Keeps the items whose field is less than or equal to value; items without the field are dropped.",
		`{"field":"value","value":20}`, CompareConfig{}, newCompare(func(r int) bool { return r <= 0 })},
	{"MATCH", "Keeps the items whose field, as text, matches an RE2 regular expression (a list matches when one entry does).",
		`{"field":"title","pattern":"(?i)alarm"}`, MatchConfig{}, newMatch},
	{"WITHIN", "Keeps the items whose number or time field lies in [min, max], inclusive; for a time field, {\"last\":\"1h\"} keeps the last hour before the run.",
		`{"field":"value","min":10,"max":20}`, WithinConfig{}, newWithin},
	{"INSET", "Keeps the items whose field value is one of set (for a list field: has an entry in set).",
		`{"field":"sensor","set":["lab-1","lab-2"]}`, SetConfig{}, newInset},
	{"CONTAIN", "Keeps the items whose list field (default categories) contains value.",
		`{"field":"categories","value":"alarm"}`, ContainConfig{}, newContain},
	{"SUBSET", "Keeps the items whose list field (default categories) is a subset of set: every entry is in set.",
		`{"field":"categories","set":["temperature","humidity"]}`, SetConfig{}, newListSet(true)},
	{"SUPSET", "Keeps the items whose list field (default categories) is a superset of set: it has every entry of set.",
		`{"field":"categories","set":["temperature","outdoor"]}`, SetConfig{}, newListSet(false)},
	{"FIRST", "Keeps the first n items of the queue.",
		`{"n":10}`, NConfig{}, newNth(pickFirst)},
	{"LAST", "Keeps the last n items of the queue.",
		`{"n":10}`, NConfig{}, newNth(pickLast)},
	{"UNIQ", "Drops an item whose field equals that of the item just before it (runs of equal values keep their first item).",
		`{"field":"value"}`, FieldConfig{}, newUniq(false)},
	{"GUNIQ", "Keeps only the first item of each distinct field value in the queue.",
		`{"field":"value"}`, FieldConfig{}, newUniq(true)},
	{"DELTA", "Keeps an item only when its number field differs by more than delta from the last kept value (of its group, with by); the first is kept. Remembers the last kept values between runs.",
		`{"field":"value","delta":0.5,"by":"sensor"}`, DeltaConfig{}, newDelta},
	{"LATEST", "Keeps only the latest item (by publish time, else queue order) of each group of by, or the one latest item without by.",
		`{"by":"sensor"}`, LatestConfig{}, newLatest},
	{"EVERY", "Keeps every n-th item of the queue: the 1st, the n+1-th, the 2n+1-th…",
		`{"n":2}`, NConfig{}, newNth(pickEvery)},
	{"RANDOM", "Keeps a random fraction p of the items, or n of them, chosen reproducibly from the item ids.",
		`{"p":0.25}`, RandomConfig{}, newRandom},
}

var digesterSpecs = []opSpec{
	{"MAX", "Summarises the queue (per group of by) into one digest item whose value is the largest of field; digest items among the input merge exactly.",
		`{"field":"value","by":"sensor"}`, DigestConfig{}, newDigester("MAX")},
	{"MIN", "Summarises the queue (per group of by) into one digest item whose value is the smallest of field; digest items among the input merge exactly.",
		`{"field":"value","by":"sensor"}`, DigestConfig{}, newDigester("MIN")},
	{"COUNT", "Summarises the queue (per group of by) into one digest item whose value is the number of readings of field; digest items among the input merge exactly.",
		`{"field":"value"}`, DigestConfig{}, newDigester("COUNT")},
	{"SUM", "Summarises the queue (per group of by) into one digest item whose value is the sum of field; digest items among the input merge exactly.",
		`{"field":"value"}`, DigestConfig{}, newDigester("SUM")},
	{"MEAN", "Summarises the queue (per group of by) into one digest item whose value is the mean of field; digest items among the input merge exactly.",
		`{"field":"value","by":"sensor"}`, DigestConfig{}, newDigester("MEAN")},
}

// filterByName and digesterByName index the specs.
var filterByName, digesterByName = index(filterSpecs), index(digesterSpecs)

func index(specs []opSpec) map[string]opSpec {
	m := make(map[string]opSpec, len(specs))
	for _, s := range specs {
		m[s.name] = s
	}
	return m
}

func init() {
	for _, specs := range [][]opSpec{filterSpecs, digesterSpecs} {
		for _, s := range specs {
			transform.Register(transform.Spec{
				Name:      s.name,
				Family:    transform.FamilyPACK,
				Doc:       s.doc,
				Example:   s.example,
				MinInputs: 1,
				MaxInputs: -1,
				Config:    s.config,
				New:       s.build,
			})
		}
	}
}
