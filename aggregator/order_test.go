package aggregator

import (
	"slices"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

func TestTimeOrder(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	item := func(id string, pub, obs int) storage.Item {
		it := storage.Item{ID: id}
		if pub >= 0 {
			it.Published = t0.Add(time.Duration(pub) * time.Minute)
		}
		if obs >= 0 {
			it.Reading = &storage.Reading{Value: 1, Time: t0.Add(time.Duration(obs) * time.Minute)}
		}
		return it
	}
	tests := []struct {
		name string
		in   []storage.Item
		want []string
	}{
		{"DTN batch, newest first", []storage.Item{item("c", 60, 3), item("b", 60, 2), item("a", 60, 1)}, []string{"a", "b", "c"}},
		{"observation time over publish time", []storage.Item{item("x", 1, 5), item("y", 2, 4)}, []string{"y", "x"}},
		{"publish time without reading", []storage.Item{item("p2", 2, -1), item("p3", 3, -1), item("p1", 1, -1)}, []string{"p1", "p2", "p3"}},
		{"ties keep the feed's order, reversed", []storage.Item{item("n", 5, -1), item("m", 5, -1)}, []string{"m", "n"}},
		{"an undated item: the feed's order, reversed", []storage.Item{item("u2", 1, -1), item("u", -1, -1), item("u1", 9, -1)}, []string{"u1", "u", "u2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.in)
			timeOrder(in)
			var got []string
			for _, it := range in {
				got = append(got, it.ID)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("order %v, want %v", got, tt.want)
			}
		})
	}
}
