package publish

import (
	"testing"
	"time"
)

// Last-Modified is left out while the last change lies in the second of
// the response: a later change in that second would not move it.
func TestLastModified(t *testing.T) {
	now := time.Date(2026, 11, 21, 19, 30, 5, 500e6, time.UTC)
	tests := []struct {
		name string
		h    Hints
		want time.Time
	}{
		{"nothing dated", Hints{}, time.Time{}},
		{"newest in an earlier second", Hints{Newest: now.Add(-time.Second)}, now.Add(-time.Second)},
		{"newest in this second", Hints{Newest: now.Add(-400 * time.Millisecond)}, time.Time{}},
		{"newest ahead", Hints{Newest: now.Add(time.Minute)}, time.Time{}},
		{"changed later than newest", Hints{Newest: now.Add(-time.Hour), Changed: now.Add(-time.Minute)}, now.Add(-time.Minute)},
		{"changed in this second", Hints{Newest: now.Add(-time.Hour), Changed: now.Add(-100 * time.Millisecond)}, time.Time{}},
	}
	for _, tt := range tests {
		if got := LastModified(tt.h, now); !got.Equal(tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// Changes dates a document's change by its content when that moved to a
// later second, else by when it first saw the new bytes.
func TestChanges(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC)
	c := NewChanges(2)
	steps := []struct {
		name      string
		key, etag string
		base, now time.Time
		want      time.Time
	}{
		{"first sight: its content's date", "a", `"1"`, t0, t0.Add(time.Minute), t0},
		{"the same bytes", "a", `"1"`, t0, t0.Add(2 * time.Minute), t0},
		{"an item arrived", "a", `"2"`, t0.Add(3 * time.Minute), t0.Add(4 * time.Minute), t0.Add(3 * time.Minute)},
		{"an item removed: the content's date did not move", "a", `"3"`, t0.Add(3 * time.Minute), t0.Add(5 * time.Minute), t0.Add(5 * time.Minute)},
		{"still those bytes", "a", `"3"`, t0.Add(3 * time.Minute), t0.Add(6 * time.Minute), t0.Add(5 * time.Minute)},
		{"a change dated in the second of the last", "a", `"4"`, t0.Add(5*time.Minute + 500*time.Millisecond), t0.Add(7 * time.Minute), t0.Add(7 * time.Minute)},
		{"another document", "b", `"1"`, t0, t0.Add(8 * time.Minute), t0},
		{"a third forgets one", "c", `"1"`, t0, t0.Add(9 * time.Minute), t0},
	}
	for _, s := range steps {
		if got := c.Since(s.key, s.etag, s.base, s.now); !got.Equal(s.want) {
			t.Errorf("%s: %v, want %v", s.name, got, s.want)
		}
	}
	if len(c.docs) > 2 {
		t.Errorf("%d documents remembered, at most 2", len(c.docs))
	}
}
