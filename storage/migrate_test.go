package storage

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

var update = flag.Bool("update", false, "rewrite testdata/schema1.db (only while SchemaVersion is 1)")

// storedSchema reads the schema version of a closed data file directly.
func storedSchema(t *testing.T, path string) uint64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v uint64
	if err := db.View(func(tx *bolt.Tx) error {
		v, err = schemaVersion(tx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMigrations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "slogfeed.db")
	var ran []string
	put := func(name string) migration {
		return migration{name: name, fn: func(tx *bolt.Tx) error {
			ran = append(ran, name)
			b, err := tx.CreateBucketIfNotExists([]byte("test"))
			if err != nil {
				return err
			}
			return b.Put([]byte(name), []byte("done"))
		}}
	}
	numbered := func(ms ...migration) []migration {
		for i := range ms {
			ms[i].version = uint64(i + 1)
		}
		return ms
	}
	boom := errors.New("boom")
	failing := migration{name: "fails", fn: func(tx *bolt.Tx) error {
		ran = append(ran, "fails")
		b, err := tx.CreateBucketIfNotExists([]byte("test"))
		if err != nil {
			return err
		}
		if err := b.Put([]byte("fails"), []byte("half done")); err != nil {
			return err
		}
		return boom
	}}
	initial := migrations[0]

	// The file ends one version above the real table's, so that the real
	// table refuses it too.
	top := SchemaVersion + 1
	upTo := func(n int) []migration { // initial, then put("2") … put("n")
		ms := []migration{initial}
		for v := 2; v <= n; v++ {
			ms = append(ms, put(strconv.Itoa(v)))
		}
		return ms
	}
	names := func(from, to int) []string {
		var out []string
		for v := from; v <= to; v++ {
			out = append(out, strconv.Itoa(v))
		}
		return out
	}
	steps := []struct {
		name    string
		migs    []migration
		want    error
		ran     []string
		version uint64
	}{
		{"new file gets every migration", numbered(upTo(2)...), nil, []string{"2"}, 2},
		{"reopening runs nothing", numbered(upTo(2)...), nil, nil, 2},
		{"a failed migration leaves the last good version", numbered(append(upTo(3), failing)...), boom, []string{"3", "fails"}, 3},
		{"the fixed migration resumes there", numbered(upTo(top)...), nil, names(4, top), uint64(top)},
		{"an older binary refuses the file", numbered(upTo(2)...), ErrSchemaTooNew, nil, uint64(top)},
		{"the real table refuses it too", migrations, ErrSchemaTooNew, nil, uint64(top)},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			ran = nil
			s, err := open(path, Options{NoSync: true}, st.migs)
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, st.want) || (err == nil) != (st.want == nil) {
				t.Fatalf("open = %v, want %v", err, st.want)
			}
			if !slices.Equal(ran, st.ran) {
				t.Errorf("ran %v, want %v", ran, st.ran)
			}
			if v := storedSchema(t, path); v != st.version {
				t.Errorf("schema version %d, want %d", v, st.version)
			}
		})
	}

	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket([]byte("test")).Get([]byte("fails")); v != nil {
			t.Errorf("the failed migration's write was kept: %q", v)
		}
		return nil
	})
}

func TestMigrationTableMustBeOrdered(t *testing.T) {
	if err := checkMigrations(migrations); err != nil {
		t.Fatalf("the real migration table: %v", err)
	}
	if last := migrations[len(migrations)-1].version; last != SchemaVersion {
		t.Fatalf("SchemaVersion = %d, last migration %d", SchemaVersion, last)
	}
	noop := func(*bolt.Tx) error { return nil }
	bad := [][]migration{
		{{version: 2, name: "starts at 2", fn: noop}},
		{{version: 1, name: "one", fn: noop}, {version: 3, name: "gap", fn: noop}},
		{{version: 1, name: "one", fn: noop}, {version: 1, name: "again", fn: noop}},
		{{version: 1, name: "no function"}},
	}
	for _, migs := range bad {
		path := filepath.Join(t.TempDir(), "slogfeed.db")
		if s, err := open(path, Options{NoSync: true}, migs); err == nil {
			s.Close()
			t.Errorf("table %+v accepted", migs)
		}
	}
}

