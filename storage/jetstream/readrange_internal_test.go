package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
)

// itemMsg is a fake pass's message whose body is an item.
type itemMsg struct{ passMsg }

func (m itemMsg) Data() []byte {
	b, _ := json.Marshal(storage.Item{ID: fmt.Sprint("b", m.seq)})
	return b
}

// TestReadRangeEmptyFetch: a fetch that returns nothing while the leader
// holds more of the range is not its end (a page by arrival missed an
// item under load); the range ends where the leader holds no more, or
// at below.
func TestReadRangeEmptyFetch(t *testing.T) {
	var seqs []uint64
	for seq := uint64(100); seq <= 300; seq += 2 {
		seqs = append(seqs, seq)
	}
	for _, c := range []struct {
		name   string
		script []fetchStep
		below  uint64
		want   int
	}{
		{"empty first", []fetchStep{{n: 0}}, 0, len(seqs)},
		{"empty once midway", []fetchStep{{n: 5}, {n: 0}, {n: 0}}, 0, len(seqs)},
		{"below", []fetchStep{{n: 5}, {n: 0}}, 201, 51},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Store{opt: Options{MaxItemsPerFeed: 10000}}
			cons := &fakeOrdered{seqs: seqs, script: c.script, wrap: func(m passMsg) jetstream.Msg { return itemMsg{m} }}
			asked := 0
			more := func(_ context.Context, from uint64) (bool, error) {
				asked++
				for _, seq := range seqs {
					if seq >= from && (c.below == 0 || seq < c.below) {
						return true, nil
					}
				}
				return false, nil
			}
			got, err := s.readRangeFrom(context.Background(), cons, 100, c.below, 3, nil, more, "read")
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != c.want {
				t.Fatalf("read %d items, want %d", len(got), c.want)
			}
			for i, it := range got {
				if it.Seq != seqs[i] || it.ID != fmt.Sprint("b", seqs[i]) {
					t.Fatalf("item %d: %d %q", i, it.Seq, it.ID)
				}
			}
			if asked == 0 {
				t.Error("the range ended without the leader's word")
			}
		})
	}
}
