package sim

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// ms is the time at Unix milliseconds (fractional allowed).
func ms(v float64) time.Time {
	whole := int64(v)
	return time.UnixMilli(whole).Add(time.Duration((v - float64(whole)) * 1e6)).UTC()
}

func unix(v float64) time.Time {
	whole := int64(v)
	return time.Unix(whole, int64((v-float64(whole))*1e9+0.5)).UTC()
}

func published(items []Item) []time.Time {
	out := make([]time.Time, len(items))
	for i, it := range items {
		if !it.Observed.Equal(it.Published) {
			panic("trace item with Observed != Published")
		}
		out[i] = it.Published
	}
	return out
}

func TestParseULBFixture(t *testing.T) {
	f, err := os.Open("testdata/ulb-quirks.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	traces, err := ParseULB("ulb-quirks.txt", f)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		sensor string
		times  []time.Time
	}{
		{"3", []time.Time{ms(1163438101468)}},
		// Unsorted in the file, one with a non-UTF-8 sequence counter, one
		// with a decimal comma.
		{"10", []time.Time{ms(1163438041468), ms(1163438041999), ms(1163438161468.5)}},
		// An exact duplicate (kept) and a near-duplicate 3 ms later.
		{"20", []time.Time{ms(1163438041250), ms(1163438101250), ms(1163438101250), ms(1163438101253)}},
	}
	if len(traces) != len(want) {
		t.Fatalf("%d traces, want %d", len(traces), len(want))
	}
	for i, w := range want {
		tr := traces[i]
		// Skipped: header, "garbage", non-UTF-8 id, lone time, long line.
		if tr.Name != "ulb-quirks.txt" || tr.Sensor != w.sensor || tr.Skipped != 5 {
			t.Errorf("trace %d = %q/%q skipped %d, want ulb-quirks.txt/%q skipped 5", i, tr.Name, tr.Sensor, tr.Skipped, w.sensor)
		}
		if got := published(tr.Items); !slices.EqualFunc(got, w.times, time.Time.Equal) {
			t.Errorf("sensor %s: %v, want %v", w.sensor, got, w.times)
		}
	}
}

func TestParsePlainFixture(t *testing.T) {
	f, err := os.Open("testdata/plain.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := ParsePlain("plain.txt", f)
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Time{unix(1163438041), unix(1163438041), unix(1163438041.25), unix(1163438101.25), unix(1163438161.5)}
	if got := published(tr.Items); !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("got %v, want %v", got, want)
	}
	// Skipped: "abc", "12 34", "-5", 18 digits, non-UTF-8 byte.
	if tr.Skipped != 5 || tr.Name != "plain.txt" || tr.Sensor != "" {
		t.Errorf("trace %q/%q skipped %d, want plain.txt/\"\" skipped 5", tr.Name, tr.Sensor, tr.Skipped)
	}
}

