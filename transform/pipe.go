package transform

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/slogfeed/slogfeed/storage"
)

// Pipe is a transform chain as users write it: a DAG of operator nodes
// joined by edges, read from source nodes (slogfeed feeds, sensor feeds,
// other pipes' outputs) and republished as a feed.
//
//	{
//	  "name": "Regional temperature",
//	  "nodes": [
//	    {"id": "a", "op": "source", "config": {"feed": "sensor/lab-1"}},
//	    {"id": "b", "op": "source", "config": {"feed": "sensor/lab-2"}},
//	    {"id": "u", "op": "union"},
//	    {"id": "hot", "op": "filter", "config": {"rules": [{"field": "value", "op": "gt", "value": 25}]}},
//	    {"id": "mean", "op": "window", "config": {"stat": "mean", "size": 10}}
//	  ],
//	  "edges": [{"from": "a", "to": "u"}, {"from": "b", "to": "u"},
//	            {"from": "u", "to": "hot"}, {"from": "hot", "to": "mean"}],
//	  "output": {"from": "mean", "slug": "hot-mean", "title": "Hot readings, mean of 10"},
//	  "trigger": {"on": "update"}
//	}
type Pipe struct {
	// Name is what the UI shows (default: the output's title or slug).
	Name        string  `json:"name,omitempty"`
	Description string  `json:"description,omitempty"`
	Nodes       []Node  `json:"nodes"`
	Edges       []Edge  `json:"edges"`
	Output      Output  `json:"output"`
	Trigger     Trigger `json:"trigger"`
}

// Node is one operator of a pipe.
type Node struct {
	// ID names the node in edges and errors: letters, digits, '_' and
	// '-', at most 64 bytes.
	ID string `json:"id"`
	// Op is the operator's name in the catalogue.
	Op string `json:"op"`
	// Config is the operator's configuration (a JSON object).
	Config json.RawMessage `json:"config,omitempty"`
	// UI is where the chain builder drew the node; slogfeed keeps it and
	// ignores it.
	UI *NodeUI `json:"ui,omitempty"`
}

// NodeUI is a node's position in the chain builder.
type NodeUI struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// Edge sends the output of node From into node To. A node with several
// incoming edges gets their items as separate inputs, in the order the
// edges are listed.
type Edge struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Output says which node's items the pipe republishes, and as what.
type Output struct {
	// From is the node whose output is republished (default: the one
	// node that no edge leaves).
	From string `json:"from,omitempty"`
	// Slug names the republished feed: /feeds/{slug}.rss, .atom, .json.
	Slug  string `json:"slug"`
	Title string `json:"title,omitempty"`
	// Description is the feeds' description.
	Description string `json:"description,omitempty"`
	// Formats are the formats served (default all: "rss", "atom",
	// "json").
	Formats []string `json:"formats,omitempty"`
	// Retention bounds the items the output keeps (default 500 items).
	Retention storage.Retention `json:"retention,omitempty"`
	// Reduce is an optional PACK reduction policy applied to the items
	// beyond Retention instead of deleting them (see package
	// transform/pack).
	Reduce json.RawMessage `json:"reduce,omitempty"`
}

// Trigger says when a pipe runs.
type Trigger struct {
	// On is "update" (default: whenever an input gained items), "mdpt"
	// (as update, with the inputs tracked and polled the MDPT way, see
	// the package documentation), "cron" (on the schedule Cron) or
	// "manual" (only when asked through the API).
	On string `json:"on,omitempty"`
	// M is the number of inputs with new items that ends an "mdpt" round
	// (default: all of them).
	M int `json:"m,omitempty"`
	// Cron is a robfig/cron schedule ("*/5 * * * *", "@every 10m") for
	// "cron".
	Cron string `json:"cron,omitempty"`
}

// Trigger kinds.
const (
	OnUpdate = "update"
	OnMDPT   = "mdpt"
	OnCron   = "cron"
	OnManual = "manual"
)

// Formats a pipe can be republished as.
var Formats = []string{"rss", "atom", "json"}

// DefaultOutputItems is the retention of an output that sets none.
const DefaultOutputItems = 500

// MaxOutputItems bounds an output's retention.
const MaxOutputItems = 100000

var (
	nodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	// SlugPattern is what a pipe's output slug may look like.
	SlugPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
)

// Ref names a pipe's input: one of slogfeed's feeds.
type Ref struct {
	// Kind is "feed" (a subscribed feed by id), "sensor" (a sensor of the
	// sensor store by name), "pipe" (another pipe's output by slug) or
	// "url" (a subscribed feed by its URL).
	Kind string `json:"kind"`
	// Key is the id, name, slug or URL.
	Key string `json:"key"`
}

// String writes r as ParseRef reads it.
func (r Ref) String() string {
	if r.Kind == "url" {
		return r.Key
	}
	return r.Kind + "/" + r.Key
}

// ParseRef reads an input reference: "feed/12", "sensor/lab-1",
// "pipe/regional-mean", or the http(s) URL of a subscribed feed.
func ParseRef(s string) (Ref, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Ref{}, fmt.Errorf("empty feed reference: want feed/ID, sensor/NAME, pipe/SLUG or a feed URL")
	}
	if lower := strings.ToLower(s); strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" || len(s) > 2048 {
			return Ref{}, fmt.Errorf("%q is not a usable feed URL", truncate(s, 80))
		}
		scheme, rest, _ := strings.Cut(s, ":")
		return Ref{Kind: "url", Key: strings.ToLower(scheme) + ":" + rest}, nil // as a subscription stores it
	}
	kind, key, ok := strings.Cut(s, "/")
	if !ok || key == "" {
		return Ref{}, fmt.Errorf("%q is not a feed reference: want feed/ID, sensor/NAME, pipe/SLUG or a feed URL", truncate(s, 80))
	}
	switch kind {
	case "feed":
		if n, err := strconv.ParseUint(key, 10, 64); err != nil || n == 0 {
			return Ref{}, fmt.Errorf("feed/%s: want a feed id (a positive number)", truncate(key, 40))
		}
	case "sensor":
		if !regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`).MatchString(key) {
			return Ref{}, fmt.Errorf("sensor/%s: not a sensor name", truncate(key, 40))
		}
	case "pipe":
		if !SlugPattern.MatchString(key) {
			return Ref{}, fmt.Errorf("pipe/%s: not a pipe slug", truncate(key, 40))
		}
	default:
		return Ref{}, fmt.Errorf("%q: unknown kind of feed %q (want feed, sensor or pipe)", truncate(s, 80), truncate(kind, 20))
	}
	return Ref{Kind: kind, Key: key}, nil
}
