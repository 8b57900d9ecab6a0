package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/e2e"
	"github.com/slogfeed/slogfeed/web"
)

// The simulated feeds of TestClusterProcesses.
const (
	procFeeds  = 9
	procPeriod = 10 * time.Second
	procReown  = 15 * time.Second
	// procHealth bounds a survivor's /healthz answer after the kill.
	procHealth = time.Second
)

// servedNode is one `slogfeed serve --nats-embed` process.
type servedNode struct {
	name, addr string
	cmd        *exec.Cmd
	mu         sync.Mutex
	log        []string // its stderr
	exited     chan struct{}
	failTail   string // its last log lines when the test failed
}

func (n *servedNode) url(path string) string { return "http://" + n.addr + path }

// subscribeFleet subscribes feeds /f/0.rss … /f/{n-1}.rss of the
// publisher at base with the auto policy, feed i through node(i)'s API,
// and returns their IDs.
func subscribeFleet(t *testing.T, base string, n int, node func(i int) *servedNode) []uint64 {
	t.Helper()
	ids := make([]uint64, n)
	for i := range n {
		body := fmt.Sprintf(`{"url": %q, "policy": "auto"}`, fmt.Sprintf("%s/f/%d.rss", base, i))
		resp, err := http.Post(node(i).url("/api/v1/feeds"), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var f web.FeedView
		err = json.NewDecoder(resp.Body).Decode(&f)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated || err != nil {
			t.Fatalf("subscribe feed %d: %s %v", i, resp.Status, err)
		}
		ids[i] = f.ID
	}
	return ids
}

func (n *servedNode) getJSON(path string, out any) error {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(n.url(path))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	return json.Unmarshal(body, out)
}

// count is how many of its log lines contain s.
func (n *servedNode) count(s string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, l := range n.log {
		if strings.Contains(l, s) {
			c++
		}
	}
	return c
}

// healthz times one GET /healthz.
func (n *servedNode) healthz() (int, time.Duration, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	start := time.Now()
	resp, err := c.Get(n.url("/healthz"))
	took := time.Since(start)
	if err != nil {
		return 0, took, err
	}
	resp.Body.Close()
	return resp.StatusCode, took, nil
}

// assetLeaders names the JetStream server leading each stream (buckets
// included) and the meta group ("meta"), as the server at url sees them.
func assetLeaders(ctx context.Context, url string) (map[string]string, error) {
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	l := js.ListStreams(ctx)
	for si := range l.Info() {
		if si.Cluster != nil {
			out[si.Config.Name] = si.Cluster.Leader
		}
	}
	if err := l.Err(); err != nil {
		return nil, err
	}
	msg, err := nc.RequestWithContext(ctx, "$JS.API.INFO", nil)
	if err == nil {
		var ai struct {
			Cluster struct {
				Leader string `json:"leader"`
			} `json:"cluster"`
		}
		if json.Unmarshal(msg.Data, &ai) == nil && ai.Cluster.Leader != "" {
			out["meta"] = ai.Cluster.Leader
		}
	}
	return out, nil
}

// leadStream asks stream's leader to step down in favour of server,
// until server leads it (within 20 s).
func leadStream(ctx context.Context, url, stream, server string) error {
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		return err
	}
	req, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": server}})
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := js.Stream(ctx, stream)
		if err == nil && st.CachedInfo().Cluster.Leader == server {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still not leading %s (%v)", server, stream, err)
		}
		if err == nil {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, _ = nc.RequestWithContext(rctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, req)
			cancel()
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (n *servedNode) tail() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.log[max(0, len(n.log)-30):], "\n")
}

