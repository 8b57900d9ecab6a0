package sanitize

import (
	"net/url"
	"strings"
)

// Masked replaces the credentials of a URL wherever slogfeed shows one.
const Masked = "xxxxx"

// RedactURL returns raw with the credentials of its user information
// replaced by Masked ("http://u:pw@host/" → "http://u:xxxxx@host/"; a
// user name alone, often a key, is masked itself: "http://xxxxx@host/").
// Every read of a feed's URL shows it so (the API, the web UI, logs,
// webhooks); only the OPML export, a backup, keeps the credentials. A
// string that does not parse as a URL but holds an '@' is masked whole.
func RedactURL(raw string) string {
	if !strings.Contains(raw, "@") {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Masked
	}
	if u.User == nil {
		if strings.Contains(u.Opaque, "@") || u.Host == "" && strings.Contains(u.Path, "@") {
			// No "//": "user:secret@host/feed" parses as scheme "user".
			return Masked
		}
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), Masked)
	} else {
		u.User = url.User(Masked)
	}
	return u.String()
}