func TestParsePlainValues(t *testing.T) {
	tests := []struct {
		line string
		want time.Time
		ok   bool
	}{
		{"0", time.Unix(0, 0).UTC(), true},
		{"1163438041", unix(1163438041), true},
		{"1163438041.123456789123", time.Unix(1163438041, 123456789).UTC(), true},
		{"1163438041,5", unix(1163438041.5), true},
		{"100000000000", time.Unix(100_000_000_000, 0).UTC(), true}, // 1e11 itself is seconds
		{"100000000000.5", ms(100000000000.5), true},                // above: milliseconds
		{"1163438041250", ms(1163438041250), true},
		{"253402300799999", ms(253402300799999), true},
		{"253402300800000", time.Time{}, false},
		{"1e9", time.Time{}, false},
		{"+5", time.Time{}, false},
		{"1.2.3", time.Time{}, false},
		{".5", time.Time{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.line, func(t *testing.T) {
			tr, err := ParsePlain("x", strings.NewReader(tc.line+"\n"))
			if !tc.ok {
				if !errors.Is(err, ErrNoData) || tr.Items != nil {
					t.Errorf("got %+v, %v; want ErrNoData", tr.Items, err)
				}
				return
			}
			if err != nil || len(tr.Items) != 1 || !tr.Items[0].Published.Equal(tc.want) {
				t.Errorf("got %+v, %v; want %v", tr.Items, err, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	long := strings.Repeat("1", MaxLineLen)
	tests := []struct {
		name    string
		in      string
		wantErr error
	}{
		{"empty", "", ErrNoData},
		{"comments only", "# nothing\n\n  # here\n", ErrNoData},
		{"garbage", "\x00\xff\xfe\n<html>\n", ErrNoData},
		{"too long line", long + " 1\n", ErrNoData},
		{"too long, no newline", long + long, ErrNoData},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseULB("x", strings.NewReader(tc.in)); !errors.Is(err, tc.wantErr) {
				t.Errorf("ParseULB: %v, want %v", err, tc.wantErr)
			}
			if _, err := ParsePlain("x", strings.NewReader(tc.in)); !errors.Is(err, tc.wantErr) {
				t.Errorf("ParsePlain: %v, want %v", err, tc.wantErr)
			}
		})
	}
	// A line just below the limit still parses.
	fits := "1163438041250 7 " + strings.Repeat("9", MaxLineLen-len("1163438041250 7 ")-2) + "\r\n"
	over := "1163438041250 8 " + strings.Repeat("9", MaxLineLen-len("1163438041250 8 ")-1) + "\r\n"
	if tr, err := ParseULB("x", strings.NewReader(fits+over)); err != nil || len(tr) != 1 || len(tr[0].Items) != 1 || tr[0].Skipped != 1 {
		t.Errorf("limit line: %+v, %v; want one item and one skipped line", tr, err)
	}
	errRead := errors.New("disk on fire")
	if _, err := ParsePlain("x", io.MultiReader(strings.NewReader("5\n"), iotestErr{errRead})); !errors.Is(err, errRead) {
		t.Errorf("read error: %v", err)
	}
}

type iotestErr struct{ err error }

func (e iotestErr) Read([]byte) (int, error) { return 0, e.err }

func TestParseULBSensorOrder(t *testing.T) {
	in := "5 b\n5 10\n5 9\n5 a\n5 09\n"
	traces, err := ParseULB("x", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tr := range traces {
		got = append(got, tr.Sensor)
	}
	if want := []string{"09", "9", "10", "a", "b"}; !slices.Equal(got, want) {
		t.Errorf("sensors %v, want %v", got, want)
	}
}

func TestParseTooManyItems(t *testing.T) {
	tests := []struct {
		name    string
		lines   int
		wantErr error
	}{
		{"at the limit", 100, nil},
		{"one more", 101, ErrTooManyItems},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := strings.Repeat("1163438041250 7\n# c\n", tc.lines)
			traces, err := parseULB("big", strings.NewReader(in), 100)
			if !errors.Is(err, tc.wantErr) || err == nil && len(traces[0].Items) != tc.lines {
				t.Errorf("ULB: %v, want %v", err, tc.wantErr)
			}
			tr, err := parsePlain("big", strings.NewReader(strings.Repeat("1163438041\n\n", tc.lines)), 100)
			if !errors.Is(err, tc.wantErr) || err == nil && len(tr.Items) != tc.lines {
				t.Errorf("plain: %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, content string
		sensors       []string
		items         int
		wantErr       error
	}{
		{"ulb.txt", "# c\n\n1163438041250 20 1 2,5\n1163438101250 4 1 2,5\n", []string{"4", "20"}, 2, nil},
		{"plain.txt", "# c\n\n1163438041.5\n1163438101\n", []string{""}, 2, nil},
		{"empty.txt", "", nil, 0, ErrNoData},
		{"missing.txt", "", nil, 0, os.ErrNotExist},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			if tc.wantErr != os.ErrNotExist {
				if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			traces, err := Load(path)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			var sensors []string
			items := 0
			for _, tr := range traces {
				if tr.Name != tc.name {
					t.Errorf("name %q", tr.Name)
				}
				sensors = append(sensors, tr.Sensor)
				items += len(tr.Items)
			}
			if !slices.Equal(sensors, tc.sensors) || items != tc.items {
				t.Errorf("sensors %q with %d items, want %q with %d", sensors, items, tc.sensors, tc.items)
			}
		})
	}
}

// RealTraceFiles are the excerpts of the ULB traces kept in testdata/ulb
// (see its README): the tests that replay real publishers read them and
// fail, never skip, when they are missing.
func realTraceFiles(t testing.TB) []string {
	t.Helper()
	files, _ := filepath.Glob("testdata/ulb/ulb-library1-R*.txt")
	if len(files) != 3 {
		t.Fatalf("want the 3 ULB trace excerpts in testdata/ulb, found %q", files)
	}
	return files
}

// TestRealTraces checks the parser against the excerpts of the ULB traces
// kept in testdata/ulb (motes 1–5 of each file).
func TestRealTraces(t *testing.T) {
	files := realTraceFiles(t)
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			lines := 0
			for l := range bytes.Lines(raw) {
				if len(bytes.TrimSpace(l)) > 0 {
					lines++
				}
			}
			traces, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(traces) != 5 {
				t.Errorf("%d motes, want 5", len(traces))
			}
			items := 0
			var medians []float64
			for _, tr := range traces {
				items += len(tr.Items)
				if tr.Skipped != 0 {
					t.Errorf("mote %s: %d lines skipped", tr.Sensor, tr.Skipped)
				}
				var g []float64
				for _, d := range gaps(tr.Items) {
					g = append(g, d.Seconds())
				}
				m, _, _, _ := Summarize(g)
				medians = append(medians, m)
			}
			if items != lines {
				t.Errorf("%d readings from %d lines", items, lines)
			}
			if m, _, _, _ := Summarize(medians); m < 59 || m > 61 {
				t.Errorf("median of the motes' median gaps %.2fs, want 60s", m)
			}
		})
	}
}
