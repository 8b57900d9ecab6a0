package storage

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// storedItems counts the item records of the file at path stored as JSON
// and in the binary form, in the items bucket and in the schema-7 items
// bucket a conversion under way keeps aside (legacy).
func storedItems(t testing.TB, path string) (jsonN, binaryN, legacy int) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func(b *bolt.Bucket, n *int) error {
		return b.ForEach(func(_, v []byte) error {
			switch {
			case len(v) > 0 && v[0] == itemTag:
				binaryN++
			case len(v) > 0 && v[0] == '{':
				jsonN++
			default:
				t.Errorf("item %q is neither JSON nor binary", v)
			}
			*n++
			return nil
		})
	}
	if err := db.View(func(tx *bolt.Tx) error {
		var n int
		if err := count(tx.Bucket(bucketItems), &n); err != nil {
			return err
		}
		if h := tx.Bucket(legacyItemsJSON); h != nil {
			return count(h.Bucket(bucketItems), &legacy)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return jsonN, binaryN, legacy
}

// schema7Fixture is a copy of testdata/schema5.db brought to schema 7 by
// the migrations up to 7: the shared buckets with JSON items, as the
// schema-7 code left them.
func schema7Fixture(t *testing.T) (path string, items int) {
	t.Helper()
	path = copyFixture(t, "schema5.db")
	s, err := open(path, Options{NoSync: true}, migrations[:7])
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if v := storedSchema(t, path); v != 7 {
		t.Fatalf("schema %d, want 7", v)
	}
	j, b, _ := storedItems(t, path)
	if j < 50 || b != 0 {
		t.Fatalf("the schema-7 file holds %d JSON and %d binary items", j, b)
	}
	return path, j
}

// TestSchema7Items: opening a file of schema 7 rewrites every item
// record in the binary form, every read returns what the schema-5 code
// read from the fixture, Check passes, and a schema-7 slogfeed then
// refuses the file, saying why.
func TestSchema7Items(t *testing.T) {
	want := readSchema5Dump(t)
	path, n := schema7Fixture(t)
	s, err := Open(path, Options{NoSync: true, Now: newClock().Now, MaxObservations: 12})
	if err != nil {
		t.Fatal(err)
	}
	compareDump(t, dumpStore(t, s), want)
	if err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta).Get(keyMigrating) != nil || tx.Bucket(legacyItemsJSON) != nil {
			t.Error("a migration mark or the old items bucket is left")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	closeAndCheck(t, s)
	if v := storedSchema(t, path); v != SchemaVersion {
		t.Errorf("schema %d, want %d", v, SchemaVersion)
	}
	if j, b, _ := storedItems(t, path); j != 0 || b != n {
		t.Errorf("after the upgrade: %d JSON and %d binary items, want 0 and %d", j, b, n)
	}
	s, err = open(path, Options{NoSync: true}, migrations[:7])
	if err == nil {
		s.Close()
	}
	if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), fmt.Sprintf("schema version %d, this slogfeed knows up to 7", SchemaVersion)) {
		t.Errorf("a schema-7 slogfeed opens the file: %v", err)
	}
}

// TestSchema8Resumes: the conversion runs in batches; one interrupted
// after some of them leaves a file that an older slogfeed refuses, and
// the next Open finishes it with the same result.
func TestSchema8Resumes(t *testing.T) {
	want := readSchema5Dump(t)
	path, n := schema7Fixture(t)
	defer func(n int) { migrateBatchEntries = n }(migrateBatchEntries)
	migrateBatchEntries = 10 // several batches for the fixture

	openCutAfter(t, path, 7, 2)
	if v := storedSchema(t, path); v != 8 {
		t.Errorf("schema version during the conversion %d, want 8", v)
	}
	if j, b, legacy := storedItems(t, path); j != n-20 || b != 20 || legacy != j {
		t.Errorf("after two batches: %d JSON (%d in the old bucket) and %d binary of %d items", j, legacy, b, n)
	}
	if s, err := open(path, Options{NoSync: true}, migrations[:7]); !errors.Is(err, ErrSchemaTooNew) {
		if err == nil {
			s.Close()
		}
		t.Errorf("a schema-7 slogfeed opens the half-converted file: %v", err)
	}
	s, err := Open(path, Options{NoSync: true, Now: newClock().Now, MaxObservations: 12})
	if err != nil {
		t.Fatal(err)
	}
	compareDump(t, dumpStore(t, s), want)
	closeAndCheck(t, s)
	if j, b, legacy := storedItems(t, path); j != 0 || b != n || legacy != 0 {
		t.Errorf("after the upgrade: %d JSON, %d binary, %d in the old bucket; want 0, %d, 0", j, b, legacy, n)
	}
}