// TestClusterProcesses runs a 3-node cluster as the README starts one,
// three `slogfeed serve --nats-embed` processes on loopback, over a
// loopback publisher, and kills one with SIGKILL: its shards are owned
// again within 15 s, each of its feeds is polled again within 15 s plus
// one period, no item is stored twice and none published while the feeds
// were polled is missing, and the cluster goes on answering; a reading
// posted to one node is in another node's feed of that sensor. The
// in-process test (storage/jetstream/e2e) also checks the timing against
// the learned prediction, which needs stored history.
func TestClusterProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs three of it for a minute")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "slogfeed")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("build: %v", err)
	}
	pub := e2e.NewPublisher(time.Now().Truncate(time.Second), procFeeds, procPeriod, time.Second, 20)
	feeds := httptest.NewServer(pub)
	defer feeds.Close()

	// Three nodes, as in the README's "Run a cluster".
	names := []string{"n1", "n2", "n3"}
	routes := make([]string, 3)
	clients := make([]string, 3)
	addrs := make([]string, 3)
	ports := freeAddrs(t, 3*len(names))
	for i := range names {
		routes[i], clients[i], addrs[i] = ports[3*i], ports[3*i+1], ports[3*i+2]
	}
	nodes := make([]*servedNode, 3)
	for i, name := range names {
		var others []string
		for j := range names {
			if j != i {
				others = append(others, "nats://"+routes[j])
			}
		}
		n := &servedNode{name: name, addr: addrs[i], exited: make(chan struct{})}
		// Not CommandContext: the test's context ends before the
		// cleanups, which stop the nodes and show their logs.
		n.cmd = exec.Command(bin, "--log-level", "info", "serve",
			"--addr", addrs[i], "--data", t.TempDir(), "--node", name, "--allow", "127.0.0.0/8",
			"--nats-embed", "--nats-listen", clients[i], "--nats-cluster-listen", routes[i],
			"--nats-routes", strings.Join(others, ","), "--websub=false")
		stderr, err := n.cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := n.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			sc := bufio.NewScanner(stderr)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				n.mu.Lock()
				n.log = append(n.log, sc.Text())
				n.mu.Unlock()
			}
			_ = n.cmd.Wait()
			close(n.exited)
		}()
		nodes[i] = n
		t.Cleanup(func() {
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-n.exited:
			case <-time.After(15 * time.Second):
				_ = n.cmd.Process.Kill()
				<-n.exited
			}
			if !t.Failed() {
				return
			}
			t.Logf("%s's last log lines:\n%s", n.name, n.failTail)
			path := filepath.Join(t.ArtifactDir(), n.name+".log")
			n.mu.Lock()
			err := os.WriteFile(path, []byte(strings.Join(n.log, "\n")), 0o644)
			n.mu.Unlock()
			if err == nil {
				t.Logf("%s's whole log, its goroutines at the failure last: %s (kept with go test -artifacts)", n.name, path)
			}
		})
	}
	// Runs before the nodes' cleanups: on a failure, every node dumps its
	// goroutines into its log at once (SIGQUIT), before any stops.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, n := range nodes {
			n.failTail = n.tail()
			_ = n.cmd.Process.Signal(syscall.SIGQUIT)
		}
		for _, n := range nodes {
			select {
			case <-n.exited:
			case <-time.After(5 * time.Second):
			}
		}
	})
	// Ready: /healthz 200 on every node (NATS connected, lease writes
	// succeed).
	started := time.Now()
	e2e.WaitFor(t, 90*time.Second, "every node healthy", func() error {
		for _, n := range nodes {
			select {
			case <-n.exited:
				t.Fatalf("%s exited:\n%s", n.name, n.tail())
			default:
			}
			var h map[string]string
			if err := n.getJSON("/healthz", &h); err != nil {
				return fmt.Errorf("%s: %w", n.name, err)
			}
		}
		return nil
	})
	t.Logf("3 nodes healthy %v after starting", time.Since(started).Round(10*time.Millisecond))

	// Subscribe every feed through n1; the owners of their shards poll
	// them.
	ids := subscribeFleet(t, feeds.URL, procFeeds, func(int) *servedNode { return nodes[0] })
	subscribed := time.Now()
	e2e.WaitFor(t, 45*time.Second, "every feed polled", func() error {
		for i := range procFeeds {
			if len(pub.Polls(i, subscribed)) < 2 {
				return fmt.Errorf("feed #%d polled %d times", i, len(pub.Polls(i, subscribed)))
			}
		}
		return nil
	})

	// A reading posted to n1 is in n2's feed of the sensor.
	resp, err := http.Post(nodes[0].url("/api/v1/sensors/lab-3/readings"), "application/json", strings.NewReader(`{"value": 17.625, "unit": "C"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST reading to n1: %s", resp.Status)
	}
	e2e.WaitFor(t, 5*time.Second, "the reading in n2's sensor feed", func() error {
		r, err := http.Get(nodes[1].url("/sensors/lab-3.json"))
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if !strings.Contains(string(body), "17.625") {
			return fmt.Errorf("%s: %s", r.Status, body)
		}
		return nil
	})

	// The victim: the node with the most feeds, as /api/v1/cluster says.
	// A shard can be between its release and its claim for a tick; each
	// node's feeds are what it says in its member key (written every
	// renewal): the feeds of its shards once it has loaded them.
	var st web.ClusterStatus
	e2e.WaitFor(t, 15*time.Second, "every shard owned and its feeds counted", func() error {
		st = web.ClusterStatus{}
		if err := nodes[1].getJSON("/api/v1/cluster", &st); err != nil {
			return err
		}
		if st.Unowned != 0 {
			return fmt.Errorf("%d shards unowned", st.Unowned)
		}
		for _, n := range st.Nodes {
			want := 0
			for _, id := range ids {
				if slices.Contains(n.ShardIDs, cluster.ShardOf(cluster.KindFeed, id, st.Shards)) {
					want++
				}
			}
			if n.Feeds != want {
				return fmt.Errorf("%s: %d feeds, its shards hold %d", n.Name, n.Feeds, want)
			}
		}
		if st.Feeds != len(ids) {
			return fmt.Errorf("%d feeds, want %d", st.Feeds, len(ids))
		}
		return nil
	})
	victim, most := -1, -1
	for _, n := range st.Nodes {
		for i := range nodes {
			if nodes[i].name == n.Name && n.Feeds > most {
				victim, most = i, n.Feeds
			}
		}
	}
	if st.Unowned != 0 || most <= 0 {
		t.Fatalf("before the kill: %+v", st)
	}
	dead := nodes[victim]
	var lost []int // feed indices of its shards
	for i, id := range ids {
		s := cluster.ShardOf(cluster.KindFeed, id, st.Shards)
		for _, n := range st.Nodes {
			if n.Name == dead.name && slices.Contains(n.ShardIDs, s) {
				lost = append(lost, i)
			}
		}
	}
	var survivors []*servedNode
	for i, n := range nodes {
		if i != victim {
			survivors = append(survivors, n)
		}
	}
	// The victim leads the items stream: a request to a stream leader
	// that dies waits out its caller's whole timeout, which /healthz
	// must not.
	if err := leadStream(ctx, "nats://"+clients[(victim+1)%3], sjs.ItemsStream, dead.name); err != nil {
		t.Logf("moving %s's leadership to %s: %v", sjs.ItemsStream, dead.name, err)
	}
	leaders, err := assetLeaders(ctx, "nats://"+clients[(victim+1)%3])
	if err != nil {
		t.Logf("asset leaders: %v", err)
	}
	routeErrs := make([]int, len(survivors))
	for i, n := range survivors {
		routeErrs[i] = n.count("connect to route")
	}
	if err := dead.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-dead.exited
	killed := time.Now()
	var led []string
	for asset, l := range leaders {
		if l == dead.name {
			led = append(led, asset)
		}
	}
	slices.Sort(led)
	t.Logf("killed %s (%d shards, %d feeds), leading %v (leaders: %v)", dead.name, len(lost), most, led, leaders)
	// Every survivor's /healthz, every 200 ms for 20 s after the kill:
	// an answer, 200 or 503, within procHealth.
	healthDone := make(chan struct{})
	var healthWorst time.Duration
	var health503 int
	go func() {
		defer close(healthDone)
		for time.Since(killed) < 20*time.Second {
			for _, n := range survivors {
				code, took, err := n.healthz()
				healthWorst = max(healthWorst, took)
				if code == http.StatusServiceUnavailable {
					health503++
				}
				if err != nil || took > procHealth {
					t.Errorf("%s at +%s: /healthz took %s (%d, %v), want ≤ %s", n.name, time.Since(killed).Round(time.Millisecond), took.Round(time.Millisecond), code, err, procHealth)
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { // before the nodes stop: what the survivors plan
		if !t.Failed() {
			return
		}
		for _, n := range survivors {
			var page web.FeedPage
			if err := n.getJSON("/api/v1/feeds?limit=1000", &page); err != nil {
				t.Logf("%s: %v", n.name, err)
				continue
			}
			for _, f := range page.Feeds {
				var sv web.ScheduleView
				_ = n.getJSON(fmt.Sprintf("/api/v1/feeds/%d/schedule", f.ID), &sv)
				t.Logf("%s: feed %d polls %d next %v mode %q median %v error %q", n.name, f.ID, f.Polls, f.NextFetch, sv.Mode, ptrVal(sv.MedianS), f.LastError)
			}
		}
	})

	reown := e2e.WaitFor(t, procReown+10*time.Second, "the dead node's shards owned again", func() error {
		for _, n := range survivors {
			var st web.ClusterStatus
			if err := n.getJSON("/api/v1/cluster", &st); err != nil {
				return err
			}
			if st.Unowned != 0 {
				return fmt.Errorf("%s: %d shards unowned", n.name, st.Unowned)
			}
			for _, m := range st.Nodes {
				if m.Name == dead.name && m.Shards > 0 {
					return fmt.Errorf("%s: %s holds %d shards", n.name, dead.name, m.Shards)
				}
			}
		}
		return nil
	})
	t.Logf("shards owned again %v after the kill", reown.Round(10*time.Millisecond))
	<-healthDone
	t.Logf("survivors' /healthz over 20 s after the kill: slowest %s, %d answers 503", healthWorst.Round(time.Millisecond), health503)
	for i, n := range survivors {
		t.Logf("%s: %d route-connect log lines in the 20 s after the kill", n.name, n.count("connect to route")-routeErrs[i])
	}
	if reown > procReown {
		t.Errorf("shards owned again %v after the kill, want ≤ %v", reown, procReown)
	}
	e2e.WaitFor(t, procReown+procPeriod+10*time.Second, "the dead node's feeds polled again", func() error {
		for _, i := range lost {
			if len(pub.Polls(i, killed)) == 0 {
				return fmt.Errorf("feed #%d not polled since the kill", i)
			}
		}
		return nil
	})
	// The longest wait between two polls of any feed, around the kill
	// (a feed whose writes failed during a re-election backs off).
	var gap time.Duration
	gapFeed := -1
	for i := range procFeeds {
		ps := pub.Polls(i, killed.Add(-procPeriod))
		for k := 1; k < len(ps); k++ {
			if d := ps[k].At.Sub(ps[k-1].At); d > gap {
				gap, gapFeed = d, i
			}
		}
	}
	t.Logf("longest gap between two polls of one feed since %s before the kill: %s (feed #%d)", procPeriod, gap.Round(10*time.Millisecond), gapFeed)
	for _, i := range lost {
		p := pub.Polls(i, killed)[0]
		t.Logf("feed #%d polled again by %s %v after the kill", i, p.Node, p.At.Sub(killed).Round(10*time.Millisecond))
		if p.Node == dead.name {
			t.Errorf("feed #%d polled by the dead node", i)
		}
		if d := p.At.Sub(killed); d > procReown+procPeriod {
			t.Errorf("feed #%d polled again %v after the kill, want ≤ %v", i, d, procReown+procPeriod)
		}
	}
	// What a survivor serves against what was published: every item
	// stored once, none missing that was published from the first poll
	// to the one before the last (the last may be under way).
	for i, id := range ids {
		var items []storage.Item
		if err := survivors[0].getJSON(fmt.Sprintf("/api/v1/feeds/%d/items?limit=1000", id), &items); err != nil {
			t.Fatal(err)
		}
		polls := pub.Polls(i, subscribed)
		for _, err := range pub.CheckStored(i, items, polls[0].At, polls[len(polls)-2].At) {
			t.Error(err)
		}
	}
}

func ptrVal(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}
