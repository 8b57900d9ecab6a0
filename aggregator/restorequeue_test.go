package aggregator

import (
	"slices"
	"testing"
	"time"
)

// TestRestoreQueueOrder checks that the restorer takes deferred feeds
// soonest due first across the changes that queued them, and that of
// feeds due together the earlier change's come first.
func TestRestoreQueueOrder(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	due := func(id uint64, min int) dueFeed {
		return dueFeed{id: id, due: t0.Add(time.Duration(min) * time.Minute)}
	}
	tests := []struct {
		name  string
		adds  [][]dueFeed
		batch int
		want  [][]uint64
	}{
		{
			name:  "one change, unsorted",
			adds:  [][]dueFeed{{due(1, 5), due(2, 1), due(3, 3)}},
			batch: 2,
			want:  [][]uint64{{2, 3}, {1}},
		},
		{
			name: "a second change interleaves",
			adds: [][]dueFeed{
				{due(1, 1), due(2, 4), due(3, 7)},
				{due(10, 8), due(11, 0), due(12, 5)},
			},
			batch: 4,
			want:  [][]uint64{{11, 1, 2, 12}, {3, 10}},
		},
		{
			name: "ties keep the earlier change first",
			adds: [][]dueFeed{
				{due(1, 2), due(2, 2)},
				{due(3, 2), due(4, 1)},
			},
			batch: 10,
			want:  [][]uint64{{4, 1, 2, 3}},
		},
		{
			name:  "empty adds",
			adds:  [][]dueFeed{nil, {due(1, 1)}, nil},
			batch: 1,
			want:  [][]uint64{{1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := restoreQueue{wake: make(chan struct{}, 1)}
			for _, a := range tt.adds {
				q.add(a)
			}
			for i, want := range tt.want {
				if got := idsOf(q.next(tt.batch)); !slices.Equal(got, want) {
					t.Fatalf("batch %d = %v, want %v", i, got, want)
				}
			}
			if got := q.next(tt.batch); len(got) != 0 {
				t.Fatalf("left after the batches: %v", got)
			}
			if q.feeds != nil {
				t.Fatalf("an empty queue keeps its backing array (len %d, cap %d)", len(q.feeds), cap(q.feeds))
			}
		})
	}
}

// TestRestoreQueueTakeWhileAdding checks that a change added while the
// restorer is part-way through an earlier one is merged into what is
// left, and wakes the restorer.
func TestRestoreQueueTakeWhileAdding(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	q := restoreQueue{wake: make(chan struct{}, 1)}
	var first []dueFeed
	for i := range 6 {
		first = append(first, dueFeed{id: uint64(i + 1), due: t0.Add(time.Duration(2*i) * time.Second)})
	}
	q.add(first)
	<-q.wake
	if got := idsOf(q.next(2)); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("first batch %v", got)
	}
	q.add([]dueFeed{{id: 100, due: t0.Add(5 * time.Second)}, {id: 101, due: t0}})
	select {
	case <-q.wake:
	default:
		t.Fatal("add did not wake the restorer")
	}
	if got, want := idsOf(q.next(10)), []uint64{101, 3, 100, 4, 5, 6}; !slices.Equal(got, want) {
		t.Fatalf("after the second change: %v, want %v", got, want)
	}
}

func idsOf(feeds []dueFeed) []uint64 {
	ids := make([]uint64, len(feeds))
	for i, f := range feeds {
		ids[i] = f.id
	}
	return ids
}
