package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// storedObservations counts the observations of the file at path stored
// as JSON and in the binary form, in the obs bucket and in tails.
func storedObservations(t testing.TB, path string) (jsonN, binaryN, tails int) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func(v []byte) {
		switch {
		case len(v) > 0 && v[0] == obsTag:
			binaryN++
		case len(v) > 0 && v[0] == '{':
			jsonN++
		default:
			t.Errorf("observation %q is neither JSON nor binary", v)
		}
	}
	if err := db.View(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketObs).ForEach(func(_, v []byte) error { count(v); return nil }); err != nil {
			return err
		}
		return tx.Bucket(bucketFeeds).ForEach(func(k, v []byte) error {
			if len(k) != 9 || k[8] != tailSuffix {
				return nil
			}
			tails++
			entries, err := tailEntries(v)
			for _, e := range entries {
				count(e)
			}
			return err
		})
	}); err != nil {
		t.Fatal(err)
	}
	return jsonN, binaryN, tails
}

// schema6Fixture is a copy of testdata/schema5.db brought to schema 6 by
// the migrations up to 6: the shared buckets with JSON observations, as
// the schema-6 code left them.
func schema6Fixture(t *testing.T) string {
	t.Helper()
	path := copyFixture(t, "schema5.db")
	s, err := open(path, Options{NoSync: true}, migrations[:6])
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if v := storedSchema(t, path); v != 6 {
		t.Fatalf("schema %d, want 6", v)
	}
	if j, b, tails := storedObservations(t, path); j < 30 || b != 0 || tails == 0 {
		t.Fatalf("the schema-6 file holds %d JSON and %d binary observations, %d tails", j, b, tails)
	}
	return path
}

