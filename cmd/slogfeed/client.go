package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/slogfeed/slogfeed/reader/opml"
	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/web"
)

// clientSettings is the configuration table of the commands that talk to a
// running `slogfeed serve` (add, list, remove, show, import, export,
// cluster):
//
//	flag       environment variable  default                 meaning
//	--server   SLOGFEED_SERVER       http://127.0.0.1:8080   the running slogfeed's base URL
//	--token    SLOGFEED_TOKEN        (none)                  bearer token for changes
func clientSettings() []setting {
	return []setting{
		{Name: "server", Env: "SLOGFEED_SERVER", Default: "http://127.0.0.1:8080", Doc: "base `URL` of the running slogfeed", Check: func(s string) error {
			u, err := url.Parse(s)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return errors.New("want an http(s) URL such as http://127.0.0.1:8080")
			}
			if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#") {
				return errors.New("want an http(s) URL without a query or a fragment, such as http://127.0.0.1:8080")
			}
			return nil
		}},
		{Name: "token", Env: "SLOGFEED_TOKEN", Default: "", Doc: "bearer `TOKEN` for changes"},
	}
}

// client is a small JSON client for the API.
type client struct {
	base, token string
	http        *http.Client
}

// The largest answers the client reads: a JSON answer, and a raw one (an
// export's OPML, about 150 bytes a feed).
const (
	maxJSONAnswer = 64 << 20
	maxRawAnswer  = 1 << 30
)

// do sends a request and decodes a JSON answer into out (when not nil; a
// *[]byte takes the answer as it is).
func (c *client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.base, "/")+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	server := sanitize.RedactURL(c.base)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach slogfeed at %s (is `slogfeed serve` running?): %w", server, err)
	}
	defer resp.Body.Close()
	most := int64(maxJSONAnswer)
	raw, isRaw := out.(*[]byte)
	if isRaw {
		most = maxRawAnswer
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, most+1))
	if err != nil {
		return fmt.Errorf("reading the answer of %s: %w", server, err)
	}
	if int64(len(data)) > most {
		return fmt.Errorf("the answer of %s to %s %s is over %d MiB: not read", server, method, path, most>>20)
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			if resp.StatusCode == http.StatusUnauthorized {
				return fmt.Errorf("%s (give the server's token with --token or SLOGFEED_TOKEN)", e.Error)
			}
			return fmt.Errorf("%s", e.Error)
		}
		return fmt.Errorf("server answered %s", resp.Status)
	}
	if isRaw {
		*raw = data
		return nil
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s did not answer %s %s as slogfeed does (%s, %q…: %v): is it a slogfeed of this version?",
				server, method, path, cmp.Or(resp.Header.Get("Content-Type"), "no Content-Type"), oneLine(string(data[:min(len(data), 40)])), err)
		}
	}
	return nil
}

// clientCommand parses the common flags plus extra ones and returns the
// client and the positional arguments.
func clientCommand(a *app, name string, args []string, extra func(fs *flag.FlagSet)) (*client, []string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	b := bindSettings(fs, clientSettings())
	if extra != nil {
		extra(fs)
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			if c, ok := lookupCommand(name); ok {
				c.usage(a.stdout, a)
			}
			return nil, nil, flag.ErrHelp
		}
		return nil, nil, &usageError{msg: err.Error(), cmd: name}
	}
	v, err := b.resolve(a.getenv)
	if err != nil {
		return nil, nil, err
	}
	return &client{base: v["server"], token: v["token"], http: &http.Client{Timeout: 30 * time.Second}}, pos, nil
}

// addFlags are the flags of add.
type addFlags struct {
	policy, title, source, sourceConfig, sleep string
	weight                                     float64
}

