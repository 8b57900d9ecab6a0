package member_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/member"
)

// TestReadyWithoutMetaLeader: three nodes with embedded servers, a fourth
// server that joined the JetStream meta group and left for good, then
// one node stopped: the lease bucket keeps its quorum (two of its three
// replicas) and the lease writes succeed, but the meta group (two of
// four peers) cannot elect a leader and every JetStream API request
// fails. The survivors say so on /healthz (Ready) once the grace has
// passed, instead of answering ready while their polls cannot be stored.
func TestReadyWithoutMetaLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-server cluster")
	}
	ports := freePorts(t, 4)
	route := func(i int) string { return "nats://127.0.0.1:" + strconv.Itoa(ports[i]) }
	routes := []string{route(0), route(1), route(2)}
	members := make([]*member.Member, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range members {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			members[i], errs[i] = member.Join(ctx, member.Options{
				Name: "n" + strconv.Itoa(i+1), Shards: 8, MetaLeaderGrace: 3 * time.Second,
				Embed: &sjs.EmbedOptions{
					Listen: "127.0.0.1:0", ClusterListen: "127.0.0.1:" + strconv.Itoa(ports[i]),
					Routes: routes, StoreDir: t.TempDir(), MaxMemory: 32 << 20, MaxStore: 64 << 20,
				},
			})
		})
	}
	wg.Wait()
	for i, m := range members {
		if m != nil {
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				m.Close(ctx)
			})
		}
		if errs[i] != nil {
			t.Fatalf("n%d: %v", i+1, errs[i])
		}
	}
	waitFor := func(what string, d time.Duration, ok func() error) {
		t.Helper()
		deadline := time.Now().Add(d)
		for {
			err := ok()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s: %v", what, d, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	readyAll := func(ms []*member.Member) func() error {
		return func() error {
			for _, m := range ms {
				if err := m.Ready(); err != nil {
					return err
				}
			}
			return nil
		}
	}
	began := time.Now()
	waitFor("ready", 30*time.Second, readyAll(members))
	t.Logf("ready at +%s", time.Since(began).Round(time.Millisecond))

	// The phantom: a fourth server joins the meta group and goes away.
	phantom, err := sjs.StartEmbedded(sjs.EmbedOptions{
		Name: "n4", Listen: "127.0.0.1:0", ClusterListen: "127.0.0.1:" + strconv.Itoa(ports[3]),
		Routes: routes, StoreDir: t.TempDir(), MaxMemory: 32 << 20, MaxStore: 64 << 20, ReadyTimeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	// It counts only once the meta group has taken it in as a fourth
	// peer: shut down before that, the three keep a quorum and a leader.
	waitFor("the phantom among the meta group's peers", 30*time.Second, func() error {
		if n := phantom.MetaPeers(); n < 4 {
			return fmt.Errorf("%d peers", n)
		}
		return nil
	})
	phantom.Shutdown()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	members[2].Close(ctx)
	cancel()
	survivors := members[:2]
	t.Logf("n3 stopped at +%s", time.Since(began).Round(time.Millisecond))
	// The lease writes recover once the bucket has a leader among the
	// two; the meta group never does.
	waitFor("no metadata leader reported", 30*time.Second, func() error {
		for _, m := range survivors {
			err := m.Ready()
			if err == nil || !strings.Contains(err.Error(), "no metadata leader") {
				return fmt.Errorf("Ready = %v", err)
			}
		}
		return nil
	})
	t.Logf("reported at +%s", time.Since(began).Round(time.Millisecond))
}

// freePorts is n TCP ports on 127.0.0.1 nothing listens on now.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