// writeSchema1Fixture writes the content TestSchema1Fixture expects.
func writeSchema1Fixture(t *testing.T, path string) {
	clk := newClock()
	s, err := Open(path, Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f := createRemote(t, s, "https://example.org/sensors.xml", Retention{MaxItems: 100})
	if _, err := s.UpdateFeed(f.ID, func(f *Feed) error {
		f.ETag, f.Polls, f.Hits, f.Category = `"v1"`, 3, 2, []string{"Lab"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sensor := Feed{Kind: KindSensor, Slug: "lab-1", Title: "Lab sensor"}
	if err := s.CreateFeed(&sensor); err != nil {
		t.Fatal(err)
	}
	lat, lon := 50.81, 4.38
	if _, err := s.AddItems(f.ID, []Item{
		{ID: "r1", Title: "21.3 C", Published: t0.Add(-10 * time.Minute), Reading: &Reading{Value: 21.3, Unit: "C", Sensor: "lab-1", Time: t0.Add(-10 * time.Minute), Lat: &lat, Lon: &lon}},
		{ID: "r2", Title: "21.5 C", Published: t0.Add(-5 * time.Minute), Reading: &Reading{Value: 21.5, Unit: "C"}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddObservation(f.ID, Observation{At: t0, Hit: true, Published: []time.Time{t0.Add(-5 * time.Minute)}, Status: 200}); err != nil {
		t.Fatal(err)
	}
}

// testdata/schema1.db was written by the schema-1 code (go test -run
// TestSchema1Fixture -update). Every later schema must still open it and
// find the same content.
func TestSchema1Fixture(t *testing.T) {
	if *update {
		if SchemaVersion != 1 {
			t.Fatal("schema1.db must stay a schema-1 file: write a new fixture for the new schema instead")
		}
		out := filepath.Join("testdata", "schema1.db")
		if err := os.Remove(out); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		writeSchema1Fixture(t, out)
	}
	s := openFixture(t, "schema1.db")

	f, err := s.FeedByURL("https://example.org/sensors.xml")
	if err != nil || f.ETag != `"v1"` || f.Polls != 3 || f.Retention.MaxItems != 100 || !slices.Equal(f.Category, []string{"Lab"}) || !f.Created.Equal(t0) {
		t.Errorf("remote feed = %+v, %v", f, err)
	}
	if sensor, err := s.FeedBySlug(KindSensor, "lab-1"); err != nil || sensor.Title != "Lab sensor" {
		t.Errorf("sensor feed = %+v, %v", sensor, err)
	}
	items, err := s.Items(f.ID, ItemQuery{Order: ByArrivalAsc})
	if err != nil || len(items) != 2 {
		t.Fatalf("Items = %d, %v", len(items), err)
	}
	r := items[0].Reading
	if items[0].ID != "r1" || items[0].Seq != 1 || r == nil || r.Value != 21.3 || r.Sensor != "lab-1" || r.Lat == nil || *r.Lat != 50.81 {
		t.Errorf("item r1 = %+v (reading %+v)", items[0], r)
	}
	if obs, err := s.Observations(f.ID, 0); err != nil || len(obs) != 1 || !obs[0].Hit || obs[0].Status != 200 {
		t.Errorf("Observations = %+v, %v", obs, err)
	}
	if seq, _ := s.LastSeq(); seq != 2 {
		t.Errorf("LastSeq = %d", seq)
	}
	// The file takes new data after the upgrade.
	if added, err := s.AddItems(f.ID, []Item{{ID: "r3", Published: t0}}); err != nil || len(added) != 1 || added[0].Seq != 3 {
		t.Errorf("AddItems = %+v, %v", added, err)
	}
}