func (o *addFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.policy, "policy", "", "scheduling `POLICY` (default auto)")
	fs.StringVar(&o.title, "title", "", "`TITLE` to show instead of the feed's own")
	fs.Float64Var(&o.weight, "weight", 0, "priority `WEIGHT` under a fetch budget (default 1)")
	fs.StringVar(&o.source, "source", "", "source adapter `TYPE` for data that is not a feed: json, csv, ulb (docs/plugins.md)")
	fs.StringVar(&o.sourceConfig, "source-config", "", "the source adapter's configuration, as `JSON`")
	fs.StringVar(&o.sleep, "sleep", "", "never poll in these `WINDOWS`: daily HH:MM-HH:MM (UTC) or START/END (RFC 3339), comma-separated")
}

func runAdd(ctx context.Context, a *app, args []string) error {
	var o addFlags
	c, pos, err := clientCommand(a, "add", args, o.bind)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return &usageError{msg: "add takes one feed URL", cmd: "add"}
	}
	if math.IsNaN(o.weight) || math.IsInf(o.weight, 0) || o.weight < 0 {
		return &usageError{msg: "--weight must be a positive number (default 1)", cmd: "add"}
	}
	if err := checkPolicyFlag(o.policy, "add"); err != nil {
		return err
	}
	req := map[string]any{"url": pos[0], "policy": o.policy, "title": o.title, "weight": o.weight}
	if o.sleep != "" {
		// Checked here too, so that a typo is a usage error before any
		// request.
		if _, err := schedule.ParseSleep(o.sleep); err != nil {
			return &usageError{msg: "--sleep: " + err.Error(), cmd: "add"}
		}
		req["sleep"] = o.sleep
	}
	switch {
	case o.source != "":
		spec := map[string]any{"type": o.source}
		if o.sourceConfig != "" {
			if !json.Valid([]byte(o.sourceConfig)) {
				return &usageError{msg: "--source-config is not valid JSON", cmd: "add"}
			}
			spec["config"] = json.RawMessage(o.sourceConfig)
		}
		req["source"] = spec
	case o.sourceConfig != "":
		return &usageError{msg: "--source-config needs --source", cmd: "add"}
	}
	var f web.FeedView
	if err := c.do(ctx, http.MethodPost, "/api/v1/feeds", req, &f); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "%d\t%s\t%s\n", f.ID, f.Policy, f.URL)
	return nil
}

// listFlags are the flags of list.
type listFlags struct {
	limit                        int
	all                          bool
	text, status, policy, cursor string
	kind, before                 string
	json                         bool
}

func (o *listFlags) bind(fs *flag.FlagSet) {
	fs.IntVar(&o.limit, "limit", 100, "`N` feeds a page, 1 to 1000")
	fs.BoolVar(&o.all, "all", false, "list every page, not just one")
	fs.BoolVar(&o.json, "json", false, "print each feed as one line of JSON (the API's feed object), the paging hints on standard error")
	fs.StringVar(&o.text, "q", "", "only feeds whose title, slug or URL holds `TEXT`")
	fs.StringVar(&o.kind, "kind", "", "only feeds of `KIND`: remote, sensor or pipe")
	fs.StringVar(&o.status, "status", "", "only feeds of `STATUS`: erroring or starved")
	fs.StringVar(&o.policy, "policy", "", "only feeds with scheduling `POLICY`")
	fs.StringVar(&o.cursor, "cursor", "", "start at the page `CURSOR` a previous list printed")
	fs.StringVar(&o.before, "before", "", "list the page before another: the `CURSOR` a list printed for its previous page")
}

// checkPolicyFlag checks the --policy of a new subscription of command
// cmd as the server does: a usage error names what is wrong.
func checkPolicyFlag(policy, cmd string) error {
	if policy == "" {
		return nil
	}
	if err := schedule.CheckNewPolicy(policy); err != nil {
		return &usageError{msg: "--policy: " + strings.TrimPrefix(err.Error(), "schedule: "), cmd: cmd}
	}
	return nil
}

