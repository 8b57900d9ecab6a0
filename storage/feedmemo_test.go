package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestFeedMemo: a write after Store.Feed uses the feed it decoded only
// while the record is unchanged; changes a caller makes to the feed it
// got do not reach the write; the write takes the entry out; the memo
// stays bounded.
func TestFeedMemo(t *testing.T) {
	tests := []struct {
		name string
		// between runs after Store.Feed and before the update.
		between   func(t *testing.T, s *Store, f *Feed)
		wantTitle string
	}{
		{"record unchanged", func(*testing.T, *Store, *Feed) {}, "original"},
		{"caller changes its copy", func(_ *testing.T, _ *Store, f *Feed) {
			f.Title, f.Category[0] = "changed by the caller", "x"
		}, "original"},
		{"record rewritten meanwhile", func(t *testing.T, s *Store, f *Feed) {
			err := s.db.Update(func(tx *bolt.Tx) error {
				g := *f
				g.Title = "rewritten"
				return s.putFeed(tx, &g)
			})
			if err != nil {
				t.Fatal(err)
			}
		}, "rewritten"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t)
			f := Feed{Kind: KindRemote, URL: "https://example.org/feed", Policy: "auto", Title: "original", Category: []string{"a", "b"}}
			if err := s.CreateFeed(&f); err != nil {
				t.Fatal(err)
			}
			got, err := s.Feed(f.ID)
			if err != nil {
				t.Fatal(err)
			}
			tc.between(t, s, &got)
			var old Feed
			upd, err := s.UpdateFeed(f.ID, func(x *Feed) error {
				old = cloneFeed(x)
				x.Polls++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if old.Title != tc.wantTitle || !reflect.DeepEqual(old.Category, []string{"a", "b"}) {
				t.Fatalf("the update saw title %q, category %q; want %q, [a b]", old.Title, old.Category, tc.wantTitle)
			}
			if _, ok := s.feedMemo.m[f.ID]; ok {
				t.Fatal("the update left the feed in the memo")
			}
			// What the update returned is what a fresh read decodes.
			fresh, err := s.Feed(f.ID)
			if err != nil {
				t.Fatal(err)
			}
			if upd.Polls != 1 || fresh.Polls != 1 || fresh.Title != tc.wantTitle {
				t.Fatalf("after the update: returned %+v, stored %+v", upd, fresh)
			}
		})
	}
	t.Run("bounded", func(t *testing.T) {
		var m feedMemo
		f := Feed{ID: 1}
		for id := range uint64(maxFeedMemo + 10) {
			m.put(id, []byte("{}"), &f, 0)
			if len(m.m) > maxFeedMemo {
				t.Fatalf("%d entries, more than %d", len(m.m), maxFeedMemo)
			}
		}
		if _, ok := m.get(maxFeedMemo+9, []byte("{}"), false); !ok {
			t.Fatal("the newest entry is gone")
		}
	})
}

// TestCloneFeedSharesNothing: every slice, map and pointer reachable from
// a Feed is copied by cloneFeed, so a field added to Feed (or to a type it
// holds) that cloneFeed does not copy fails here instead of letting a
// caller's change reach the memo.
func TestCloneFeedSharesNothing(t *testing.T) {
	var f Feed
	fillExported(reflect.ValueOf(&f).Elem(), 0)
	c := cloneFeed(&f)
	if !reflect.DeepEqual(c, f) {
		t.Fatalf("clone differs from the original:\n%+v\n%+v", c, f)
	}
	checkNoAlias(t, "Feed", reflect.ValueOf(f), reflect.ValueOf(c))
}

// fillExported gives every settable exported field a non-zero value, with
// one element in each slice and map and a value behind each pointer.
func fillExported(v reflect.Value, depth int) {
	if depth > 8 || !v.CanSet() {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillExported(v.Field(i), depth+1)
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillExported(v.Elem(), depth+1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillExported(v.Index(0), depth+1)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillExported(k, depth+1)
		fillExported(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	}
}

// checkNoAlias fails when a and b (equal values) share the memory behind
// any slice, map or pointer.
func checkNoAlias(t *testing.T, path string, a, b reflect.Value) {
	t.Helper()
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			if a.Type().Field(i).IsExported() {
				checkNoAlias(t, path+"."+a.Type().Field(i).Name, a.Field(i), b.Field(i))
			}
		}
	case reflect.Pointer:
		if a.IsNil() {
			return
		}
		if a.Pointer() == b.Pointer() {
			t.Errorf("%s: the clone shares the pointer", path)
			return
		}
		checkNoAlias(t, path, a.Elem(), b.Elem())
	case reflect.Slice:
		if a.Len() == 0 {
			return
		}
		if a.Pointer() == b.Pointer() {
			t.Errorf("%s: the clone shares the slice", path)
			return
		}
		for i := range a.Len() {
			checkNoAlias(t, path+"[]", a.Index(i), b.Index(i))
		}
	case reflect.Map:
		if a.Len() > 0 && a.Pointer() == b.Pointer() {
			t.Errorf("%s: the clone shares the map", path)
		}
	}
}

