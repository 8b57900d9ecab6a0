package sim

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"unicode/utf8"
)

// FuzzParseULB checks that ParseULB never panics and that whatever it
// returns is consistent: sorted traces and items, no more readings than
// lines, ErrNoData exactly when nothing parsed.
func FuzzParseULB(f *testing.F) {
	f.Add([]byte("1163438041250 20 1 21,21 2,81 51,53 22,08 20 28\n1163438041468 10 1 20,07 3 51,46 22,3 2 2\n"))
	f.Add([]byte("1163497985546 20 1\xa0000 21,21\r\n\r\n# c\n1163497985546 20 x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		traces, err := ParseULB("fuzz", bytes.NewReader(data))
		lines := bytes.Count(data, []byte{'\n'}) + 1
		if err != nil {
			if !errors.Is(err, ErrNoData) || traces != nil {
				t.Fatalf("unexpected error %v with %d traces", err, len(traces))
			}
			return
		}
		items := 0
		for i, tr := range traces {
			if i > 0 && compareIDs(traces[i-1].Sensor, tr.Sensor) >= 0 {
				t.Fatalf("sensors %q, %q out of order", traces[i-1].Sensor, tr.Sensor)
			}
			if tr.Name != "fuzz" || !utf8.ValidString(tr.Sensor) || len(tr.Items) == 0 || tr.Skipped > lines {
				t.Fatalf("bad trace %q/%q: %d items, %d skipped", tr.Name, tr.Sensor, len(tr.Items), tr.Skipped)
			}
			if !slices.IsSortedFunc(tr.Items, cmpPublished) {
				t.Fatalf("sensor %q: items not sorted", tr.Sensor)
			}
			items += len(tr.Items)
		}
		if items == 0 || items+traces[0].Skipped > lines {
			t.Fatalf("%d items + %d skipped from %d lines", items, traces[0].Skipped, lines)
		}
	})
}

// FuzzParsePlain checks ParsePlain the same way.
func FuzzParsePlain(f *testing.F) {
	f.Add([]byte("1163438041\n1163438041.25 # c\n1163438041250\n"))
	f.Add([]byte("5,5\r\n\r\n-1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := ParsePlain("fuzz", bytes.NewReader(data))
		lines := bytes.Count(data, []byte{'\n'}) + 1
		if err != nil {
			if !errors.Is(err, ErrNoData) || tr.Items != nil {
				t.Fatalf("unexpected error %v with %d items", err, len(tr.Items))
			}
			return
		}
		if len(tr.Items) == 0 || len(tr.Items)+tr.Skipped > lines || tr.Name != "fuzz" {
			t.Fatalf("%d items + %d skipped from %d lines", len(tr.Items), tr.Skipped, lines)
		}
		if !slices.IsSortedFunc(tr.Items, cmpPublished) {
			t.Fatal("items not sorted")
		}
	})
}