func runList(ctx context.Context, a *app, args []string) error {
	var o listFlags
	c, pos, err := clientCommand(a, "list", args, o.bind)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return &usageError{msg: "list takes no arguments", cmd: "list"}
	}
	if o.limit < 1 || o.limit > 1000 {
		return &usageError{msg: "--limit must be from 1 to 1000", cmd: "list"}
	}
	switch o.kind {
	case "", "remote", "sensor", "pipe":
	default:
		return &usageError{msg: "--kind must be remote, sensor or pipe, not " + quoteArg(o.kind), cmd: "list"}
	}
	switch o.status {
	case "", "erroring", "starved":
	default:
		return &usageError{msg: "--status must be erroring or starved, not " + quoteArg(o.status), cmd: "list"}
	}
	if o.before != "" && (o.cursor != "" || o.all) {
		return &usageError{msg: "--before lists one page: give it without --cursor and --all", cmd: "list"}
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	hints := a.stdout
	enc := json.NewEncoder(a.stdout)
	if o.json {
		hints = a.stderr
	} else {
		fmt.Fprintln(tw, "ID\tPOLICY\tPOLLS\tHIT%\tMEDIAN LAT\tNEXT FETCH\tFEED\tERROR")
	}
	shown := 0
	for {
		q := url.Values{}
		q.Set("limit", strconv.Itoa(o.limit))
		for k, v := range map[string]string{"q": o.text, "status": o.status, "policy": o.policy, "kind": o.kind, "cursor": o.cursor, "before": o.before} {
			if v != "" {
				q.Set(k, v)
			}
		}
		var page web.FeedPage
		if err := c.do(ctx, http.MethodGet, "/api/v1/feeds?"+q.Encode(), nil, &page); err != nil {
			return err
		}
		for _, f := range page.Feeds {
			if o.json {
				if err := enc.Encode(f); err != nil {
					return fmt.Errorf("writing the output: %w", err)
				}
				continue
			}
			lat, next := "-", "-"
			if f.MedianLatencyS != nil {
				lat = fmt.Sprintf("%.1fs", *f.MedianLatencyS)
			}
			if f.NextFetch != nil {
				next = clockTime(*f.NextFetch, time.Now())
			}
			name := f.URL
			if f.Title != "" {
				name = f.Title
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%.0f\t%s\t%s\t%s\t%s\n", f.ID, cmp.Or(f.Policy, "-"), f.Polls, f.HitPct, lat, next, oneLine(name), oneLine(f.LastError))
		}
		shown += len(page.Feeds)
		o.cursor, o.before = page.NextCursor, ""
		if !o.all || o.cursor == "" {
			if err := tw.Flush(); err != nil {
				return err
			}
			// How to ask for the pages beside this one, with the same
			// filters and page size.
			again := "slogfeed list"
			if o.limit != 100 {
				again += " --limit " + strconv.Itoa(o.limit)
			}
			if o.json {
				again += " --json"
			}
			for _, fl := range [][2]string{{"-q", o.text}, {"--kind", o.kind}, {"--status", o.status}, {"--policy", o.policy}} {
				if fl[1] != "" {
					again += " " + fl[0] + " " + shellArg(fl[1])
				}
			}
			if o.cursor != "" {
				fmt.Fprintf(hints, "%d of %d feeds; the next page: %s --cursor %s (or --all)\n", shown, page.Total, again, shellArg(o.cursor))
			}
			if page.PrevCursor != "" && !o.all {
				fmt.Fprintf(hints, "the previous page: %s --before %s\n", again, shellArg(page.PrevCursor))
			}
			return nil
		}
	}
}

func feedID(cmd string, pos []string) (uint64, error) {
	if len(pos) != 1 {
		return 0, &usageError{msg: cmd + " takes one feed ID (see slogfeed list)", cmd: cmd}
	}
	id, err := strconv.ParseUint(pos[0], 10, 64)
	if err != nil || id == 0 {
		return 0, &usageError{msg: "feed ID must be a whole number from 1 (see slogfeed list): " + quoteArg(pos[0]), cmd: cmd}
	}
	return id, nil
}

func runRemove(ctx context.Context, a *app, args []string) error {
	c, pos, err := clientCommand(a, "remove", args, nil)
	if err != nil {
		return err
	}
	id, err := feedID("remove", pos)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, fmt.Sprintf("/api/v1/feeds/%d", id), nil, nil)
}

