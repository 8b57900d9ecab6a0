package jetstream

import (
	"slices"
	"strconv"
	"testing"

	"github.com/slogfeed/slogfeed/storage/cluster"
)

func TestObsSubjects(t *testing.T) {
	var s Store
	if got := s.obsSubjectOf(42); got != "slogfeed.obs.42" {
		t.Errorf("without shards: %q", got)
	}
	if got := s.obsFilters(map[uint64]bool{42: true}); !slices.Equal(got, []string{"slogfeed.obs.>"}) {
		t.Errorf("filters without shards: %q", got)
	}
	s.SetShards(8)
	s.SetShards(0) // ignored
	sh := cluster.ShardOf(cluster.KindFeed, 42, 8)
	want := "slogfeed.obs." + itoa(sh) + ".42"
	if got := s.obsSubjectOf(42); got != want {
		t.Errorf("with 8 shards: %q, want %q", got, want)
	}
	if got := s.obsSubjectsOf(42); !slices.Equal(got, []string{want, "slogfeed.obs.42"}) {
		t.Errorf("subjects read: %q", got)
	}
	for _, tt := range []struct {
		name string
		ids  []uint64
		want []string
	}{
		{"one feed", []uint64{42}, []string{"slogfeed.obs." + itoa(sh) + ".*", "slogfeed.obs.*"}},
		{"most shards", idsUpTo(100), []string{"slogfeed.obs.>"}},
	} {
		ids := map[uint64]bool{}
		for _, id := range tt.ids {
			ids[id] = true
		}
		if got := s.obsFilters(ids); !slices.Equal(got, tt.want) {
			t.Errorf("%s: filters %q, want %q", tt.name, got, tt.want)
		}
	}
	for _, subject := range []string{"slogfeed.obs.42", "slogfeed.obs.3.42"} {
		if id, err := obsFeedOf(subject); err != nil || id != 42 {
			t.Errorf("obsFeedOf(%q) = %d, %v", subject, id, err)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func idsUpTo(n uint64) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}
