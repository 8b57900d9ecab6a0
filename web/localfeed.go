package web

import (
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// LocalFeeds returns the mapping runner.Options.Local wants: the feed a
// URL names when it is one of this server's pipe documents
// (/feeds/SLUG.rss, .atom or .json: pipe/SLUG) or sensor documents
// (/sensors/NAME.…: sensor/NAME) under one of bases, the URLs the server
// is reached at (its public URL, the address it listens on). A base on a
// loopback or unspecified address stands for every loopback name of its
// port (127.0.0.0/8, ::1, localhost).
func LocalFeeds(bases ...string) func(rawURL string) (transform.Ref, bool) {
	var roots []origin
	for _, b := range bases {
		if o, ok := originOf(b); ok {
			roots = append(roots, o)
		}
	}
	return func(raw string) (transform.Ref, bool) {
		o, ok := originOf(raw)
		if !ok {
			return transform.Ref{}, false
		}
		for _, root := range roots {
			if !root.serves(o) {
				continue
			}
			rest, ok := strings.CutPrefix(o.path, root.path)
			if !ok {
				continue
			}
			for prefix, kind := range map[string]string{"/feeds/": "pipe", "/sensors/": "sensor"} {
				name, ok := strings.CutPrefix(rest, prefix)
				if !ok {
					continue
				}
				for _, ext := range []string{".rss", ".atom", ".json"} {
					if key, ok := strings.CutSuffix(name, ext); ok && key != "" && !strings.Contains(key, "/") {
						ref, err := transform.ParseRef(kind + "/" + key)
						return ref, err == nil
					}
				}
			}
		}
		return transform.Ref{}, false
	}
}

// origin is a URL's scheme, host, port and path, compared by LocalFeeds.
type origin struct {
	scheme, host, port, path string
	loopback                 bool // the host is a loopback or unspecified address, or localhost
}

func originOf(raw string) (origin, bool) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return origin{}, false
	}
	// The path as the server routes it: decoded, its dot segments and
	// doubled slashes resolved; the port as a number.
	o := origin{scheme: u.Scheme, host: strings.ToLower(strings.TrimSuffix(u.Hostname(), ".")), port: u.Port(), path: path.Clean("/" + u.Path)}
	if o.port == "" {
		o.port = map[string]string{"http": "80", "https": "443"}[o.scheme]
	} else if n, err := strconv.ParseUint(o.port, 10, 16); err == nil {
		o.port = strconv.FormatUint(n, 10)
	}
	o.path = strings.TrimRight(o.path, "/")
	if a, err := netip.ParseAddr(o.host); err == nil {
		o.loopback = a.Unmap().IsLoopback() || a.IsUnspecified()
	} else {
		o.loopback = o.host == "localhost" || strings.HasSuffix(o.host, ".localhost")
	}
	return o, true
}

// serves reports whether a request for o reaches the server at root.
func (root origin) serves(o origin) bool {
	if root.scheme != o.scheme || root.port != o.port {
		return false
	}
	if root.loopback {
		return o.loopback
	}
	return root.host == o.host
}

// pipeFeedIRI returns the permanent id of a pipe's output feed f under
// the tag authority authority: a tag URI of it and the day the feed was
// created, or a URN without an authority. Entries' ids are it, ":" and
// the item's id (publish.EntryID).
func pipeFeedIRI(authority string) func(f storage.Feed) string {
	return func(f storage.Feed) string {
		return tagID(authority, f, "pipe", "feeds/"+f.Slug)
	}
}