func runShow(ctx context.Context, a *app, args []string) error {
	c, pos, err := clientCommand(a, "show", args, nil)
	if err != nil {
		return err
	}
	id, err := feedID("show", pos)
	if err != nil {
		return err
	}
	var f web.FeedView
	if err := c.do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/feeds/%d", id), nil, &f); err != nil {
		return err
	}
	var s web.ScheduleView
	if err := c.do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/feeds/%d/schedule?polls=20", id), nil, &s); err != nil {
		return err
	}
	sec := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%.3fs", *p)
	}
	w := a.stdout
	fmt.Fprintf(w, "feed %d  %s\n", f.ID, oneLine(f.Title))
	switch {
	case f.URL != "":
		fmt.Fprintf(w, "  url      %s\n", f.URL)
	case f.Kind == "pipe":
		fmt.Fprintf(w, "  output   of pipe %q, republished at /feeds/%s.rss (.atom, .json)\n", f.Slug, f.Slug)
	case f.Kind == "sensor":
		fmt.Fprintf(w, "  sensor   %q, posted here, published at /sensors/%s.rss (.atom, .json)\n", f.Slug, f.Slug)
	}
	fmt.Fprintf(w, "  policy   %s   mode %s\n  period   %s   spread %s", orDash(s.Policy), orDash(s.Mode), sec(s.MedianS), sec(s.SigmaS))
	if s.BimodalMedianS != nil {
		fmt.Fprintf(w, "   long period %s", sec(s.BimodalMedianS))
	}
	fmt.Fprintf(w, "\n  polls    %d   hits %d (%.1f%%)   median latency %s\n", f.Polls, f.Hits, f.HitPct, sec(f.MedianLatencyS))
	if s.NextFetch != nil {
		fmt.Fprintf(w, "  next     %s\n", s.NextFetch.Local().Format(time.RFC3339))
	}
	if s.SleepText != "" || s.LearnedSleep != "" {
		fmt.Fprintf(w, "  sleep    %s   learned %s (UTC)\n", orDash(oneLine(s.SleepText)), orDash(s.LearnedSleep))
	}
	if f.LastError != "" {
		fmt.Fprintf(w, "  error    %s (%d in a row)\n", oneLine(f.LastError), f.ErrorCount)
	}
	fmt.Fprintln(w, "  recent polls:")
	for _, p := range s.RecentPolls {
		what := "miss"
		if p.Hit {
			what = fmt.Sprintf("hit  %d new", p.NewItems)
		}
		if p.Error != "" {
			what = "error " + oneLine(p.Error)
		}
		lat := ""
		if len(p.LatencyS) > 0 {
			lat = fmt.Sprintf("  latency %.2fs", p.LatencyS[len(p.LatencyS)-1])
		}
		fmt.Fprintf(w, "    %s  %s%s\n", p.At.Local().Format("15:04:05.000"), what, lat)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// importFlags are the flags of import.
type importFlags struct{ policy string }

func (o *importFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.policy, "policy", "", "scheduling `POLICY` for imported feeds whose outline names none (default auto)")
}

