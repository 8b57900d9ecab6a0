package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// The UI masks the credentials of feed URLs on every page (the feed
// list, the feed's page, subscribe messages) and shows what fetches
// replaced in a feed.
func TestUIMasksCredentials(t *testing.T) {
	e := newEnv(t, envOptions{})
	f, err := e.agg.Subscribe(storage.Feed{URL: "https://alice:hunter2@feeds.example.org/private.rss"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.UpdateFeed(f.ID, func(x *storage.Feed) error {
		x.InvalidUTF8, x.BadDates, x.RepairsPerItem = 12, 3, true
		x.LastRepair, x.LastRepairAt = `item "x": published date "9999-12-31" unreadable or implausible, replaced by the fetch time`, time.Now()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c := e.client(t)
	pages := map[string]response{
		"feeds": c.get(t, "/ui/feeds"),
		"feed":  c.get(t, fmt.Sprintf("/ui/feeds/%d", f.ID)),
		"again": c.post(t, "/ui/feeds", url.Values{"url": {f.URL}}, true),
	}
	for name, r := range pages {
		if r.status != http.StatusOK && r.status != http.StatusUnprocessableEntity {
			t.Errorf("%s: status %d", name, r.status)
		}
		body := r.body
		if name == "again" {
			// The form keeps what its submitter typed, to fix and send
			// again; the message says it masked.
			body = strings.Replace(body, `value="https://alice:hunter2@feeds.example.org/private.rss"`, "", 1)
		}
		if strings.Contains(body, "hunter2") {
			t.Errorf("%s shows the password", name)
		}
		if !strings.Contains(r.body, "alice:xxxxx@feeds.example.org") {
			t.Errorf("%s does not show the masked URL", name)
		}
	}
	if body := pages["feed"].body; !strings.Contains(body, "12 items with invalid UTF-8, 3 items with a bad date (each item counted once)") || !strings.Contains(body, "9999-12-31") {
		t.Errorf("the feed page does not show the repairs")
	}
}
