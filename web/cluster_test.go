package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
)

func clusterStore(t *testing.T, remote int) *storage.Store {
	t.Helper()
	st, err := storage.Open(filepath.Join(t.TempDir(), "c.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for i := range remote {
		f := storage.Feed{URL: "http://pub.test/" + string(rune('a'+i)) + ".rss", Kind: storage.KindRemote, Policy: "auto"}
		if err := st.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
	}
	s := storage.Feed{Kind: storage.KindSensor, Slug: "lab", Policy: "auto"}
	if err := st.CreateFeed(&s); err != nil {
		t.Fatal(err)
	}
	return st
}

// /healthz answers 200 only when the store answers and Ready is nil.
func TestHealthzReady(t *testing.T) {
	st := clusterStore(t, 0)
	tests := []struct {
		name   string
		ready  func() error
		status int
	}{
		{"single node", nil, http.StatusOK},
		{"cluster ready", func() error { return nil }, http.StatusOK},
		{"cluster not ready", func() error { return errors.New("NATS: not connected") }, http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(Options{Store: st, Ready: tt.ready})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			var body map[string]string
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if tt.status != http.StatusOK && body["error"] != "NATS: not connected" {
				t.Errorf("body %v does not say why", body)
			}
		})
	}
}

// GET /api/v1/cluster: each node's feeds are the remote feeds of its
// shards; a single node answers one node owning everything.
func TestClusterStatus(t *testing.T) {
	const feeds = 5
	st := clusterStore(t, feeds)
	all, err := st.Feeds()
	if err != nil {
		t.Fatal(err)
	}
	const shards = 4
	byShard := map[int]int{}
	for _, f := range all {
		if f.Kind == storage.KindRemote {
			byShard[cluster.ShardOf(cluster.KindFeed, f.ID, shards)]++
		}
	}
	seen := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	lease := cluster.Status{
		Shards: shards, Unowned: 1, LeaseTTLS: 9,
		Nodes: []cluster.NodeStatus{
			{Name: "n1", Addr: "127.0.0.1:8081", Shards: 2, ShardIDs: []int{0, 1}, LastSeen: seen, Live: true},
			{Name: "n2", Addr: "127.0.0.1:8082", Shards: 1, ShardIDs: []int{2}, LastSeen: seen, Live: true},
		},
	}
	tests := []struct {
		name      string
		status    func() cluster.Status
		wantMode  string
		wantNodes map[string]int // name → feeds
		wantUnown int            // unowned feeds
		wantTTL   float64
	}{
		{"single", nil, ModeSingle, map[string]int{"local": feeds}, 0, 0},
		{"cluster", func() cluster.Status { return lease }, ModeCluster,
			map[string]int{"n1": byShard[0] + byShard[1], "n2": byShard[2]}, byShard[3], 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(Options{Store: st, Cluster: tt.status})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/cluster", nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			var got struct {
				Mode  string `json:"mode"`
				Nodes []struct {
					Name     string    `json:"name"`
					Addr     string    `json:"addr"`
					Shards   int       `json:"shards"`
					Feeds    int       `json:"feeds"`
					LastSeen time.Time `json:"last_seen"`
				} `json:"nodes"`
				Shards       int     `json:"shards"`
				Unowned      int     `json:"unowned"`
				LeaseTTLS    float64 `json:"lease_ttl_s"`
				Feeds        int     `json:"feeds"`
				UnownedFeeds int     `json:"unowned_feeds"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if got.Mode != tt.wantMode || got.Feeds != feeds || got.UnownedFeeds != tt.wantUnown || got.LeaseTTLS != tt.wantTTL {
				t.Errorf("status %s", rec.Body)
			}
			if len(got.Nodes) != len(tt.wantNodes) {
				t.Fatalf("nodes %s", rec.Body)
			}
			for _, n := range got.Nodes {
				if want, ok := tt.wantNodes[n.Name]; !ok || n.Feeds != want || n.LastSeen.IsZero() {
					t.Errorf("node %+v, want %d feeds", n, want)
				}
			}
		})
	}
}
