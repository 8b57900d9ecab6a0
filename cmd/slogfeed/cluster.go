package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
	"github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/lease"
	"github.com/slogfeed/slogfeed/storage/jetstream/member"
)

// maxOwnedCopies bounds --owned-copies: 16,777,216 copies, about 12 GB.
const maxOwnedCopies = 1 << 24

// clusterSettings are the rows of serve's configuration table that make a
// slogfeed a cluster node (see serveSettings and docs/cluster.md).
func clusterSettings() []setting {
	return []setting{
		{Name: "nats", Env: "SLOGFEED_NATS", Default: "", Doc: "comma-separated NATS server `URLS` (nats://h1:4222,nats://h2:4222): join a slogfeed cluster and keep the data in JetStream instead of the bbolt file", Check: checkNATSURLs},
		{Name: "node", Env: "SLOGFEED_NODE", Default: defaultNodeName(), Doc: "this cluster node's `NAME`, unique in the cluster (default: the host name)"},
		{Name: "nats-embed", Env: "SLOGFEED_NATS_EMBED", Default: "false", Doc: "run a JetStream server inside this process (data in DIR/nats) and join the cluster through it", Check: checkBool, Bool: true},
		{Name: "nats-listen", Env: "SLOGFEED_NATS_LISTEN", Default: "127.0.0.1:4222", Doc: "client `ADDRESS` of the embedded NATS server", Check: checkAddr},
		{Name: "nats-cluster-listen", Env: "SLOGFEED_NATS_CLUSTER_LISTEN", Default: "", Doc: "route `ADDRESS` of the embedded NATS server (empty: a single server without routes)", Check: func(s string) error {
			if s == "" {
				return nil
			}
			return checkAddr(s)
		}},
		{Name: "nats-routes", Env: "SLOGFEED_NATS_ROUTES", Default: "", Doc: "comma-separated route `URLS` of the other embedded servers (nats://h2:6222,nats://h3:6222)", Check: checkNATSURLs},
		{Name: "nats-replicas", Env: "SLOGFEED_NATS_REPLICAS", Default: "0", Doc: "replicas (`N`) of the streams and buckets slogfeed creates (0: 3 on a JetStream cluster, 1 on a single server)", Check: func(s string) error {
			if n, err := strconv.Atoi(s); err != nil || n < 0 || n > 5 {
				return errors.New("want a whole number from 0 to 5")
			}
			return nil
		}},
		{Name: "owned-copies", Env: "SLOGFEED_OWNED_COPIES", Default: strconv.Itoa(jetstream.DefaultOwnedFeeds), Doc: "owned feeds (`N`) whose record and item index this node keeps in memory, so that their polls read neither (about 0.7 KB each); the node's further feeds are polled reading both", Check: func(s string) error {
			if n, err := strconv.Atoi(s); err != nil || n < 1 || n > maxOwnedCopies {
				return fmt.Errorf("want a whole number from 1 to %d", maxOwnedCopies)
			}
			return nil
		}},
		{Name: "shards", Env: "SLOGFEED_SHARDS", Default: strconv.Itoa(cluster.DefaultShards), Doc: "shards (`N`) the feeds and pipes are split into; fixed by the cluster's first node", Check: func(s string) error {
			if n, err := strconv.Atoi(s); err != nil || n < 1 || n > cluster.MaxShards {
				return fmt.Errorf("want a whole number from 1 to %d", cluster.MaxShards)
			}
			return nil
		}},
	}
}

// defaultNodeName is the host name, cut to what a node name may be; "node"
// when there is none.
func defaultNodeName() string {
	h, err := os.Hostname()
	if err != nil {
		return "node"
	}
	h = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '-'
	}, h)
	h = strings.Trim(h, ".-_")
	if len(h) > 63 {
		h = strings.Trim(h[:63], ".-_")
	}
	if cluster.ValidNodeName(h) != nil {
		return "node"
	}
	return h
}

