package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
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

// stuckStore is a store whose LastSeq blocks until release is closed, as
// a JetStream stream's Info does while the stream elects a leader.
type stuckStore struct {
	*storage.Store
	release chan struct{}
	calls   atomic.Int32
}

func (s *stuckStore) LastSeq() (uint64, error) {
	s.calls.Add(1)
	<-s.release
	return s.Store.LastSeq()
}

// /healthz answers within HealthTimeout whatever blocks behind it: a
// store or a Ready that does not answer makes it a 503 that says so, and
// requests arriving meanwhile share the one check under way instead of
// each starting its own. A cluster node's Ready answers for it: a stuck
// store (a stream electing its leader) is not asked.
func TestHealthzAnswersInTime(t *testing.T) {
	st := clusterStore(t, 0)
	const timeout = 500 * time.Millisecond
	tests := []struct {
		name       string
		withReady  bool // a cluster node
		stuckStore bool // LastSeq blocks
		stuckReady bool // Ready blocks
		wantCode   int
		wantErr    string
		wantTook   time.Duration
	}{
		{"single node, store stuck", false, true, false, http.StatusServiceUnavailable, "did not answer within 500ms", timeout},
		{"cluster node, ready stuck", true, false, true, http.StatusServiceUnavailable, "did not answer within 500ms", timeout},
		{"cluster node, store stuck", true, true, false, http.StatusOK, `"ok"`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				store := &stuckStore{Store: st, release: make(chan struct{})}
				if !tt.stuckStore {
					close(store.release)
				}
				var readyCalls atomic.Int32
				var ready func() error
				if tt.withReady {
					ready = func() error {
						readyCalls.Add(1)
						if tt.stuckReady {
							<-release
						}
						return nil
					}
				}
				h := New(Options{Store: store, Ready: ready, HealthTimeout: timeout})
				const requests = 20
				var wg sync.WaitGroup
				codes := make([]int, requests)
				bodies := make([]string, requests)
				took := make([]time.Duration, requests)
				for i := range requests {
					wg.Go(func() {
						start := time.Now()
						rec := httptest.NewRecorder()
						h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
						codes[i], bodies[i], took[i] = rec.Code, rec.Body.String(), time.Since(start)
					})
				}
				wg.Wait()
				for i := range requests {
					if codes[i] != tt.wantCode || !strings.Contains(bodies[i], tt.wantErr) {
						t.Errorf("request %d: %d %s, want %d saying %q", i, codes[i], bodies[i], tt.wantCode, tt.wantErr)
					}
					if took[i] != tt.wantTook {
						t.Errorf("request %d answered after %v, want %v", i, took[i], tt.wantTook)
					}
				}
				if tt.wantCode != http.StatusOK {
					// The checks blocked: every request waited for
					// the one under way.
					if n := readyCalls.Load() + store.calls.Load(); n != 1 {
						t.Errorf("%d requests called Ready and the store %d times, want one check shared", requests, n)
					}
				}
				if tt.withReady && store.calls.Load() != 0 {
					t.Errorf("a cluster node's /healthz asked the store %d times", store.calls.Load())
				}
				// Once what blocked answers, the next check is 200.
				close(release)
				if tt.stuckStore {
					close(store.release)
				}
				synctest.Wait()
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
				if rec.Code != http.StatusOK {
					t.Errorf("after the release: %d %s, want 200", rec.Code, rec.Body)
				}
			})
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

// ownAgg is an Aggregator that reports its node's ownership.
type ownAgg struct {
	planAgg
	st aggregator.OwnershipStatus
}

func (o ownAgg) Ownership() aggregator.OwnershipStatus { return o.st }

// GET /api/v1/cluster: this_node carries the answering node's polling
// figures from its aggregator: loading while a change of its shards is
// not all scheduled, loaded with how long it took; absent without an
// aggregator that reports them.
func TestClusterThisNode(t *testing.T) {
	st := clusterStore(t, 5)
	changed := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	single, err := aggregator.NewService(aggregator.ServiceOptions{Store: st, Fetcher: fetcher.New(fetcher.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	if err := single.Load(); err != nil {
		t.Fatal(err)
	}
	lease := func() cluster.Status {
		return cluster.Status{Shards: 4, Nodes: []cluster.NodeStatus{{Name: "n1", Live: true}}}
	}
	tests := []struct {
		name    string
		agg     Aggregator
		cluster func() cluster.Status
		want    string // the this_node object; "" for none
	}{
		{"loading", ownAgg{st: aggregator.OwnershipStatus{Clustered: true, Polled: 120, Pending: 333, Deferred: 40, Changed: changed, Took: 2500 * time.Millisecond, Lost: 2}}, lease,
			`{"name":"n1","polled":120,"pending":333,"failed":0,"deferred":40,"parked":0,"loading":true,"changed":"2026-11-25T12:00:00Z","load_s":2.5,"taken":0,"lost":2}`},
		{"loaded", ownAgg{st: aggregator.OwnershipStatus{Clustered: true, Polled: 453, Failed: 1, Changed: changed, Loaded: changed.Add(4 * time.Second), Took: 4 * time.Second, Taken: 333}}, lease,
			`{"name":"n1","polled":453,"pending":0,"failed":1,"deferred":0,"parked":0,"loading":false,"changed":"2026-11-25T12:00:00Z","loaded":"2026-11-25T12:00:04Z","load_s":4,"taken":333,"lost":0}`},
		{"lapsed", ownAgg{st: aggregator.OwnershipStatus{Clustered: true, Polled: 453, Parked: 110, Changed: changed, Loaded: changed.Add(4 * time.Second), Took: 4 * time.Second, Taken: 333}}, lease,
			`{"name":"n1","polled":453,"pending":0,"failed":0,"deferred":0,"parked":110,"loading":false,"changed":"2026-11-25T12:00:00Z","loaded":"2026-11-25T12:00:04Z","load_s":4,"taken":333,"lost":0}`},
		{"single node's service", single, nil,
			`{"name":"n1","polled":5,"pending":0,"failed":0,"deferred":0,"parked":0,"loading":false,"load_s":0,"taken":0,"lost":0}`},
		{"an aggregator that does not report it", planAgg{}, lease, ""},
		{"no aggregator", nil, lease, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(Options{Store: st, Aggregator: tt.agg, Cluster: tt.cluster, Node: "n1"})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/cluster", nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			var got struct {
				Feeds    int             `json:"feeds"`
				ThisNode json.RawMessage `json:"this_node"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			var compact bytes.Buffer
			if len(got.ThisNode) > 0 {
				if err := json.Compact(&compact, got.ThisNode); err != nil {
					t.Fatal(err)
				}
			}
			if compact.String() != tt.want {
				t.Errorf("this_node %s\nwant      %s", compact.String(), tt.want)
			}
			if got.Feeds != 5 {
				t.Errorf("feeds %d, want 5: the other fields stay", got.Feeds)
			}
		})
	}
}

// recordCounter is a Store that counts reads of every feed record and
// may list feed IDs (storage.FeedIDLister).
type recordCounter struct {
	Store
	reads atomic.Int32
}

func (r *recordCounter) Feeds() ([]storage.Feed, error) {
	r.reads.Add(1)
	return r.Store.Feeds()
}

// idLister is a recordCounter that lists its store's feed IDs.
type idLister struct{ *recordCounter }

func (l idLister) FeedIDs() ([]uint64, error) {
	feeds, err := l.Store.Feeds()
	if err != nil {
		return nil, err
	}
	ids := make([]uint64, 0, len(feeds))
	for _, f := range feeds {
		ids = append(ids, f.ID)
	}
	return ids, nil
}

// GET /api/v1/cluster on a cluster whose nodes say how many feeds they
// poll: the counts come from the nodes (this node's from its own
// figures), the unowned shards' from the listed feed IDs, and no feed
// record is read; a node that does not say, shards that do not add up,
// or unowned shards without a listing fall back to counting the records.
func TestClusterStatusReported(t *testing.T) {
	const remote, shards = 6, 4
	base := clusterStore(t, remote)
	all, err := base.Feeds()
	if err != nil {
		t.Fatal(err)
	}
	remoteIn, listedIn := map[int]int{}, map[int]int{}
	for _, f := range all {
		s := cluster.ShardOf(cluster.KindFeed, f.ID, shards)
		listedIn[s]++
		if f.Kind == storage.KindRemote {
			remoteIn[s]++
		}
	}
	n := func(p int) *int { return &p }
	node := func(name string, polled *int, ids ...int) cluster.NodeStatus {
		return cluster.NodeStatus{Name: name, Shards: len(ids), ShardIDs: ids, Live: true, Polled: polled}
	}
	owned := func(nodes ...cluster.NodeStatus) cluster.Status {
		st := cluster.Status{Shards: shards, LeaseTTLS: 9, Nodes: nodes, Unowned: shards}
		for _, x := range nodes {
			st.Unowned -= x.Shards
		}
		return st
	}
	tests := []struct {
		name      string
		status    cluster.Status
		agg       Aggregator
		lister    bool
		wantNodes map[string]int
		wantUnown int
		wantReads int32
	}{
		{"every node says", owned(node("n1", n(10), 0, 1), node("n2", n(5), 2, 3)), nil, false,
			map[string]int{"n1": 10, "n2": 5}, 0, 0},
		{"this node's own figures", owned(node("n1", n(10), 0, 1), node("n2", n(5), 2, 3)),
			ownAgg{st: aggregator.OwnershipStatus{Clustered: true, Polled: 11, Pending: 2, Failed: 1}}, false,
			map[string]int{"n1": 14, "n2": 5}, 0, 0},
		{"a node without shards need not say", owned(node("n1", n(10), 0, 1, 2, 3), node("n2", nil)), nil, false,
			map[string]int{"n1": 10, "n2": 0}, 0, 0},
		{"a dead node's last count is not its feeds", owned(node("n1", n(10), 0, 1, 2, 3), node("n3", n(7))), nil, false,
			map[string]int{"n1": 10, "n3": 0}, 0, 0},
		{"unowned shards from the feed IDs", owned(node("n1", n(10), 0, 1)), nil, true,
			map[string]int{"n1": 10}, listedIn[2] + listedIn[3], 0},
		{"a node of an older version", owned(node("n1", n(10), 0, 1), node("n2", nil, 2, 3)), nil, false,
			map[string]int{"n1": remoteIn[0] + remoteIn[1], "n2": remoteIn[2] + remoteIn[3]}, 0, 1},
		{"unowned shards without a listing", owned(node("n1", n(10), 0, 1)), nil, false,
			map[string]int{"n1": remoteIn[0] + remoteIn[1]}, remoteIn[2] + remoteIn[3], 1},
		{"shards that do not add up", cluster.Status{Shards: shards, Nodes: []cluster.NodeStatus{node("n1", n(10), 0)}}, nil, true,
			map[string]int{"n1": remoteIn[0]}, remoteIn[1] + remoteIn[2] + remoteIn[3], 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := &recordCounter{Store: base}
			var store Store = rc
			if tt.lister {
				store = idLister{rc}
			}
			h := New(Options{Store: store, Aggregator: tt.agg, Node: "n1", Cluster: func() cluster.Status { return tt.status }})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/cluster", nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			var got ClusterStatus
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			sum := got.UnownedFeeds
			for _, x := range got.Nodes {
				want, ok := tt.wantNodes[x.Name]
				if !ok || x.Feeds != want {
					t.Errorf("node %s: %d feeds, want %d", x.Name, x.Feeds, want)
				}
				sum += x.Feeds
			}
			if len(got.Nodes) != len(tt.wantNodes) || got.UnownedFeeds != tt.wantUnown || got.Feeds != sum {
				t.Errorf("got %s, want unowned feeds %d and feeds the sum", rec.Body, tt.wantUnown)
			}
			if r := rc.reads.Load(); r != tt.wantReads {
				t.Errorf("%d reads of every record, want %d", r, tt.wantReads)
			}
		})
	}
}

// A node that cannot take writes says so in its cluster status: the
// leases it shows are what it last saw (while quorum is lost they all
// look live); one that can says nothing.
func TestClusterStatusWarnsWhenNotWritable(t *testing.T) {
	base := clusterStore(t, 2)
	st := cluster.Status{Shards: 2, LeaseTTLS: 9, Nodes: []cluster.NodeStatus{{Name: "n1", Shards: 2, ShardIDs: []int{0, 1}, Live: true}}}
	for _, tc := range []struct {
		ready error
		want  string
	}{
		{nil, ""},
		{errors.New("cluster lease writes have been failing for 4s"), "this node cannot take writes (cluster lease writes have been failing for 4s)"},
	} {
		h := New(Options{Store: base, Node: "n1", Cluster: func() cluster.Status { return st }, Ready: func() error { return tc.ready }})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/cluster", nil))
		var got ClusterStatus
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(got.Warning, tc.want) || (tc.want == "") != (got.Warning == "") {
			t.Errorf("ready %v: warning %q, want %q…", tc.ready, got.Warning, tc.want)
		}
	}
}
