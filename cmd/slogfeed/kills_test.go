package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage/cluster"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/e2e"
	"github.com/slogfeed/slogfeed/web"
)

// The fleet of TestClusterKills.
const (
	killFeeds   = 60
	killPeriod  = 10 * time.Second
	killWatch   = 60 * time.Second // observed after each kill
	killHealthT = time.Second      // the bound on a survivor's /healthz
	killLeases  = "KV_" + "slogfeed_cluster"
)

// killCondition is which JetStream assets the killed node leads: meta
// says it leads the meta group (else it must not), streams are the
// streams and buckets it leads (all others are moved off it); all means
// every one.
type killCondition struct {
	name    string
	meta    bool
	streams []string
	all     bool
}

var killConditions = []killCondition{
	{name: "meta", meta: true},
	{name: "items", streams: []string{sjs.ItemsStream}},
	{name: "leases", streams: []string{killLeases}},
	{name: "plain"},
	{name: "meta+leases", meta: true, streams: []string{killLeases}},
	{name: "obs+defs", streams: []string{sjs.ObsStream, "KV_" + sjs.DefsBucket}},
	{name: "meta+all", meta: true, all: true},
	{name: "all", all: true},
}

// killResult is what one kill showed.
type killResult struct {
	Run        int      `json:"run"`
	Condition  string   `json:"condition"`
	Victim     string   `json:"victim"`
	Led        []string `json:"led"` // assets the victim led at the kill
	Shards     int      `json:"shards"`
	Feeds      int      `json:"feeds"`
	HealthMax  float64  `json:"healthz_max_s"`  // slowest survivor /healthz
	HealthSlow int      `json:"healthz_slow"`   // answers over killHealthT or failed
	Health503  int      `json:"healthz_503"`    // 503 answers
	Health503S float64  `json:"healthz_503_s"`  // last 503 after the kill
	OwnedS     float64  `json:"owned_s"`        // every shard owned again by survivors
	GapS       float64  `json:"gap_s"`          // longest gap of a feed's polls around the kill
	AfterS     float64  `json:"after_owned_s"`  // longest unpolled stretch of a feed after owned
	AfterFeed  int      `json:"after_feed"`     // its feed
	BaseGapS   float64  `json:"base_gap_s"`     // longest gap in the minute before the kill
	Unpolled   []int    `json:"unpolled_feeds"` // feeds unpolled > 2 periods after owned
}

// killCluster is three `serve --nats-embed` processes that can be killed
// and started again on their data.
type killCluster struct {
	t                     *testing.T
	bin, logDir           string
	names                 []string
	routes, clients, http []string
	dirs                  []string
	nodes                 []*servedNode
	logs                  []*os.File
}

func (c *killCluster) start(i int) {
	t := c.t
	var others []string
	for j := range c.names {
		if j != i {
			others = append(others, "nats://"+c.routes[j])
		}
	}
	n := &servedNode{name: c.names[i], addr: c.http[i], exited: make(chan struct{})}
	n.cmd = exec.Command(c.bin, "--log-level", "info", "serve",
		"--addr", c.http[i], "--data", c.dirs[i], "--node", c.names[i], "--allow", "127.0.0.0/8",
		"--nats-embed", "--nats-listen", c.clients[i], "--nats-cluster-listen", c.routes[i],
		"--nats-routes", strings.Join(others, ","), "--websub=false")
	stderr, err := n.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logf := c.logs[i]
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			n.mu.Lock()
			n.log = append(n.log, sc.Text())
			if logf != nil {
				fmt.Fprintln(logf, sc.Text())
			}
			n.mu.Unlock()
		}
		_ = n.cmd.Wait()
		close(n.exited)
	}()
	c.nodes[i] = n
}

