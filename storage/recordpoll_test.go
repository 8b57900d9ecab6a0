package storage

import (
	"errors"
	"testing"
	"time"
)

func TestRecordPoll(t *testing.T) {
	s := openTest(t)
	f := &Feed{Kind: KindRemote, URL: "https://example.org/a.rss", Policy: "auto"}
	if err := s.CreateFeed(f); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	got, err := s.RecordPoll(f.ID, Observation{At: at, Hit: true, LatencyS: []float64{1.5}}, func(x *Feed) error {
		x.Polls++
		x.Hits++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Polls != 1 || got.Hits != 1 {
		t.Fatalf("feed after poll: polls %d hits %d, want 1 and 1", got.Polls, got.Hits)
	}
	obs, err := s.Observations(f.ID, 0)
	if err != nil || len(obs) != 1 || !obs[0].At.Equal(at) || !obs[0].Hit {
		t.Fatalf("observations %v, %v", obs, err)
	}
	// A failing update writes neither the observation nor the feed.
	boom := errors.New("boom")
	if _, err := s.RecordPoll(f.ID, Observation{At: at.Add(time.Minute)}, func(x *Feed) error { x.Polls++; return boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
	if obs, _ := s.Observations(f.ID, 0); len(obs) != 1 {
		t.Fatalf("%d observations after a failed poll record, want 1", len(obs))
	}
	if g, _ := s.Feed(f.ID); g.Polls != 1 {
		t.Fatalf("polls %d after a failed poll record, want 1", g.Polls)
	}
	if _, err := s.RecordPoll(999, Observation{At: at}, func(*Feed) error { return nil }); !errors.Is(err, ErrFeedNotFound) {
		t.Fatalf("unknown feed: %v", err)
	}
}
