package parser

import (
	"bytes"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/mmcdole/gofeed/atom"
	"github.com/mmcdole/gofeed/rss"
)

// Links a document advertises: WebSub hubs and its self link (see
// Parsed.Hubs and Parsed.Self), and the link to its page of older items
// (RFC 5005 paging, Parsed.Older).

// Limits of hub discovery.
const (
	// MaxHubs is how many hubs Parsed.Hubs keeps.
	MaxHubs = 4
	// maxLinkURL bounds a hub or self URL, in bytes.
	maxLinkURL = 2048
	// maxLinkScan bounds the links looked at in one document.
	maxLinkScan = 64
)

// atomNamespace is the namespace of Atom elements, also used inside RSS
// (atom:link rel="hub" and rel="self").
const atomNamespace = "http://www.w3.org/2005/Atom"

// atomDeclRe finds the prefixes a document binds to the Atom namespace.
var atomDeclRe = regexp.MustCompile(`xmlns:([A-Za-z_][A-Za-z0-9_.\-]{0,63})\s*=\s*["']\s*` + regexp.QuoteMeta(atomNamespace) + `\s*["']`)

// xmlHubs returns the WebSub hubs and self link of an RSS (atom:link) or
// Atom document.
func xmlHubs(rf *rss.Feed, af *atom.Feed, body []byte, base string) (hubs []string, self string) {
	return pickHubs(xmlLinks(rf, af, body), base)
}

// xmlLinks returns the atom:link elements of an RSS or Atom document (at
// most maxLinkScan).
func xmlLinks(rf *rss.Feed, af *atom.Feed, body []byte) []link {
	var links []link
	switch {
	case af != nil:
		for _, l := range af.Links {
			if l != nil && len(links) < maxLinkScan {
				links = append(links, link{l.Rel, l.Href})
			}
		}
	case rf != nil:
		keys := []string{"atom", "atom10", atomNamespace}
		if bytes.Contains(body, []byte(atomNamespace)) {
			for _, m := range atomDeclRe.FindAllSubmatch(body, 8) {
				if k := string(m[1]); !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
		}
		for _, k := range keys {
			for _, e := range rf.Extensions[k]["link"] {
				if len(links) < maxLinkScan {
					links = append(links, link{e.Attrs["rel"], e.Attrs["href"]})
				}
			}
		}
	}
	return links
}

// jsonHubs returns the WebSub hubs ("hubs" of type WebSub) and self link
// (feed_url) of a JSON Feed.
func jsonHubs(top map[string]json.RawMessage, base string) (hubs []string, self string) {
	var list []struct {
		Type string `json:"type"`
		URL  string `json:"url"`
	}
	_ = json.Unmarshal(top["hubs"], &list) // a bad hubs array is no hub
	var feedURL string
	_ = json.Unmarshal(top["feed_url"], &feedURL)
	links := []link{{"self", feedURL}}
	for _, h := range list {
		if len(links) > maxLinkScan {
			break
		}
		if strings.EqualFold(strings.TrimSpace(h.Type), "websub") {
			links = append(links, link{"hub", h.URL})
		}
	}
	return pickHubs(links, base)
}

// link is a rel and an href.
type link struct{ rel, href string }

// pickHubs keeps the hub links (at most MaxHubs, deduplicated) and the
// first self link among links, resolved against base, absolute http(s)
// URLs only.
func pickHubs(links []link, base string) (hubs []string, self string) {
	b, _ := url.Parse(base)
	for _, l := range links {
		var isHub, isSelf bool
		for _, r := range strings.Fields(strings.ToLower(l.rel)) {
			isHub = isHub || r == "hub"
			isSelf = isSelf || r == "self"
		}
		if !isHub && !isSelf {
			continue
		}
		u := absoluteLink(b, l.href)
		if u == "" {
			continue
		}
		if isHub && len(hubs) < MaxHubs && !slices.Contains(hubs, u) {
			hubs = append(hubs, u)
		}
		if isSelf && self == "" {
			self = u
		}
	}
	return hubs, self
}

// absoluteLink resolves href against base and returns it when it is an
// absolute http(s) URL of at most maxLinkURL bytes, else "".
func absoluteLink(base *url.URL, href string) string {
	href = strings.TrimSpace(href)
	if href == "" || len(href) > maxLinkURL {
		return ""
	}
	u, err := url.Parse(href)
	if err != nil {
		return ""
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return ""
	}
	u.Fragment = ""
	out := u.String()
	if len(out) > maxLinkURL {
		return ""
	}
	return out
}

// olderLink returns the first rel="next" or rel="prev-archive" link among
// links, resolved against base, an absolute http(s) URL, or "".
func olderLink(links []link, base string) string {
	b, _ := url.Parse(base)
	for _, l := range links {
		for _, r := range strings.Fields(strings.ToLower(l.rel)) {
			if r == "next" || r == "prev-archive" {
				if u := absoluteLink(b, l.href); u != "" {
					return u
				}
			}
		}
	}
	return ""
}

// jsonOlder returns a JSON Feed's next_url, resolved as olderLink does.
func jsonOlder(top map[string]json.RawMessage, base string) string {
	var next string
	_ = json.Unmarshal(top["next_url"], &next)
	return olderLink([]link{{"next", next}}, base)
}
