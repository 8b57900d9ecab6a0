package member

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slogfeed/slogfeed/storage/cluster"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/lease"
)

// DefaultStartTimeout bounds Join when Options.StartTimeout is zero: the
// embedded server waiting for its peers, and creating the streams and
// buckets with their replicas.
const DefaultStartTimeout = 90 * time.Second

// Options describe the node that Join starts.
type Options struct {
	// Name is the node's name, unique in the cluster (cluster.ValidNodeName);
	// it also names the embedded server and the NATS connection.
	Name string
	// Addr is the node's HTTP address as others should reach it, shown in
	// the cluster's status.
	Addr string
	// URLs are NATS server URLs to connect to (nats://host:port). With
	// Embed, the embedded server's own URL comes first.
	URLs []string
	// Embed, when not nil, runs a JetStream server inside the process;
	// its Name, Logger and ReadyTimeout are filled from these options
	// when empty.
	Embed *sjs.EmbedOptions
	// Shards is the cluster's shard count (0: cluster.DefaultShards).
	Shards int
	// Replicas of the streams and buckets this node creates (0: 3 on a
	// JetStream cluster, 1 on a single server).
	Replicas int
	// OwnedFeeds bounds the owned feeds whose state the store keeps
	// copies of (jetstream.Options.OwnedFeeds; 0: its default).
	OwnedFeeds int
	// StartTimeout bounds Join; zero means DefaultStartTimeout.
	StartTimeout time.Duration
	// Logger receives the node's log lines; nil discards them.
	Logger *slog.Logger
	// Registerer, when set, receives the store's and the lease node's
	// metrics.
	Registerer prometheus.Registerer
	// Polled, when set, tells how many feeds this node polls, for the
	// cluster's status (lease.Options.Polled).
	Polled func() (n int, ok bool)
	// MetaLeaderGrace is how long the embedded server may be without a
	// JetStream meta leader before Ready fails; zero means
	// DefaultMetaLeaderGrace.
	MetaLeaderGrace time.Duration
}

// DefaultMetaLeaderGrace is Options.MetaLeaderGrace when it is zero:
// longer than the meta group's usual election after its leader's server
// dies (4–9 s), so that only a cluster that cannot elect one (no quorum
// of the meta group's peers) makes the node unready.
const DefaultMetaLeaderGrace = 15 * time.Second

// Member is a running cluster node: the embedded server (if any), the
// NATS connection, the JetStream store and the lease node.
type Member struct {
	emb     *sjs.Embedded
	nc      *nats.Conn
	store   *sjs.Store
	backend *sjs.Backend
	lease   *lease.Node
	log     *slog.Logger

	// With an embedded server: when it last had a JetStream meta leader
	// (sampled in the background, so that Ready does not wait on the
	// server's locks), and how long it may go without one.
	metaSeen  atomic.Int64 // unix nanoseconds
	metaGrace time.Duration
	stopMeta  context.CancelFunc
	metaDone  chan struct{}
}

// Join starts the node opt describes. On error nothing is left running.
func Join(ctx context.Context, opt Options) (*Member, error) {
	if err := cluster.ValidNodeName(opt.Name); err != nil {
		return nil, fmt.Errorf("node name: %w", err)
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.StartTimeout == 0 {
		opt.StartTimeout = DefaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, opt.StartTimeout)
	defer cancel()
	m := &Member{log: opt.Logger}
	urls := opt.URLs
	var stale uint64
	if opt.Embed != nil {
		eo := *opt.Embed
		if eo.Name == "" {
			eo.Name = opt.Name
		}
		if eo.Logger == nil {
			eo.Logger = opt.Logger
		}
		if eo.ReadyTimeout == 0 {
			eo.ReadyTimeout = opt.StartTimeout
		}
		if eo.StoreDir != "" {
			if err := os.MkdirAll(eo.StoreDir, 0o700); err != nil {
				return nil, fmt.Errorf("nats data directory: %w", err)
			}
		}
		if len(eo.Routes) > 0 {
			var err error
			if stale, err = checkBeforeJoining(ctx, opt.Name, opt.Shards, &eo, opt.Logger); err != nil {
				return nil, fmt.Errorf("join the cluster: %w", err)
			}
		}
		emb, err := sjs.StartEmbeddedContext(ctx, eo)
		if err != nil {
			return nil, err
		}
		m.emb = emb
		m.watchMeta(opt.MetaLeaderGrace)
		urls = append([]string{emb.ClientURL()}, urls...)
		opt.Logger.Info("embedded NATS server ready", "client_url", emb.ClientURL(), "cluster_url", emb.ClusterURL())
	}
	var err error
	if m.nc, err = Connect(urls, opt.Name, opt.Logger); err != nil {
		m.Close(context.Background())
		return nil, err
	}
	js, err := natsjs.New(m.nc)
	if err != nil {
		m.Close(context.Background())
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	var smet *sjs.Metrics
	var lmet *lease.Metrics
	if opt.Registerer != nil {
		smet, lmet = sjs.NewMetrics(opt.Registerer), lease.NewMetrics(opt.Registerer)
	}
	if m.store, err = sjs.Open(ctx, js, sjs.Options{Replicas: opt.Replicas, OwnedFeeds: opt.OwnedFeeds, Metrics: smet}); err != nil {
		m.Close(context.Background())
		return nil, fmt.Errorf("open the JetStream store: %w", err)
	}
	m.backend = sjs.NewBackend(m.store, 0)
	if m.lease, err = lease.Start(ctx, js, lease.Options{
		Name: opt.Name, Addr: opt.Addr, Shards: opt.Shards, Replicas: opt.Replicas,
		Logger: opt.Logger, Metrics: lmet, Features: Features(), Polled: opt.Polled,
		StaleMember: stale,
	}); err != nil {
		m.Close(context.Background())
		return nil, fmt.Errorf("join the cluster: %w", err)
	}
	if err := Attach(m.store, m.lease); err != nil {
		m.Close(context.Background())
		return nil, err
	}
	return m, nil
}

// The store keeps the copies of an owned feed's state while its shard's
// tenure holds: through other shards' changes and a lapsed lease.
var _ sjs.TenuredOwner = (*lease.Node)(nil)

// Features are the features a node of this version advertises in its
// member key (lease.Options.Features).
func Features() []string { return []string{sjs.FeatureCompressedRecords} }

// Attach makes store the store of the cluster node l (started with
// Features): observations go to their shard's subjects, so that a
// takeover reads its shards' only; records are compressed once every
// member reads them compressed; and the store keeps the records and item
// indexes of the feeds l owns from its own writes, so a quiet poll reads
// nothing.
func Attach(store *sjs.Store, l *lease.Node) error {
	store.SetShards(l.Shards())
	store.SetRecordCompression(func() bool { return l.AllHave(sjs.FeatureCompressedRecords) })
	return store.SetOwner(l)
}

// ClientPingInterval and ClientMaxPingsOut are the node's NATS
// connection's pings: a server that stops answering with the connection
// open (a hung process, a paused VM) is left for another server of the
// list after ClientMaxPingsOut+1 pings, 6 to 8 s, before the node's
// leases (9 s) run out, rather than after the client's default 4 to 6
// minutes.
const (
	ClientPingInterval = 2 * time.Second
	ClientMaxPingsOut  = 3
)

// Connect connects to the NATS servers at urls as the node name,
// reconnecting for ever (every 250 ms), leaving a server that stops
// answering pings (ClientPingInterval), and logging disconnections.
func Connect(urls []string, name string, log *slog.Logger) (*nats.Conn, error) {
	nc, err := nats.Connect(strings.Join(urls, ","),
		nats.Name("slogfeed "+name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.PingInterval(ClientPingInterval),
		nats.MaxPingsOutstanding(ClientMaxPingsOut),
		nats.RetryOnFailedConnect(true),
		nats.Timeout(5*time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { log.Warn("NATS disconnected", "err", err) }),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("NATS reconnected", "url", nc.ConnectedUrlRedacted()) }),
	)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS %s: %w", strings.Join(urls, ","), err)
	}
	return nc, nil
}

