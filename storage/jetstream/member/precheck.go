package member

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage/cluster"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/lease"
)

// routeProbeTimeout bounds reaching one route and reading its greeting.
const routeProbeTimeout = time.Second

// checkBeforeJoining asks the cluster the embedded server eo would join,
// before that server starts, whether the node would be refused: a peer's
// server already named name (another process runs with this node name),
// or a lease bucket with another shard count or a live member of this
// name (lease.CheckJoin). A server that joined the JetStream meta group
// stays one of its peers after its process exits, and one more peer
// that never comes back can cost the cluster its quorum; a server of a
// duplicate name disturbs the routes of the one running. It reads each
// route's greeting (the server's name and client URLs) without joining,
// then checks the bucket as a plain client of those servers. A cluster
// that does not answer (not started yet, or without a quorum) is not a
// refusal: Start checks again once joined. It returns
// lease.Options.StaleMember.
func checkBeforeJoining(ctx context.Context, name string, shards int, eo *sjs.EmbedOptions, log *slog.Logger) (uint64, error) {
	clusterName := eo.ClusterName
	if clusterName == "" {
		clusterName = sjs.DefaultClusterName
	}
	var clients []string
	for _, r := range eo.Routes {
		info, err := routeGreeting(ctx, r)
		if err != nil || info.Cluster != clusterName {
			continue
		}
		if info.Name == name {
			return 0, fmt.Errorf("%w: %s (its NATS server answers at %s)", cluster.ErrDuplicateNode, name, r)
		}
		for _, u := range info.ClientConnectURLs {
			clients = append(clients, "nats://"+u)
		}
	}
	if len(clients) == 0 {
		return 0, nil
	}
	nc, err := nats.Connect(strings.Join(clients, ","), nats.Name("slogfeed "+name+" (checking before joining)"),
		nats.Timeout(2*time.Second), nats.NoReconnect(), nats.DontRandomize())
	if err != nil {
		log.Info("cannot check the cluster before joining it", "err", err)
		return 0, nil
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		return 0, nil
	}
	stale, err := lease.CheckJoin(ctx, js, lease.Options{Name: name, Shards: shards})
	switch {
	case errors.Is(err, cluster.ErrConfigMismatch), errors.Is(err, cluster.ErrDuplicateNode), errors.Is(err, cluster.ErrInvalid):
		return 0, err
	case err != nil:
		log.Info("cannot check the cluster before joining it", "err", err)
		return 0, nil
	}
	return stale, nil
}

// routeGreeting is the INFO a NATS server sends on its route port to a
// connection it accepts, read without answering it.
type routeInfo struct {
	Name              string   `json:"server_name"`
	Cluster           string   `json:"cluster"`
	ClientConnectURLs []string `json:"connect_urls"`
}

func routeGreeting(ctx context.Context, route string) (routeInfo, error) {
	var info routeInfo
	u, err := url.Parse(strings.TrimSpace(route))
	if err != nil || u.Host == "" {
		return info, fmt.Errorf("route %q: not a URL", route)
	}
	d := net.Dialer{Timeout: routeProbeTimeout}
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return info, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(routeProbeTimeout))
	line, err := bufio.NewReaderSize(conn, 4096).ReadSlice('\n')
	if err != nil {
		return info, fmt.Errorf("route %s: %w", u.Host, err)
	}
	rest, ok := strings.CutPrefix(string(line), "INFO ")
	if !ok {
		return info, fmt.Errorf("route %s: no INFO", u.Host)
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(rest)), &info); err != nil {
		return info, fmt.Errorf("route %s: %w", u.Host, err)
	}
	return info, nil
}