func runImport(ctx context.Context, a *app, args []string) error {
	var opt importFlags
	c, pos, err := clientCommand(a, "import", args, opt.bind)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return &usageError{msg: "import takes one OPML file (- for standard input)", cmd: "import"}
	}
	if err := checkPolicyFlag(opt.policy, "import"); err != nil {
		return err
	}
	var r io.Reader = os.Stdin
	if pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	outlines, perr := opml.Parse(r)
	if perr != nil && len(outlines) == 0 {
		return perr
	}
	var errs []error
	if perr != nil {
		errs = append(errs, perr)
	}
	// Settings the file gave that cannot be used are left out, each said
	// on standard error; the outline imports with the rest. Outlines
	// repeating a feed URL of the file are counted, not sent.
	ignored, dups := 0, 0
	for _, o := range outlines {
		for _, ig := range o.Ignored {
			ignored++
			fmt.Fprintf(a.stderr, "import: warning: %s (%s): %s ignored\n", sanitize.RedactURL(o.URL), o.Name(), ig)
		}
		dups += o.Duplicates
	}
	total := len(outlines) + dups
	// In chunks through the bulk route: the server subscribes a chunk's
	// feeds side by side and spreads their first fetches.
	added, skipped, failed, seen := 0, 0, 0, 0
	for start := 0; start < len(outlines); start += importChunk {
		chunk := outlines[start:min(start+importChunk, len(outlines))]
		req := struct {
			Feeds []map[string]any `json:"feeds"`
		}{Feeds: make([]map[string]any, 0, len(chunk))}
		for _, o := range chunk {
			f := o.Feed(opt.policy) // with the settings a slogfeed export keeps
			fr := map[string]any{
				"url": f.URL, "title": f.Title, "category": f.Category, "policy": f.Policy, "weight": f.Weight,
				"ignore_cache": f.IgnoreCache, "retention": f.Retention, "extract": f.Extract, "source": f.Source,
				"sleep": f.Sleep.SleepText(),
			}
			if len(f.Reduce) > 0 {
				fr["reduce"] = f.Reduce
			}
			req.Feeds = append(req.Feeds, fr)
		}
		var res web.BulkResponse
		if err := c.do(ctx, http.MethodPost, "/api/v1/feeds/bulk", req, &res); err != nil {
			return errors.Join(append(errs, fmt.Errorf("after %d of %d outlines: %w", start, len(outlines), err))...)
		}
		for i, r := range res.Results {
			switch {
			case r.ID != 0:
				added++
			case r.Reason == web.ReasonDuplicate:
				skipped++
			default:
				failed++
				errs = append(errs, fmt.Errorf("%s: %s: %s", sanitize.RedactURL(chunk[min(i, len(chunk)-1)].URL), r.Reason, r.Error))
			}
		}
		for _, o := range chunk {
			seen += 1 + o.Duplicates
		}
		fmt.Fprintf(a.progress, "import: %d of %d outlines: %d subscribed, %d already subscribed, %d refused\n",
			seen, total, added, skipped, failed)
	}
	left := ""
	if dups > 0 {
		left += fmt.Sprintf(", %d duplicates in the file", dups)
	}
	if ignored > 0 {
		left += fmt.Sprintf("; %d settings ignored, listed above", ignored)
	}
	if perr != nil {
		left += "; outlines left out of the file, listed below"
	}
	fmt.Fprintf(a.stdout, "imported %d feed%s, %d already subscribed, %d refused%s\n", added, plural(added), skipped, failed, left)
	return errors.Join(errs...)
}

// importChunk is how many outlines `slogfeed import` sends a request.
const importChunk = 1000

func runExport(ctx context.Context, a *app, args []string) error {
	c, pos, err := clientCommand(a, "export", args, nil)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return &usageError{msg: "export takes no arguments; it writes OPML to standard output", cmd: "export"}
	}
	// The server's export keeps the credentials of feed URLs, which the
	// feed list masks; it needs the token of a token-protected server.
	var doc []byte
	if err := c.do(ctx, http.MethodGet, "/api/v1/opml", nil, &doc); err != nil {
		return err
	}
	_, err = a.stdout.Write(doc)
	return err
}

func clientUsage(name, args, what string, bind func(fs *flag.FlagSet)) func(w io.Writer, a *app) {
	return func(w io.Writer, a *app) {
		synopsis := "slogfeed " + name + " [flags]"
		if args != "" {
			synopsis += " " + args
		}
		fmt.Fprintf(w, "Usage:\n  %s\n\n%s\nIt talks to the running `slogfeed serve` (--server, SLOGFEED_SERVER).\n\nFlags:\n", synopsis, what)
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		if bind != nil {
			bind(fs)
		}
		bindSettings(fs, clientSettings())
		writeFlagHelp(w, fs, [2]string{"-h, --help", "show this help"})
	}
}