// checkNATSURLs accepts an empty list or nats:// (tls://) URLs with a
// host, comma-separated.
func checkNATSURLs(s string) error {
	for _, u := range splitList(s) {
		if !strings.HasPrefix(u, "nats://") && !strings.HasPrefix(u, "tls://") || len(u) <= len("nats://") {
			return fmt.Errorf("%q: want nats://HOST:PORT", u)
		}
	}
	return nil
}

// splitList splits a comma-separated list, dropping empty entries.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// clusterStartTimeout bounds joining the cluster: the embedded server
// waiting for its peers, and creating the streams and buckets with their
// replicas.
const clusterStartTimeout = 90 * time.Second

// clusterNode is what a cluster node runs besides the aggregator
// (member.Member: the embedded NATS server with --nats-embed, the
// connection, the JetStream store and the lease node), with the two
// parts serve hands to the components.
type clusterNode struct {
	m       *member.Member
	backend storage.Backend
	node    *lease.Node
	// polled counts the feeds this node polls, for its member key
	// (member.Options.Polled); set once the polling service exists.
	polled atomic.Pointer[func() int]
}

// setPolled makes f the count of polled feeds the node reports.
func (c *clusterNode) setPolled(f func() int) { c.polled.Store(&f) }

// polledFeeds is member.Options.Polled: not known until setPolled (the
// cluster's status then counts this node's feeds from their records).
func (c *clusterNode) polledFeeds() (int, bool) {
	if f := c.polled.Load(); f != nil {
		return (*f)(), true
	}
	return 0, false
}

// clusterEnabled reports whether the settings make serve a cluster node.
func clusterEnabled(v map[string]string) bool {
	embed, _ := strconv.ParseBool(v["nats-embed"])
	return embed || v["nats"] != ""
}

// startCluster joins the cluster the settings describe: it starts the
// embedded server (with --nats-embed, keeping its data in dataDir/nats),
// connects, opens the JetStream store and starts the lease node, whose
// address in the cluster's status is addr. Metrics go to reg.
func startCluster(ctx context.Context, v map[string]string, dataDir, addr string, log *slog.Logger, reg prometheus.Registerer) (*clusterNode, error) {
	name := v["node"]
	if err := cluster.ValidNodeName(name); err != nil {
		return nil, fmt.Errorf("--node: %w", err)
	}
	shards, _ := strconv.Atoi(v["shards"])
	replicas, _ := strconv.Atoi(v["nats-replicas"])
	copies, _ := strconv.Atoi(v["owned-copies"])
	c := &clusterNode{}
	opt := member.Options{
		Name: name, Addr: addr, URLs: splitList(v["nats"]), Shards: shards, Replicas: replicas, OwnedFeeds: copies,
		StartTimeout: clusterStartTimeout, Logger: log, Registerer: reg, Polled: c.polledFeeds,
	}
	if embed, _ := strconv.ParseBool(v["nats-embed"]); embed {
		opt.Embed = &jetstream.EmbedOptions{
			Listen: v["nats-listen"], ClusterListen: v["nats-cluster-listen"],
			Routes: splitList(v["nats-routes"]), StoreDir: filepath.Join(dataDir, "nats"),
		}
	}
	m, err := member.Join(ctx, opt)
	if err != nil {
		return nil, err
	}
	c.m, c.backend, c.node = m, m.Backend(), m.Lease()
	return c, nil
}

// close leaves the cluster (giving the shards back at once), closes the
// store and the connection, and stops the embedded server.
func (c *clusterNode) close(ctx context.Context) { c.m.Close(ctx) }

// clusterReady is web.Options.Ready: nil without a cluster.
func clusterReady(c *clusterNode) func() error {
	if c == nil {
		return nil
	}
	return c.m.Ready
}

// clusterStatusOf is web.Options.Cluster: nil without a cluster.
func clusterStatusOf(c *clusterNode) func() cluster.Status {
	if c == nil {
		return nil
	}
	return c.m.Status
}
