package storage

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestInUse: the bytes in use follow what is stored, down as well as up,
// while the file's size keeps its high-water mark.
func TestInUse(t *testing.T) {
	s := openTest(t)
	sizes := func() (size, used int64) {
		t.Helper()
		size, err := s.Size()
		if err != nil {
			t.Fatal(err)
		}
		if used, err = s.InUse(); err != nil {
			t.Fatal(err)
		}
		if used <= 0 || used > size {
			t.Fatalf("in use %d of a %d-byte file", used, size)
		}
		return size, used
	}
	_, used0 := sizes()
	f := Feed{Kind: KindRemote, URL: "https://example.org/feed", Policy: "auto"}
	if err := s.CreateFeed(&f); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	var items []Item
	for i := range 500 {
		items = append(items, Item{ID: fmt.Sprint(i), Title: "reading", Content: strings.Repeat("x", 1000), Published: at.Add(time.Duration(i) * time.Second)})
	}
	if _, err := s.AddItems(f.ID, items); err != nil {
		t.Fatal(err)
	}
	size1, used1 := sizes()
	if used1-used0 < 500*1000 {
		t.Fatalf("500 items of 1 KB: in use went from %d to %d bytes", used0, used1)
	}
	if err := s.DeleteFeed(f.ID); err != nil {
		t.Fatal(err)
	}
	size2, used2 := sizes()
	if size2 < size1 {
		t.Fatalf("the file shrank from %d to %d bytes", size1, size2)
	}
	if used2 >= used1-400*1000 {
		t.Fatalf("after deleting the feed, in use went from %d to %d bytes", used1, used2)
	}
}
