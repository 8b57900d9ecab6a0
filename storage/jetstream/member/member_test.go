package member_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
	"github.com/slogfeed/slogfeed/storage/jetstream/lease"
	"github.com/slogfeed/slogfeed/storage/jetstream/member"
	"github.com/slogfeed/slogfeed/web"
)

// healthBound is how soon /healthz must answer on every node, whatever
// the cluster is going through.
const healthBound = time.Second

// TestHealthzWhileALeaderDies runs three nodes on a 3-server cluster,
// each with its HTTP handler, and stops the server that leads one asset
// (the lease bucket, the defs bucket, the items stream, the JetStream
// meta group): throughout the re-elections that follow, /healthz answers
// on every node within healthBound, and every node answers 200 again once
// its lease writes succeed.
func TestHealthzWhileALeaderDies(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-server cluster per case")
	}
	tests := []struct {
		name  string
		asset string // stream whose leader's server is stopped; "" for the meta leader
	}{
		{"lease bucket leader", "KV_" + lease.DefaultBucket},
		{"defs bucket leader", "KV_" + sjs.DefsBucket},
		{"items stream leader", sjs.ItemsStream},
		{"meta leader", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := jstest.NewCluster(t, 3)
			urls := c.URLs()
			var handlers []*httptest.Server
			for i := range 3 {
				// Each node's own server first, as with --nats-embed.
				own := append([]string{urls[i]}, slices.Delete(slices.Clone(urls), i, i+1)...)
				ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
				m, err := member.Join(ctx, member.Options{Name: "n" + strconv.Itoa(i+1), URLs: own, Shards: 8})
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					m.Close(ctx)
				})
				h := httptest.NewServer(web.New(web.Options{Store: m.Backend(), Ready: m.Ready}))
				t.Cleanup(h.Close)
				handlers = append(handlers, h)
			}
			client := &http.Client{Timeout: 10 * time.Second}
			get := func(h *httptest.Server) (int, time.Duration, error) {
				start := time.Now()
				resp, err := client.Get(h.URL + "/healthz")
				took := time.Since(start)
				if err != nil {
					return 0, took, err
				}
				resp.Body.Close()
				return resp.StatusCode, took, nil
			}
			waitHealthy := func(what string, d time.Duration) {
				t.Helper()
				deadline := time.Now().Add(d)
				for {
					var bad error
					for i, h := range handlers {
						if code, _, err := get(h); err != nil || code != http.StatusOK {
							bad = fmt.Errorf("n%d: %d %v", i+1, code, err)
							break
						}
					}
					if bad == nil {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s: not every node healthy within %s: %v", what, d, bad)
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			waitHealthy("before the stop", 30*time.Second)

			victim := leaderOf(t, c, tt.asset)
			c.Stop(victim)
			stopped := time.Now()
			// Every node, every 100 ms, for 12 s: the lease bucket's
			// re-election takes 4–9 s.
			var worst time.Duration
			unavailable := 0
			for time.Since(stopped) < 12*time.Second {
				for i, h := range handlers {
					code, took, err := get(h)
					worst = max(worst, took)
					if err != nil || took > healthBound {
						t.Errorf("n%d at +%s: /healthz took %s (%d, %v), want ≤ %s", i+1, time.Since(stopped).Round(time.Millisecond), took.Round(time.Millisecond), code, err, healthBound)
					}
					if code == http.StatusServiceUnavailable {
						unavailable++
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
			t.Logf("server s%d stopped: slowest /healthz %s; %d answers 503", victim, worst.Round(time.Millisecond), unavailable)
			waitHealthy("after the stop", 20*time.Second)
		})
	}
}

// leaderOf returns the index of the server leading stream (the JetStream
// meta group when stream is empty).
func leaderOf(t *testing.T, c *jstest.Cluster, stream string) int {
	t.Helper()
	if stream == "" {
		for i := range c.Size() {
			if s := c.Server(i); s != nil && s.IsMetaLeader() {
				return i
			}
		}
		t.Fatal("no meta leader")
	}
	js, err := natsjs.New(c.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	leader := s.CachedInfo().Cluster.Leader
	for i := range c.Size() {
		if s := c.Server(i); s != nil && s.Name() == leader {
			return i
		}
	}
	t.Fatalf("stream %s: leader %q is no server of the cluster", stream, leader)
	return -1
}

// TestConnectPings: the node's connection pings its server often enough
// to leave a hung one before its leases run out.
func TestConnectPings(t *testing.T) {
	c := jstest.NewServer(t)
	nc, err := member.Connect([]string{c.URL()}, "pings", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if nc.Opts.PingInterval != member.ClientPingInterval || nc.Opts.MaxPingsOut != member.ClientMaxPingsOut {
		t.Errorf("pings every %v, %d out; want every %v, %d out", nc.Opts.PingInterval, nc.Opts.MaxPingsOut, member.ClientPingInterval, member.ClientMaxPingsOut)
	}
	if d := member.ClientPingInterval * (member.ClientMaxPingsOut + 1); d > 8*time.Second {
		t.Errorf("a hung server is left up to %v after it hangs", d)
	}
}