func runCluster(ctx context.Context, a *app, args []string) error {
	c, pos, err := clientCommand(a, "cluster", args, nil)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return &usageError{msg: "cluster takes no arguments", cmd: "cluster"}
	}
	var st web.ClusterStatus
	if err := c.do(ctx, http.MethodGet, "/api/v1/cluster", nil, &st); err != nil {
		return err
	}
	writeCluster(a.stdout, st)
	return nil
}

// writeCluster prints GET /api/v1/cluster as a table, one row per node,
// and a summary line.
func writeCluster(w io.Writer, st web.ClusterStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tADDR\tSHARDS\tFEEDS\tLIVE\tLAST SEEN")
	for _, n := range st.Nodes {
		addr, seen, live := n.Addr, "-", "no"
		if addr == "" {
			addr = "-"
		}
		if !n.LastSeen.IsZero() {
			seen = n.LastSeen.UTC().Format(time.RFC3339)
		}
		if n.Live {
			live = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", oneLine(n.Name), oneLine(addr), n.Shards, n.Feeds, live, seen)
	}
	_ = tw.Flush()
	if st.Mode == web.ModeSingle {
		fmt.Fprintf(w, "single node (no cluster): %d feeds\n", st.Feeds)
	} else {
		fmt.Fprintf(w, "%d shards, %d unowned (%d feeds not polled now), %d feeds, lease TTL %gs\n",
			st.Shards, st.Unowned, st.UnownedFeeds, st.Feeds, st.LeaseTTLS)
	}
	if n := st.ThisNode; n != nil {
		fmt.Fprintf(w, "this node (%s) polls %d feeds%s\n", oneLine(n.Name), n.Polled, shardChange(n))
	}
	if st.Warning != "" {
		fmt.Fprintf(w, "warning: %s\n", oneLine(st.Warning))
	}
}

// shardChange says how far the answering node has loaded the last change
// of its shards ("" when it saw none: a single node).
func shardChange(n *web.ThisNode) string {
	var b strings.Builder
	switch {
	case n.Loading && n.Changed.IsZero():
		b.WriteString("; loading its shards' feeds")
	case n.Loading:
		fmt.Fprintf(&b, "; loading the change of its shards seen %s: %d feeds pending, %d taken, %d dropped so far",
			n.Changed.UTC().Format(time.RFC3339), n.Pending, n.Taken, n.Lost)
		if n.Deferred > 0 {
			fmt.Fprintf(&b, ", %d scheduled from their shards' digests with their records still to read", n.Deferred)
		}
	case !n.Changed.IsZero():
		fmt.Fprintf(&b, "; the last change of its shards (seen %s) was loaded in %v: %d feeds taken, %d dropped",
			n.Changed.UTC().Format(time.RFC3339), time.Duration(n.LoadS*float64(time.Second)).Round(time.Millisecond), n.Taken, n.Lost)
	}
	if n.Failed > 0 {
		fmt.Fprintf(&b, "; %d feeds of its shards cannot be scheduled (see its log)", n.Failed)
	}
	if n.Parked > 0 {
		fmt.Fprintf(&b, "; %d feeds parked (their shards' leases lapsed: not fetched until renewed)", n.Parked)
	}
	return b.String()
}

// clockTime writes t in local time for a table read at now: the time of
// day when t is within 12 hours of now, else the date too, so that a
// fetch two days away does not read as one overdue.
func clockTime(t, now time.Time) string {
	t = t.In(now.Location())
	if d := t.Sub(now); d < 12*time.Hour && d > -12*time.Hour {
		return t.Format("15:04:05")
	}
	if t.Year() != now.Year() {
		return t.Format("2006-01-02 15:04")
	}
	return t.Format("Jan 2 15:04")
}

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
