package web

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/slogfeed/slogfeed/storage"
)

// The tag authority of the published feeds' ids. A sensor feed's id is
// tag:AUTHORITY,DATE:sensor/NAME and a pipe feed's
// tag:AUTHORITY,DATE:feeds/SLUG, DATE the day the feed was created; each
// entry's id extends its feed's (publish.EntryID). An Atom id must not
// change when the feed moves (RFC 4287 §4.2.6), so the authority is not
// read from the public URL at every start: it is minted once per
// installation, from the host of the public URL at the first start, and
// kept in the store, in the plugin record namespace idNamespace, where
// every later start and every node of a cluster reads it.
const (
	idNamespace = "publish"
	// idAuthorityKey holds the authority once decided.
	idAuthorityKey = "ids/authority"
)

// IDAuthority returns the installation's tag authority for the ids of its
// published feeds: the one stored in st, else candidate, stored now. Nodes
// of a cluster that start at once store one candidate, the first written
// (PluginCreate), and all use it.
func IDAuthority(st storage.PluginStore, candidate string) (string, error) {
	if a, err := storedAuthority(st); err != nil || a != "" {
		return a, err
	}
	if candidate == "" {
		return "", errors.New("no id authority: the public URL has no host")
	}
	a, err := st.PluginCreate(idNamespace, idAuthorityKey, []byte(candidate))
	if err != nil {
		return "", fmt.Errorf("storing the feed id authority: %w", err)
	}
	return string(a), nil
}

// storedAuthority returns the stored authority, "" when none is.
func storedAuthority(st storage.PluginStore) (string, error) {
	b, err := st.PluginGet(idNamespace, idAuthorityKey)
	if errors.Is(err, storage.ErrPluginKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the feed id authority: %w", err)
	}
	return string(b), nil
}

// AuthorityOf returns the tag authority the public URL base would mint:
// its host name, "" when it has none.
func AuthorityOf(base string) string {
	if u, err := url.Parse(base); err == nil && u.Host != "" {
		return u.Hostname()
	}
	return ""
}

// ValidIDAuthority reports whether s is a tag URI's authority name
// (RFC 4151): a DNS name, or an e-mail address, of letters, digits and
// hyphens in dot-separated parts that neither start nor end with a hyphen.
func ValidIDAuthority(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	domain := s
	if local, d, ok := strings.Cut(s, "@"); ok {
		if local == "" || strings.Trim(local, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._") != "" {
			return false
		}
		domain = d
	}
	for part := range strings.SplitSeq(domain, ".") {
		if part == "" || part[0] == '-' || part[len(part)-1] == '-' ||
			strings.Trim(part, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != "" {
			return false
		}
	}
	return true
}

// tagID returns the permanent id of feed f, under authority: a tag URI of
// the authority and the day f was created (what is, e.g.
// "sensor/lab-1"), or, without an authority or a creation date, the URN
// urn:slogfeed:KIND:SLUG.
func tagID(authority string, f storage.Feed, kind, what string) string {
	if authority == "" || f.Created.IsZero() {
		return "urn:slogfeed:" + kind + ":" + f.Slug
	}
	return "tag:" + authority + "," + f.Created.UTC().Format("2006-01-02") + ":" + what
}