// stop ends node i (SIGTERM, then SIGKILL after 15 s).
func (c *killCluster) stop(i int) {
	n := c.nodes[i]
	select {
	case <-n.exited:
		return
	default:
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(15 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.exited
	}
}

// metaLeader is the meta leader as node i's server last logged it.
func (c *killCluster) metaLeader(i int) string {
	n := c.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	for k := len(n.log) - 1; k >= 0; k-- {
		l := n.log[k]
		if strings.Contains(l, "Self is new JetStream cluster metadata leader") {
			return n.name
		}
		if _, rest, ok := strings.Cut(l, "JetStream cluster new metadata leader: "); ok {
			name, _, _ := strings.Cut(rest, "/")
			return name
		}
	}
	return ""
}

// status is node i's /api/v1/cluster.
func (c *killCluster) status(i int) (web.ClusterStatus, error) {
	var st web.ClusterStatus
	err := c.nodes[i].getJSON("/api/v1/cluster", &st)
	return st, err
}

// settled waits until every node is healthy, every shard is owned, every
// node owns some, and every feed was polled in the last two periods.
func (c *killCluster) settled(pub *e2e.Publisher, d time.Duration) {
	e2e.WaitFor(c.t, d, "a settled cluster", func() error {
		for i, n := range c.nodes {
			select {
			case <-n.exited:
				c.t.Fatalf("%s exited:\n%s", n.name, n.tail())
			default:
			}
			var h map[string]string
			if err := n.getJSON("/healthz", &h); err != nil {
				return fmt.Errorf("%s: %w", n.name, err)
			}
			st, err := c.status(i)
			if err != nil {
				return err
			}
			if st.Unowned != 0 {
				return fmt.Errorf("%s: %d shards unowned", n.name, st.Unowned)
			}
			for _, m := range st.Nodes {
				if m.Shards == 0 {
					return fmt.Errorf("%s: %s owns no shard", n.name, m.Name)
				}
			}
		}
		since := time.Now().Add(-2 * killPeriod)
		for f := range killFeeds {
			if len(pub.Polls(f, since)) == 0 {
				return fmt.Errorf("feed #%d not polled since %s", f, since.Format(time.TimeOnly))
			}
		}
		return nil
	})
}

// TestClusterKills is the failover harness: three `serve --nats-embed`
// processes over 60 loopback feeds of a 10 s period; each run sets up
// which JetStream assets one node leads (killConditions), SIGKILLs it and
// watches the survivors for a minute: /healthz every 200 ms on each, the
// time until every shard is owned again, and every feed's polls. Then it
// starts the node again on its data and waits for the cluster to settle.
// SLOGFEED_KILLS=N runs N kills (the conditions in turn from
// SLOGFEED_KILLS_FIRST); SLOGFEED_KILLS_LOG=DIR keeps the nodes' logs and
// one JSON line per kill there. Each kill takes about two minutes.
func TestClusterKills(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("SLOGFEED_KILLS"))
	if runs <= 0 {
		t.Skip("SLOGFEED_KILLS=N runs N kills of a 3-process cluster, two minutes each")
	}
	first, _ := strconv.Atoi(os.Getenv("SLOGFEED_KILLS_FIRST"))
	logDir := os.Getenv("SLOGFEED_KILLS_LOG")
	if logDir == "" {
		logDir = t.TempDir()
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	bin := filepath.Join(t.TempDir(), "slogfeed")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("build: %v", err)
	}
	pub := e2e.NewPublisher(time.Now().Truncate(time.Second), killFeeds, killPeriod, time.Second, 20)
	feeds := httptest.NewServer(pub)
	defer feeds.Close()

	c := &killCluster{t: t, bin: bin, logDir: logDir, names: []string{"n1", "n2", "n3"}}
	ports := freeAddrs(t, 9)
	for i := range c.names {
		c.routes = append(c.routes, ports[3*i])
		c.clients = append(c.clients, ports[3*i+1])
		c.http = append(c.http, ports[3*i+2])
		c.dirs = append(c.dirs, t.TempDir())
		f, err := os.Create(filepath.Join(logDir, c.names[i]+".log"))
		if err != nil {
			t.Fatal(err)
		}
		c.logs = append(c.logs, f)
	}
	c.nodes = make([]*servedNode, 3)
	for i := range c.names {
		c.start(i)
	}
	defer func() {
		for i := range c.nodes {
			c.stop(i)
			c.logs[i].Close()
		}
	}()
	// A node of a fresh cluster can fail to open the store while the
	// streams are being created (its info answered "not found"): it is
	// started again, as a supervisor would, at most twice.
	restarts := 0
	e2e.WaitFor(t, 90*time.Second, "every node healthy", func() error {
		for i, n := range c.nodes {
			select {
			case <-n.exited:
				if restarts == 2 {
					t.Fatalf("%s exited:\n%s", n.name, n.tail())
				}
				restarts++
				t.Logf("%s exited at start, starting it again: %s", n.name, n.tail()[max(0, len(n.tail())-300):])
				c.start(i)
				return fmt.Errorf("%s restarted", n.name)
			default:
			}
			var h map[string]string
			if err := n.getJSON("/healthz", &h); err != nil {
				return fmt.Errorf("%s: %w", n.name, err)
			}
		}
		return nil
	})
	ids := subscribeFleet(t, feeds.URL, killFeeds, func(i int) *servedNode { return c.nodes[i%3] })
	c.settled(pub, 90*time.Second)
	time.Sleep(3 * killPeriod) // the feeds' schedules learn the period

	results, err := os.OpenFile(filepath.Join(logDir, "kills.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer results.Close()
	var table []killResult
	for run := range runs {
		cond := killConditions[(first+run)%len(killConditions)]
		r := c.kill(ctx, run, cond, pub, ids)
		table = append(table, r)
		line, _ := json.Marshal(r)
		fmt.Fprintln(results, string(line))
		t.Logf("kill %d: %s", run, line)
		if run < runs-1 {
			c.settled(pub, 120*time.Second)
			time.Sleep(killPeriod)
		}
	}
	t.Logf("%-12s %-4s %-40s %9s %5s %5s %8s %8s %9s %9s", "condition", "node", "led", "healthz", "slow", "503", "owned", "gap", "after", "base")
	for _, r := range table {
		t.Logf("%-12s %-4s %-40s %8.3fs %5d %5d %7.1fs %7.1fs %8.1fs %8.1fs", r.Condition, r.Victim, strings.Join(r.Led, ","), r.HealthMax, r.HealthSlow, r.Health503, r.OwnedS, r.GapS, r.AfterS, r.BaseGapS)
	}
	for _, r := range table {
		if r.HealthSlow > 0 {
			t.Errorf("kill %d (%s): %d survivor /healthz answers over %s or failed, slowest %.3fs", r.Run, r.Condition, r.HealthSlow, killHealthT, r.HealthMax)
		}
		if len(r.Unpolled) > 0 {
			t.Errorf("kill %d (%s): feeds %v unpolled for more than two periods after the shards were owned (longest %.1fs, feed #%d)", r.Run, r.Condition, r.Unpolled, r.AfterS, r.AfterFeed)
		}
		if r.OwnedS > procReown.Seconds() {
			t.Errorf("kill %d (%s): shards owned again %.1fs after the kill, want ≤ %s", r.Run, r.Condition, r.OwnedS, procReown)
		}
	}
}

// kill sets up cond, kills its node, watches the survivors for
// killWatch and starts the node again.
func (c *killCluster) kill(ctx context.Context, run int, cond killCondition, pub *e2e.Publisher, ids []uint64) killResult {
	t := c.t
	url := func(i int) string { return "nats://" + c.clients[i] }
	meta := c.metaLeader(0)
	victim := -1
	for i, n := range c.names {
		if (n == meta) == cond.meta {
			victim = i
			if !cond.meta && run%2 == 1 { // alternate between the two others
				continue
			}
			break
		}
	}
	if victim < 0 {
		t.Fatalf("no node for condition %s (meta leader %q)", cond.name, meta)
	}
	other := (victim + 1) % 3
	if c.names[other] == meta {
		other = (victim + 2) % 3
	}
	leaders, err := assetLeaders(ctx, url(other))
	if err != nil {
		t.Fatalf("stream leaders: %v", err)
	}
	delete(leaders, "meta") // moved by choosing the victim, not by step-downs
	for s, l := range leaders {
		want := cond.all || slices.Contains(cond.streams, s)
		switch {
		case want && l != c.names[victim]:
			err = leadStream(ctx, url(other), s, c.names[victim])
		case !want && l == c.names[victim]:
			err = leadStream(ctx, url(other), s, c.names[other])
		}
		if err != nil {
			t.Logf("moving %s's leader: %v", s, err)
		}
	}
	leaders, err = assetLeaders(ctx, url(other))
	if err != nil {
		t.Fatalf("stream leaders: %v", err)
	}
	leaders["meta"] = c.metaLeader(other) // as the server's log has it
	dead := c.nodes[victim]
	r := killResult{Run: run, Condition: cond.name, Victim: dead.name, AfterFeed: -1}
	for a, l := range leaders {
		if l == dead.name {
			r.Led = append(r.Led, a)
		}
	}
	slices.Sort(r.Led)
	st, err := c.status(other)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Nodes {
		if m.Name == dead.name {
			r.Shards, r.Feeds = m.Shards, m.Feeds
		}
	}
	var survivors []int
	for i := range c.nodes {
		if i != victim {
			survivors = append(survivors, i)
		}
	}
	t.Logf("kill %d (%s): %s leads %v, owns %d shards (%d feeds); leaders %v", run, cond.name, dead.name, r.Led, r.Shards, r.Feeds, leaders)
	for _, i := range survivors {
		fmt.Fprintf(c.logs[i], "=== kill %d (%s): %s at %s\n", run, cond.name, dead.name, time.Now().UTC().Format(time.RFC3339Nano))
	}

	if err := dead.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-dead.exited
	killed := time.Now()

	// /healthz on each survivor every 200 ms.
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, i := range survivors {
		n := c.nodes[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(killed) < killWatch {
				code, took, err := n.healthz()
				at := time.Since(killed)
				mu.Lock()
				r.HealthMax = max(r.HealthMax, took.Seconds())
				if err != nil || took > killHealthT {
					r.HealthSlow++
					t.Logf("kill %d: %s /healthz at +%s took %s (%d, %v)", run, n.name, at.Round(time.Millisecond), took.Round(time.Millisecond), code, err)
				}
				if code == http.StatusServiceUnavailable {
					r.Health503++
					r.Health503S = at.Seconds()
				}
				mu.Unlock()
				time.Sleep(200 * time.Millisecond)
			}
		}()
	}
	// Owned again: every survivor sees no unowned shard and none held
	// by the dead node.
	owned := time.Duration(-1)
	for time.Since(killed) < killWatch {
		ok := true
		for _, i := range survivors {
			st, err := c.status(i)
			if err != nil || st.Unowned != 0 {
				ok = false
				break
			}
			for _, m := range st.Nodes {
				if m.Name == dead.name && m.Shards > 0 {
					ok = false
				}
			}
		}
		if ok {
			owned = time.Since(killed)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	end := time.Now()
	if owned < 0 {
		r.OwnedS = killWatch.Seconds()
		owned = killWatch
	} else {
		r.OwnedS = owned.Seconds()
	}
	ownedAt := killed.Add(owned)
	for f := range killFeeds {
		ps := pub.Polls(f, killed.Add(-killWatch))
		var at []time.Time
		for _, p := range ps {
			if !p.At.After(end) {
				at = append(at, p.At)
			}
		}
		for k := 1; k < len(at); k++ {
			d := at[k].Sub(at[k-1]).Seconds()
			if at[k].Before(killed) {
				r.BaseGapS = max(r.BaseGapS, d)
			} else {
				r.GapS = max(r.GapS, d)
			}
		}
		// The longest stretch after ownedAt without a poll: from ownedAt
		// to the first poll, between polls, and from the last to the end.
		prev := ownedAt
		longest := 0.0
		for _, a := range at {
			if a.After(ownedAt) {
				longest = max(longest, a.Sub(prev).Seconds())
				prev = a
			}
		}
		longest = max(longest, end.Sub(prev).Seconds())
		if longest > r.AfterS {
			r.AfterS, r.AfterFeed = longest, f
		}
		if longest > (2 * killPeriod).Seconds() {
			r.Unpolled = append(r.Unpolled, f)
			shard := -1
			if st, err := c.status(survivors[0]); err == nil {
				shard = cluster.ShardOf(cluster.KindFeed, ids[f], st.Shards)
			}
			var seq []string
			for _, p := range ps {
				seq = append(seq, fmt.Sprintf("%+.1fs@%s", p.At.Sub(killed).Seconds(), p.Node))
			}
			t.Logf("kill %d: feed #%d (id %d, shard %d) unpolled %.1fs after owned (+%.1fs); polls: %s", run, f, ids[f], shard, longest, owned.Seconds(), strings.Join(seq, " "))
		}
	}
	if len(r.Unpolled) > 0 || r.HealthSlow > 0 {
		// Keep what the survivors plan for the feeds, and their goroutines.
		for _, i := range survivors {
			var page web.FeedPage
			if err := c.nodes[i].getJSON("/api/v1/feeds?limit=1000", &page); err == nil {
				for _, f := range page.Feeds {
					fmt.Fprintf(c.logs[i], "=== feed %d polls %d next %v error %q\n", f.ID, f.Polls, f.NextFetch, f.LastError)
				}
			}
		}
	}
	c.start(victim)
	return r
}
