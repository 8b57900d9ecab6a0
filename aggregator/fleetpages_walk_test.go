package aggregator_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// fileBuckets, BenchmarkFleet's split of the data file, counts every page
// below the high-water mark once, under the bucket that holds it, and the
// resident ones only while the file is mapped.
func TestFileBuckets(t *testing.T) {
	tests := []struct {
		name  string
		fill  map[string]int // bucket → keys of 100-byte values; "a/b" is nested
		big   string         // a bucket with one value of several pages
		wants []string
	}{
		{"empty buckets", map[string]int{"a": 0, "b": 0}, "", []string{"(root)"}},
		{"two buckets", map[string]int{"feeds": 2000, "items": 500}, "", []string{"feeds", "items"}},
		{"nested and overflow", map[string]int{"plugins/x": 300, "obs": 10}, "blob", []string{"plugins/*", "obs", "blob"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.db")
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bolt.Tx) error {
				for name, n := range tt.fill {
					parent, child, nested := strings.Cut(name, "/")
					b, err := tx.CreateBucketIfNotExists([]byte(parent))
					if err != nil {
						return err
					}
					if nested {
						if b, err = b.CreateBucketIfNotExists([]byte(child)); err != nil {
							return err
						}
					}
					for i := range n {
						if err := b.Put(fmt.Appendf(nil, "k%06d", i), make([]byte, 100)); err != nil {
							return err
						}
					}
				}
				if tt.big != "" {
					b, err := tx.CreateBucketIfNotExists([]byte(tt.big))
					if err != nil {
						return err
					}
					return b.Put([]byte("v"), make([]byte, 5*os.Getpagesize()))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			var hwm int64
			if err := db.View(func(tx *bolt.Tx) error { hwm = tx.Size() / int64(os.Getpagesize()); return nil }); err != nil {
				t.Fatal(err)
			}
			// Mapped: this process's bbolt read every page it wrote.
			parts, err := fileBuckets(path)
			if err != nil {
				t.Fatal(err)
			}
			checkBuckets(t, parts, hwm, tt.wants, tt.big, true)
			db.Close()
			parts, err = fileBuckets(path)
			if err != nil {
				t.Fatal(err)
			}
			checkBuckets(t, parts, hwm, tt.wants, tt.big, false)
		})
	}
}

func checkBuckets(t *testing.T, parts []bucketPages, hwm int64, wants []string, big string, mapped bool) {
	t.Helper()
	var all, res int64
	got := map[string]bucketPages{}
	for _, p := range parts {
		all += p.pages
		res += p.resident
		got[p.name] = p
		if p.pages > 0 && p.used > p.pages*int64(os.Getpagesize()) {
			t.Errorf("%s: %d bytes used in %d pages", p.name, p.used, p.pages)
		}
	}
	if all != hwm {
		t.Errorf("%d pages counted, the file has %d", all, hwm)
	}
	for _, w := range wants {
		if got[w].pages == 0 {
			t.Errorf("bucket %s not counted: %+v", w, parts)
		}
	}
	if big != "" && got[big].pages < 6 {
		t.Errorf("bucket %s: %d pages, its value alone takes 6", big, got[big].pages)
	}
	if !mapped && res != 0 {
		t.Errorf("%d pages resident in a file this process does not map", res)
	}
}

// fileReferenced finds nothing of a file that is not mapped, and
// clearRefs works where the benchmark runs.
func TestFileReferencedUnmapped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.db")
	if err := os.WriteFile(path, make([]byte, 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := clearRefs(); err != nil {
		t.Skipf("no /proc/self/clear_refs here: %v", err)
	}
	rss, ref, err := fileReferenced(path)
	if err != nil || rss != 0 || ref != 0 {
		t.Fatalf("fileReferenced(unmapped) = %d, %d, %v; want 0, 0, nil", rss, ref, err)
	}
}