// TestSchema6Observations: opening a file of schema 6 rewrites every
// observation (those of the obs bucket and of tails) in the binary form,
// every read returns what the schema-5 code read from the fixture, and
// Check passes.
func TestSchema6Observations(t *testing.T) {
	want := readSchema5Dump(t)
	path := schema6Fixture(t)
	j0, _, _ := storedObservations(t, path)
	s, err := Open(path, Options{NoSync: true, Now: newClock().Now, MaxObservations: 12})
	if err != nil {
		t.Fatal(err)
	}
	compareDump(t, dumpStore(t, s), want)
	if err := s.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta.Get(keyMigrating) != nil || meta.Get(keyMigrateFrom) != nil {
			t.Error("a migration mark is left")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	closeAndCheck(t, s)
	if v := storedSchema(t, path); v != SchemaVersion {
		t.Errorf("schema %d, want %d", v, SchemaVersion)
	}
	if j, b, _ := storedObservations(t, path); j != 0 || b != j0 {
		t.Errorf("after the upgrade: %d JSON and %d binary observations, want 0 and %d", j, b, j0)
	}
}

// TestSchema7Resumes: the conversion runs in batches; one interrupted
// after some of them leaves a file that an older slogfeed refuses and
// that reads right meanwhile, and the next Open finishes it.
func TestSchema7Resumes(t *testing.T) {
	want := readSchema5Dump(t)
	path := schema6Fixture(t)
	j0, _, _ := storedObservations(t, path)
	defer func(n int) { migrateBatchEntries = n }(migrateBatchEntries)
	migrateBatchEntries = 10 // several batches for the fixture

	openCutAfter(t, path, 6, 2)
	if v := storedSchema(t, path); v != 7 {
		t.Errorf("schema version during the conversion %d, want 7", v)
	}
	if j, b, _ := storedObservations(t, path); j == 0 || b == 0 || j+b != j0 {
		t.Errorf("after two batches: %d JSON and %d binary of %d observations", j, b, j0)
	}
	if s, err := open(path, Options{NoSync: true}, migrations[:6]); !errors.Is(err, ErrSchemaTooNew) {
		if err == nil {
			s.Close()
		}
		t.Errorf("a schema-6 slogfeed opens the half-converted file: %v", err)
	}
	s, err := Open(path, Options{NoSync: true, Now: newClock().Now, MaxObservations: 12})
	if err != nil {
		t.Fatal(err)
	}
	compareDump(t, dumpStore(t, s), want)
	closeAndCheck(t, s)
	if j, b, _ := storedObservations(t, path); j != 0 || b != j0 {
		t.Errorf("after the upgrade: %d JSON and %d binary observations, want 0 and %d", j, b, j0)
	}
}

// TestBinaryTailMixed: a tail holding JSON and binary entries (a poll
// after a batch that converted nothing of its feed) converts its JSON
// entries alone and keeps the order; one that does not split is left.
func TestBinaryTailMixed(t *testing.T) {
	at := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	bin, err := marshalObservation(&Observation{At: at.Add(time.Minute), Status: 304})
	if err != nil {
		t.Fatal(err)
	}
	js := []byte(`{"at":"2026-12-05T00:00:00Z","hit":true,"published":["2026-12-04T23:59:00Z"],"latency_s":[60],"status":200}`)
	var tail []byte
	for _, e := range [][]byte{js, bin, js} {
		tail = append(append(tail, byte(len(e))), e...)
	}
	out, n, ok := binaryTail(tail)
	if !ok || n != 2 {
		t.Fatalf("binaryTail converted %d, %v", n, ok)
	}
	entries, err := tailEntries(out)
	if err != nil || len(entries) != 3 {
		t.Fatalf("%d entries, %v", len(entries), err)
	}
	for i, e := range entries {
		if e[0] != obsTag {
			t.Errorf("entry %d is not binary", i)
		}
		o, err := decodeObservation(e)
		if err != nil {
			t.Fatal(err)
		}
		if want := []time.Time{at, at.Add(time.Minute), at}[i]; !o.At.Equal(want) {
			t.Errorf("entry %d at %v, want %v", i, o.At, want)
		}
		if i != 1 && (!o.Hit || len(o.LatencyS) != 1 || o.LatencyS[0] != 60 || o.Status != 200) {
			t.Errorf("entry %d = %+v", i, o)
		}
	}
	if _, _, ok := binaryTail([]byte{0x7f, 1}); ok {
		t.Error("a tail that does not split was converted")
	}
}

var migrateFeeds = flag.Int("migrate.feeds", 200, "BenchmarkMigrateObservations: feeds in the store")

// BenchmarkMigrateObservations converts a schema-6 file of -migrate.feeds
// feeds, each at DefaultMaxObservations observations (plus the slack and
// a tail) of a poll that found one item, from JSON to the binary form,
// and reports the time per observation and the file's pages in use per
// feed before and after, and when the same observations were written in
// the binary form. b.N is ignored.
func BenchmarkMigrateObservations(b *testing.B) {
	path := filepath.Join(b.TempDir(), "slogfeed.db")
	s, err := Open(path, Options{NoSync: true, Now: newClock().Now})
	if err != nil {
		b.Fatal(err)
	}
	n := DefaultMaxObservations + obsSlack(DefaultMaxObservations) + tailMax/2
	for i := range *migrateFeeds {
		f := createRemote(b, s, fmt.Sprintf("https://sensors.example.org/station/%d/feed.xml", i), Retention{})
		for r := range n {
			at := t0.Add(time.Duration(r)*time.Hour + 123456789)
			pub := at.Add(-3 * time.Minute).Truncate(time.Second)
			o := Observation{At: at, Hit: true, Published: []time.Time{pub}, LatencyS: []float64{at.Sub(pub).Seconds()}, Status: 200}
			if err := s.AddObservation(f.ID, o); err != nil {
				b.Fatal(err)
			}
		}
	}
	fresh, err := s.InUse()
	if err != nil {
		b.Fatal(err)
	}
	// Back to schema 6: every observation as JSON.
	obsN := 0
	err = s.db.Update(func(tx *bolt.Tx) error {
		toJSON := func(v []byte) []byte {
			o, err := decodeObservation(v)
			if err != nil {
				b.Fatal(err)
			}
			raw, err := json.Marshal(o)
			if err != nil {
				b.Fatal(err)
			}
			obsN++
			return raw
		}
		type put struct {
			b    *bolt.Bucket
			k, v []byte
		}
		var puts []put
		obs, feeds := tx.Bucket(bucketObs), tx.Bucket(bucketFeeds)
		if err := obs.ForEach(func(k, v []byte) error {
			puts = append(puts, put{obs, bytes.Clone(k), toJSON(v)})
			return nil
		}); err != nil {
			return err
		}
		if err := feeds.ForEach(func(k, v []byte) error {
			if len(k) != 9 || k[8] != tailSuffix {
				return nil
			}
			entries, err := tailEntries(v)
			var tail []byte
			for _, e := range entries {
				j := toJSON(e)
				tail = append(binary.AppendUvarint(tail, uint64(len(j))), j...)
			}
			puts = append(puts, put{feeds, bytes.Clone(k), tail})
			return err
		}); err != nil {
			return err
		}
		for _, p := range puts {
			if err := p.b.Put(p.k, p.v); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(keySchema, u64(6))
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
	closeAndCheck(b, s)
	if j, bin, _ := storedObservations(b, path); j != 0 || bin != obsN {
		b.Fatalf("%d JSON and %d binary observations after the conversion, want 0 and %d", j, bin, obsN)
	}
	f := float64(*migrateFeeds)
	b.ReportMetric(float64(took.Nanoseconds())/float64(obsN), "ns/obs")
	b.ReportMetric(float64(before)/f, "in-use-B/feed-before")
	b.ReportMetric(float64(after)/f, "in-use-B/feed-after")
	b.ReportMetric(float64(fresh)/f, "in-use-B/feed-written-binary")
}