// TestFeedMemoAfterPollWrite: a poll's write (RecordFetch, RecordPoll)
// leaves the feed it stored in the memo, with the bytes it wrote, so the
// next poll's Store.Feed does not decode the record; what that read
// returns is what decoding the stored record gives, and a caller's
// changes to it reach neither the memo nor the store.
func TestFeedMemoAfterPollWrite(t *testing.T) {
	tests := []struct {
		name  string
		write func(s *Store, id uint64) (Feed, error)
	}{
		{"RecordFetch", func(s *Store, id uint64) (Feed, error) {
			rec, err := s.RecordFetch(id, nil, Observation{At: time.Unix(1e9, 0).UTC(), Status: 304}, func(f *Feed, _ *Observation, _ []Item) error {
				f.Polls++
				return nil
			})
			return rec.Feed, err
		}},
		{"RecordPoll", func(s *Store, id uint64) (Feed, error) {
			return s.RecordPoll(id, Observation{At: time.Unix(1e9, 0).UTC(), Err: "boom"}, func(f *Feed) error {
				f.Polls++
				f.LastError = "boom"
				return nil
			})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t)
			f := Feed{Kind: KindRemote, URL: "https://example.org/feed", Policy: "auto", Category: []string{"a"}}
			if err := s.CreateFeed(&f); err != nil {
				t.Fatal(err)
			}
			wrote, err := tc.write(s, f.ID)
			if err != nil {
				t.Fatal(err)
			}
			var stored []byte
			if err := s.db.View(func(tx *bolt.Tx) error {
				_, v, err := feedRecord(tx, f.ID)
				stored = bytes.Clone(v)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			e, ok := s.feedMemo.m[f.ID]
			if !ok || !bytes.Equal(e.raw, stored) {
				t.Fatalf("after the write the memo holds %q (present %v), the store %q", e.raw, ok, stored)
			}
			wrote.Category[0] = "changed by the caller"
			got, err := s.Feed(f.ID)
			if err != nil {
				t.Fatal(err)
			}
			want, err := decodeFeed(u64(f.ID), stored)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) || got.Polls != 1 {
				t.Fatalf("read %+v after the write, want %+v", got, want)
			}
			got.Category[0] = "changed by the reader"
			if again, err := s.Feed(f.ID); err != nil || !reflect.DeepEqual(again, want) {
				t.Fatalf("read %+v (%v) after a reader's change, want %+v", again, err, want)
			}
		})
	}
}

// storedFeed decodes feed id's record as stored, bypassing the memo.
func storedFeed(t *testing.T, s *Store, id uint64) (Feed, error) {
	t.Helper()
	var f Feed
	err := s.db.View(func(tx *bolt.Tx) error {
		k, v, err := feedRecord(tx, id)
		if err != nil {
			return err
		}
		f, err = decodeFeed(k, v)
		return err
	})
	return f, err
}

