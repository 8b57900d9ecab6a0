package storage

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// schema5Dump is what the schema-5 code read from testdata/schema5.db
// just before closing it (testdata/schema5.json, see testdata/README.md).
type schema5Dump struct {
	Feeds        []Feed                   `json:"feeds"`
	Items        map[uint64][]Item        `json:"items"`
	Published    map[uint64][]Item        `json:"published"`
	Observations map[uint64][]Observation `json:"observations"`
	Pipes        []Pipe                   `json:"pipes"`
	LastSeq      uint64                   `json:"last_seq"`
}

// dumpStore reads s as the schema-5 code dumped its fixture.
func dumpStore(t *testing.T, s *Store) schema5Dump {
	t.Helper()
	d := schema5Dump{Items: map[uint64][]Item{}, Published: map[uint64][]Item{}, Observations: map[uint64][]Observation{}}
	var err error
	if d.Feeds, err = s.Feeds(); err != nil {
		t.Fatal(err)
	}
	for _, f := range d.Feeds {
		if d.Items[f.ID], err = s.Items(f.ID, ItemQuery{Order: ByArrivalAsc}); err != nil {
			t.Fatal(err)
		}
		if d.Published[f.ID], err = s.Items(f.ID, ItemQuery{Order: ByPublished}); err != nil {
			t.Fatal(err)
		}
		if d.Observations[f.ID], err = s.Observations(f.ID, 0); err != nil {
			t.Fatal(err)
		}
	}
	if d.Pipes, err = s.Pipes(); err != nil {
		t.Fatal(err)
	}
	if d.LastSeq, err = s.LastSeq(); err != nil {
		t.Fatal(err)
	}
	// Through JSON, as the fixture's dump went: times lose their
	// monotonic reading and empty slices compare as the dump has them.
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var out schema5Dump
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func readSchema5Dump(t *testing.T) schema5Dump {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "schema5.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d schema5Dump
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	// Once more without indentation, as dumpStore goes: the pipe's raw
	// definition compacted.
	if raw, err = json.Marshal(d); err != nil {
		t.Fatal(err)
	}
	d = schema5Dump{}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// compareDump reports every difference between a migrated store's dump
// and the fixture's.
func compareDump(t *testing.T, got, want schema5Dump) {
	t.Helper()
	if len(want.Feeds) < 6 || len(want.Pipes) != 1 || want.LastSeq == 0 {
		t.Fatalf("the fixture's dump holds %d feeds, %d pipes, last seq %d", len(want.Feeds), len(want.Pipes), want.LastSeq)
	}
	if !reflect.DeepEqual(got.Feeds, want.Feeds) {
		t.Errorf("feeds differ:\n got %+v\nwant %+v", got.Feeds, want.Feeds)
	}
	if !reflect.DeepEqual(got.Pipes, want.Pipes) || got.LastSeq != want.LastSeq {
		t.Errorf("pipes %+v, last seq %d; want %+v, %d", got.Pipes, got.LastSeq, want.Pipes, want.LastSeq)
	}
	var items, obs int
	for _, f := range want.Feeds {
		items += len(want.Items[f.ID])
		obs += len(want.Observations[f.ID])
		for name, pair := range map[string][2]any{
			"items by arrival":   {got.Items[f.ID], want.Items[f.ID]},
			"items by published": {got.Published[f.ID], want.Published[f.ID]},
			"observations":       {got.Observations[f.ID], want.Observations[f.ID]},
		} {
			if !reflect.DeepEqual(pair[0], pair[1]) {
				t.Errorf("feed %d: %s differ:\n got %+v\nwant %+v", f.ID, name, pair[0], pair[1])
			}
		}
	}
	if items < 50 || obs < 30 {
		t.Fatalf("the fixture holds %d items and %d observations: too few to test the move", items, obs)
	}
}

// TestSchema5Fixture: a file of the per-feed layout (schema 5) is moved to
// the shared buckets when opened, every read returns what the schema-5
// code read from it, Check passes (openFixture), and the file takes new
// data.
func TestSchema5Fixture(t *testing.T) {
	want := readSchema5Dump(t)
	path := copyFixture(t, "schema5.db")
	if v := storedSchema(t, path); v != 5 {
		t.Fatalf("the fixture is of schema %d", v)
	}
	s, err := Open(path, Options{NoSync: true, Now: newClock().Now, MaxObservations: 12})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAndCheck(t, s)
	compareDump(t, dumpStore(t, s), want)
	if err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(legacyFeedData) != nil || tx.Bucket(bucketMeta).Get(keyMigrating) != nil {
			t.Error("the old feed data or the migration mark is left")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	f := want.Feeds[1]
	added, err := s.AddItems(f.ID, []Item{{ID: "after-upgrade", Published: t0.Add(48 * time.Hour)}})
	if err != nil || len(added) != 1 || added[0].Seq != want.LastSeq+1 {
		t.Fatalf("AddItems after the upgrade = %+v, %v", added, err)
	}
	if n, err := s.CountItems(f.ID); err != nil || n != f.Retention.MaxItems {
		t.Errorf("CountItems = %d, %v; want the feed's MaxItems %d", n, err, f.Retention.MaxItems)
	}
	if err := s.AddObservation(f.ID, Observation{At: t0.Add(48 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if obs, err := s.Observations(f.ID, 0); err != nil || len(obs) != 12 || !obs[11].At.Equal(t0.Add(48*time.Hour)) {
		t.Errorf("Observations after the upgrade = %d, %v", len(obs), err)
	}
	if err := s.DeleteFeed(f.ID); err != nil {
		t.Fatal(err)
	}
}

// openCutAfter opens path with migration step's batches failing after
// the first n went through, as a power cut would, and expects that open
// to fail with the cut.
func openCutAfter(t *testing.T, path string, step, n int) {
	t.Helper()
	boom := errors.New("power cut")
	cut := slicesClone(migrations)
	batch := cut[step].batch
	cut[step].batch = func(tx *bolt.Tx) (bool, error) {
		if n == 0 {
			return false, boom
		}
		n--
		return batch(tx)
	}
	if s, err := open(path, Options{NoSync: true}, cut); !errors.Is(err, boom) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("interrupted open = %v, want %v", err, boom)
	}
}

// TestSchema5MoveResumes: the move runs in batches; one interrupted after
// some of them leaves a file an older slogfeed refuses, and the next Open
// finishes it with the same result.
func TestSchema5MoveResumes(t *testing.T) {
	want := readSchema5Dump(t)
	defer func(n int) { migrateBatchEntries = n }(migrateBatchEntries)
	migrateBatchEntries = 10 // several batches for the fixture
	path := copyFixture(t, "schema5.db")

	openCutAfter(t, path, 5, 2)
	if v := storedSchema(t, path); v != 6 {
		t.Errorf("schema version during the move %d, want 6", v)
	}
	if s, err := open(path, Options{NoSync: true}, migrations[:5]); !errors.Is(err, ErrSchemaTooNew) {
		if err == nil {
			s.Close()
		}
		t.Errorf("a schema-5 slogfeed opens the half-moved file: %v", err)
	}
	s, err := Open(path, Options{NoSync: true, Now: newClock().Now, MaxObservations: 12})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAndCheck(t, s)
	compareDump(t, dumpStore(t, s), want)
}

func slicesClone(m []migration) []migration { return append([]migration(nil), m...) }
