package jetstream_test

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/slogfeed/slogfeed/storage"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

// TestRecordsReadInBothForms: a Store writes its records compressed while
// its gate allows it and as JSON otherwise, and every reader (Feed,
// FeedStates, TakeFeedStates) takes both, also for a record rewritten in
// the other form; compressed records take at most 60% of the bytes.
func TestRecordsReadInBothForms(t *testing.T) {
	c := jstest.NewServer(t)
	ctx := testCtx(t)
	var jsonOpen, s2Open atomic.Bool
	jsonWriter := openNode(t, c, true)
	jsonWriter.SetRecordCompression(jsonOpen.Load)
	s2Writer := openNode(t, c, true)
	s2Open.Store(true)
	s2Writer.SetRecordCompression(s2Open.Load)
	reader, js := openStoreWith(t, c, sjs.Options{Shards: 8})
	kv, err := js.KeyValue(ctx, sjs.DefsBucket)
	if err != nil {
		t.Fatal(err)
	}

	var ids []uint64
	writer := map[uint64]*sjs.Store{}
	for i := range 6 {
		f := storage.Feed{Kind: storage.KindRemote, URL: "http://127.0.0.1:1/" + strconv.Itoa(i), Title: "sensor " + strconv.Itoa(i), Policy: "auto"}
		if err := reader.CreateFeed(ctx, &f); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, f.ID)
		writer[f.ID] = jsonWriter
		if i >= 3 {
			writer[f.ID] = s2Writer
		}
	}
	polls := 0
	check := func(phase string, wantS2 func(id uint64) bool) {
		t.Helper()
		polls++
		for _, id := range ids {
			pollFeed(t, writer[id], id, polls)
		}
		sizes := map[bool][]int{}
		for _, id := range ids {
			e, err := kv.Get(ctx, "feed."+strconv.FormatUint(id, 10))
			if err != nil {
				t.Fatal(err)
			}
			compressed := e.Value()[0] != '{'
			if compressed != wantS2(id) {
				t.Errorf("%s: feed %d stored compressed %v, want %v", phase, id, compressed, wantS2(id))
			}
			sizes[compressed] = append(sizes[compressed], len(e.Value()))
			f, err := reader.Feed(ctx, id)
			if err != nil || f.Polls != int64(polls) || f.Title != "sensor "+strconv.Itoa(int(id-ids[0])) {
				t.Errorf("%s: Feed(%d) = polls %d title %q, %v", phase, id, f.Polls, f.Title, err)
			}
		}
		if len(sizes[true]) > 0 && len(sizes[false]) > 0 && sizes[true][0]*100 > sizes[false][0]*60 {
			t.Errorf("%s: a compressed record takes %d bytes, a JSON one %d", phase, sizes[true][0], sizes[false][0])
		}
		states, err := reader.FeedStates(ctx, nil, 0)
		if err != nil || len(states) != len(ids) {
			t.Fatalf("%s: FeedStates: %d feeds, %v", phase, len(states), err)
		}
		for _, id := range ids {
			if st := states[id]; st == nil || st.Feed.Polls != int64(polls) {
				t.Errorf("%s: FeedStates of feed %d: %+v", phase, id, st)
			}
		}
		got, stats := take(t, reader, ids, nil)
		if stats.Records != len(ids) || stats.Restored != len(ids) || stats.Replayed != 0 {
			t.Errorf("%s: TakeFeedStates %+v, want every record restored", phase, stats)
		}
		for _, id := range ids {
			if got.feeds[id].ID != id || got.states[id] == nil || !got.states[id].Last.Equal(takeT0.Add(time.Duration(polls)*time.Minute+time.Duration(id%7)*time.Second)) {
				t.Errorf("%s: taken feed %d: %+v, has a state %v", phase, id, got.feeds[id], got.states[id] != nil)
			}
		}
	}
	check("gates as set", func(id uint64) bool { return writer[id] == s2Writer })
	jsonOpen.Store(true)
	s2Open.Store(false)
	check("gates swapped", func(id uint64) bool { return writer[id] == jsonWriter })
}

// recordJSON is the JSON of a value of the defs bucket, as a tool reading
// the bucket directly sees it: JSON, or S2 behind the tag byte 0x01.
func recordJSON(t testing.TB, value []byte) []byte {
	t.Helper()
	if len(value) == 0 || value[0] != 0x01 {
		return value
	}
	out, err := s2.Decode(nil, value[1:])
	if err != nil {
		t.Fatalf("compressed record: %v", err)
	}
	return out
}