// pollWrite is a poll's write of feed id: a 304 counted.
func pollWrite(t *testing.T, s *Store, id uint64, at time.Time) {
	t.Helper()
	_, err := s.RecordFetch(id, nil, Observation{At: at, Status: 304}, func(f *Feed, _ *Observation, _ []Item) error {
		f.Polls++
		f.LastFetch = at
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFeedMemoCurrent: after a poll's write, Store.Feed takes the feed
// from the memo without reading the record; after any other write, of
// this feed or not, it reads the record again, and what it returns is
// always what the record decodes to.
func TestFeedMemoCurrent(t *testing.T) {
	at := time.Unix(1e9, 0).UTC()
	tests := []struct {
		name  string
		write func(t *testing.T, s *Store, id uint64) error
	}{
		{"UpdateFeed", func(t *testing.T, s *Store, id uint64) error {
			_, err := s.UpdateFeed(id, func(f *Feed) error { f.Title = "renamed"; return nil })
			return err
		}},
		{"DeleteFeed", func(t *testing.T, s *Store, id uint64) error { return s.DeleteFeed(id) }},
		{"AddItems", func(t *testing.T, s *Store, id uint64) error {
			_, err := s.AddItems(id, []Item{{ID: "r1", Title: "reading", Published: at}})
			return err
		}},
		{"ApplyRetention", func(t *testing.T, s *Store, id uint64) error {
			_, err := s.ApplyRetention(id)
			return err
		}},
		{"another feed's update", func(t *testing.T, s *Store, id uint64) error {
			g := Feed{Kind: KindRemote, URL: "https://example.org/other", Policy: "auto"}
			if err := s.CreateFeed(&g); err != nil {
				return err
			}
			_, err := s.UpdateFeed(g.ID, func(f *Feed) error { f.Title = "other"; return nil })
			return err
		}},
		{"a plugin's data", func(t *testing.T, s *Store, id uint64) error { return s.PluginPut("p", "k", []byte("v")) }},
		{"a write of the record by a transaction of the store's own", func(t *testing.T, s *Store, id uint64) error {
			return s.dbUpdate(func(tx *bolt.Tx) error {
				f, err := storedFeed(t, s, id)
				if err != nil {
					return err
				}
				f.Title = "written directly"
				return s.putFeed(tx, &f)
			})
		}},
		{"a grouped write of the record (update)", func(t *testing.T, s *Store, id uint64) error {
			f, err := storedFeed(t, s, id)
			if err != nil {
				return err
			}
			f.Title = "written in a group"
			return s.update(func(tx *bolt.Tx) error { return s.putFeed(tx, &f) })
		}},
		{"another poll's write", func(t *testing.T, s *Store, id uint64) error {
			pollWrite(t, s, id, at.Add(time.Minute))
			return nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t)
			f := Feed{Kind: KindRemote, URL: "https://example.org/feed", Policy: "auto", Title: "original"}
			if err := s.CreateFeed(&f); err != nil {
				t.Fatal(err)
			}
			pollWrite(t, s, f.ID, at)
			if _, ok := s.feedMemo.current(f.ID, s.feedGen.Load()); !ok {
				t.Fatal("after a poll's write the memo's entry is not current")
			}
			if err := tc.write(t, s, f.ID); err != nil {
				t.Fatal(err)
			}
			want, wantErr := storedFeed(t, s, f.ID)
			got, err := s.Feed(f.ID)
			if !errors.Is(err, wantErr) && !(err != nil && wantErr != nil && errors.Is(err, ErrFeedNotFound) && errors.Is(wantErr, ErrFeedNotFound)) {
				t.Fatalf("Store.Feed: %v, the record: %v", err, wantErr)
			}
			if wantErr == nil && !reflect.DeepEqual(got, want) {
				t.Fatalf("Store.Feed returned %+v, the record is %+v", got, want)
			}
		})
	}
}

// TestStoreWritesEndMemoCurrency: every write transaction of the store
// outside the group committer goes through dbUpdate, which ends the
// currency of the memo's entries; a bare bbolt write added anywhere else
// could change a feed record behind the memo, and fails here.
func TestStoreWritesEndMemoCurrency(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			for _, call := range []string{".Update(", ".Batch(", ".Begin(true)"} {
				if !strings.Contains(line, "db"+call) {
					continue
				}
				// commit.go is the committer and dbUpdate; migrate.go
				// runs before the store (and its memo) exists.
				if file == "commit.go" || file == "migrate.go" {
					continue
				}
				t.Errorf("%s:%d: %s: a write transaction outside dbUpdate and the committer", file, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// TestFeedMemoRaces: poll writes, updates and reads of one feed at once;
// once the writers are done, Store.Feed returns what the record decodes
// to (run with -race).
func TestFeedMemoRaces(t *testing.T) {
	s := openTest(t)
	f := Feed{Kind: KindRemote, URL: "https://example.org/feed", Policy: "auto"}
	if err := s.CreateFeed(&f); err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1e9, 0).UTC()
	var writers, readers sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		writers.Go(func() {
			for i := range 50 {
				pollWrite(t, s, f.ID, at.Add(time.Duration(w*1000+i)*time.Second))
			}
		})
	}
	writers.Go(func() {
		for i := range 20 {
			if _, err := s.UpdateFeed(f.ID, func(x *Feed) error { x.Title = fmt.Sprint("title ", i); return nil }); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for range 4 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.Feed(f.ID); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	want, err := storedFeed(t, s, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Feed(f.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || got.Polls != 200 || got.Title != "title 19" {
		t.Fatalf("after the writers Store.Feed returned %+v, the record is %+v", got, want)
	}
}