// TestItemsMixedForms: a store whose item records are partly JSON (as a
// conversion would leave them were it skipped) reads, updates, retains
// and checks both forms; an update rewrites a JSON record in the binary
// form.
func TestItemsMixedForms(t *testing.T) {
	clk := newClock()
	s := openTest(t, Options{Now: clk.Now})
	f := createRemote(t, s, "https://example.org/mixed", Retention{MaxItems: 6})
	var in []Item
	for i := range 6 {
		it := sensorItem()
		it.ID, it.GUID = fmt.Sprint("m-", i), ""
		it.Published = t0.Add(time.Duration(i) * time.Minute)
		it.Reading.Time = it.Published
		in = append(in, it)
	}
	added, err := s.AddItems(f.ID, in)
	if err != nil || len(added) != 6 {
		t.Fatalf("AddItems = %d, %v", len(added), err)
	}
	// Items 0, 2 and 4 back to JSON.
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for _, it := range added {
			if it.Seq%2 == 0 {
				continue
			}
			raw, err := marshalItem(&it, it.Seq)
			if err != nil {
				return err
			}
			if err := tx.Bucket(bucketItems).Put(u64(it.Seq), raw); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Items(f.ID, ItemQuery{Order: ByArrivalAsc})
	if err != nil || len(got) != 6 {
		t.Fatalf("Items = %d, %v", len(got), err)
	}
	for i := range got {
		if want := itemViaJSON(t, added[i], added[i].Seq); !itemsEqual(got[i], want) {
			t.Errorf("item %d = %+v, want %+v", i, got[i], want)
		}
	}
	// An update of a JSON record rewrites it in the binary form.
	upd := added[0]
	upd.Title = "updated"
	if _, err := s.AddItems(f.ID, []Item{upd}); err != nil {
		t.Fatal(err)
	}
	var rec []byte
	_ = s.db.View(func(tx *bolt.Tx) error {
		rec = bytes.Clone(tx.Bucket(bucketItems).Get(u64(added[0].Seq)))
		return nil
	})
	if len(rec) == 0 || rec[0] != itemTag {
		t.Errorf("updated record %q is not binary", rec)
	}
	if it, err := s.Item(f.ID, upd.ID); err != nil || it.Title != "updated" || it.Seq != added[0].Seq {
		t.Errorf("Item = %+v, %v", it, err)
	}
	// Retention drops the oldest items, JSON and binary, by their IDs.
	var newer []Item
	for i := range 3 {
		it := sensorItem()
		it.ID, it.GUID = fmt.Sprint("n-", i), ""
		it.Published = t0.Add(time.Hour + time.Duration(i)*time.Minute)
		newer = append(newer, it)
	}
	if added, err := s.AddItems(f.ID, newer); err != nil || len(added) != 3 {
		t.Fatalf("AddItems = %d, %v", len(added), err)
	}
	for _, id := range []string{"m-0", "m-1", "m-2"} {
		if _, err := s.Item(f.ID, id); !errors.Is(err, ErrItemNotFound) {
			t.Errorf("item %s after retention: %v", id, err)
		}
	}
	if n, err := s.CountItems(f.ID); err != nil || n != 6 {
		t.Errorf("CountItems = %d, %v", n, err)
	}
	if err := s.Check(); err != nil {
		t.Error(err)
	}
}

// itemsEqual compares items as their JSON does (times by instant).
func itemsEqual(a, b Item) bool {
	ra, _ := marshalItem(&a, a.Seq)
	rb, _ := marshalItem(&b, b.Seq)
	return bytes.Equal(ra, rb)
}

var migrateItemFeeds = flag.Int("migrate.itemfeeds", 200, "BenchmarkMigrateItems: feeds in the store")

// BenchmarkMigrateItems converts a schema-7 file of -migrate.itemfeeds
// feeds, each at DefaultRetention (200 sensor items of about 440 bytes as
// JSON), from JSON items to the binary form, and reports the time per
// item and the file's pages in use per feed before and after, and when
// the same items were written in the binary form. b.N is ignored.
func BenchmarkMigrateItems(b *testing.B) {
	path := filepath.Join(b.TempDir(), "slogfeed.db")
	s, err := Open(path, Options{NoSync: true, Now: newClock().Now, DefaultRetention: DefaultRetention})
	if err != nil {
		b.Fatal(err)
	}
	for i := range *migrateItemFeeds {
		f := createRemote(b, s, fmt.Sprintf("https://sensors.example.org/station/%d/feed.xml", i), Retention{})
		for r := range DefaultRetention.MaxItems {
			at := t0.Add(time.Duration(r)*time.Hour + 123456789)
			it := Item{ID: fmt.Sprintf("%d-%d", f.ID, r), GUID: fmt.Sprintf("%d-%d", f.ID, r),
				Link:      fmt.Sprintf("https://sensors.example.org/station/%d/readings/%d", f.ID, r),
				Title:     fmt.Sprintf("Station %d: water level %d.%d cm", f.ID, 100+r%50, r%10),
				Summary:   fmt.Sprintf("<p>Water level at station %d, gauge 1, averaged over the hour: %d.%d cm.</p>", f.ID, 100+r%50, r%10),
				Published: at.Add(-3 * time.Minute).Truncate(time.Second), Fetched: at,
				Reading: &Reading{Value: 100 + float64(r%50), Unit: "cm", Sensor: "gauge-1", Time: at.Add(-3 * time.Minute).Truncate(time.Second)}}
			if _, err := s.AddItems(f.ID, []Item{it}); err != nil {
				b.Fatal(err)
			}
		}
	}
	fresh, err := s.InUse()
	if err != nil {
		b.Fatal(err)
	}
	// Back to schema 7: every item as JSON, appended in order of Seq as
	// the schema-7 code wrote them.
	itemN := 0
	err = s.db.Update(func(tx *bolt.Tx) error {
		var keys, vals [][]byte
		if err := tx.Bucket(bucketItems).ForEach(func(k, v []byte) error {
			seq, _ := getU64(k)
			it, err := decodeItem(seq, v)
			if err != nil {
				return err
			}
			raw, err := marshalItem(&it, seq)
			if err != nil {
				return err
			}
			keys, vals = append(keys, bytes.Clone(k)), append(vals, raw)
			return nil
		}); err != nil {
			return err
		}
		if err := tx.DeleteBucket(bucketItems); err != nil {
			return err
		}
		items, err := tx.CreateBucket(bucketItems)
		if err != nil {
			return err
		}
		items.FillPercent = itemsFill
		for i := range keys {
			if err := items.Put(keys[i], vals[i]); err != nil {
				return err
			}
		}
		itemN = len(keys)
		return tx.Bucket(bucketMeta).Put(keySchema, u64(7))
	})
	if err != nil {
		b.Fatal(err)
	}
	before, err := s.InUse()
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if j, bin, _ := storedItems(b, path); j != itemN || bin != 0 {
		b.Fatalf("%d JSON and %d binary items before the conversion, want %d and 0", j, bin, itemN)
	}
	b.ResetTimer()
	start := time.Now()
	s, err = Open(path, Options{NoSync: true, Now: newClock().Now})
	if err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	b.StopTimer()
	after, err := s.InUse()
	if err != nil {
		b.Fatal(err)
	}
	logBuckets(b, s, *migrateItemFeeds)
	closeAndCheck(b, s)
	if j, bin, _ := storedItems(b, path); j != 0 || bin != itemN {
		b.Fatalf("%d JSON and %d binary items after the conversion, want 0 and %d", j, bin, itemN)
	}
	f := float64(*migrateItemFeeds)
	b.ReportMetric(float64(took.Nanoseconds())/float64(itemN), "ns/item")
	b.ReportMetric(float64(before)/f, "in-use-B/feed-before")
	b.ReportMetric(float64(after)/f, "in-use-B/feed-after")
	b.ReportMetric(float64(fresh)/f, "in-use-B/feed-written-binary")
}