// Backend is the node's store.
func (m *Member) Backend() *sjs.Backend { return m.backend }

// Lease is the node's lease node: the aggregator's and the pipe runner's
// cluster.Owner.
func (m *Member) Lease() *lease.Node { return m.lease }

// Status is the cluster as this node sees it.
func (m *Member) Status() cluster.Status { return m.lease.Status() }

// Ready is nil once the node can take writes: connected to NATS, its lease
// writes succeeding (lease.Node.Ready). It answers from state the
// connection and the lease node keep, never from a request that could
// wait on a JetStream leader election, so /healthz stays fast while the
// cluster recovers from a lost server.
func (m *Member) Ready() error {
	if st := m.nc.Status(); st != nats.CONNECTED {
		return fmt.Errorf("not connected to NATS (%s)", strings.ToLower(st.String()))
	}
	if err := m.lease.Ready(); err != nil {
		return err
	}
	if m.emb != nil {
		if since := time.Since(time.Unix(0, m.metaSeen.Load())); since > m.metaGrace {
			return fmt.Errorf("JetStream has had no metadata leader for %s (no quorum of the meta group's peers): storing polls fails", since.Round(time.Second))
		}
	}
	return nil
}

// metaSampleEvery is how often the embedded server's meta group is
// looked at.
const metaSampleEvery = 250 * time.Millisecond

// watchMeta samples, until Close, whether the embedded server has a
// JetStream meta leader.
func (m *Member) watchMeta(grace time.Duration) {
	if grace <= 0 {
		grace = DefaultMetaLeaderGrace
	}
	m.metaGrace = grace
	m.metaSeen.Store(time.Now().UnixNano())
	ctx, cancel := context.WithCancel(context.Background())
	m.stopMeta, m.metaDone = cancel, make(chan struct{})
	go func() {
		defer close(m.metaDone)
		tick := time.NewTicker(metaSampleEvery)
		defer tick.Stop()
		lost := false
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if m.emb.HasMetaLeader() {
				m.metaSeen.Store(time.Now().UnixNano())
				if lost {
					m.log.Info("JetStream has a metadata leader again")
				}
				lost = false
			} else if !lost && time.Since(time.Unix(0, m.metaSeen.Load())) > grace {
				lost = true
				m.log.Error("JetStream has no metadata leader: the cluster's JetStream requests fail until the meta group's peers have a quorum again", "peers", m.emb.MetaPeers(), "for", grace)
			}
		}
	}()
}

// Close leaves the cluster (giving the shards back at once, within ctx),
// closes the store and the connection, and stops the embedded server.
func (m *Member) Close(ctx context.Context) {
	if m.lease != nil {
		if err := m.lease.Close(ctx); err != nil {
			m.log.Warn("leaving the cluster", "err", err)
		}
	}
	if m.backend != nil {
		_ = m.backend.Close()
	}
	if m.nc != nil {
		m.nc.Close()
	}
	if m.stopMeta != nil {
		m.stopMeta()
		<-m.metaDone
	}
	if m.emb != nil {
		m.emb.Shutdown()
	}
}
