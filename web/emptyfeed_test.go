package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// A document without items is dated by its feed (a pipe's output by when
// it was made or last changed, a sensor's page by when the sensor was
// created), never the Unix epoch, in every format's feed-level dates.
func TestEmptyFeedDates(t *testing.T) {
	fx := newPipeFixture(t)
	fx.clock.Set(pipeNow.Add(-time.Minute))
	empty := storage.Feed{Kind: storage.KindPipe, Slug: "quiet", Policy: "pipe"}
	if err := fx.st.CreateFeed(&empty); err != nil {
		t.Fatal(err)
	}
	fx.clock.Set(pipeNow)
	pipes := httptest.NewServer(fx.handler(PipeFeedOptions{}))
	t.Cleanup(pipes.Close)

	se := newSensorEnv(t)
	if code, v := se.post(t, "lab-1", "application/json", `{"value": 21.5}`); code != http.StatusCreated {
		t.Fatalf("post: %d %v", code, v)
	}
	se.clock.Set(sensorT0.Add(time.Hour))

	made := pipeNow.Add(-time.Minute)
	tests := []struct {
		url  string
		want []string // the feed-level dates
	}{
		{pipes.URL + "/feeds/quiet.atom", []string{"<updated>" + made.Format(time.RFC3339) + "</updated>"}},
		{pipes.URL + "/feeds/quiet.rss", []string{"<pubDate>" + made.Format(time.RFC1123Z) + "</pubDate>", "<lastBuildDate>" + made.Format(time.RFC1123Z) + "</lastBuildDate>"}},
		{se.srv.URL + "/sensors/lab-1.atom?before=1", []string{"<updated>" + sensorT0.Format(time.RFC3339) + "</updated>"}},
		{se.srv.URL + "/sensors/lab-1.rss?before=1", []string{"<pubDate>" + sensorT0.Format(time.RFC1123Z) + "</pubDate>"}},
	}
	for _, tt := range tests {
		resp, err := http.Get(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		doc := string(b)
		if resp.StatusCode != http.StatusOK || strings.Contains(doc, "1970") || strings.Contains(doc, "<item>") || strings.Contains(doc, "<entry>") {
			t.Errorf("%s: %d, want an empty document not dated 1970:\n%s", tt.url, resp.StatusCode, doc)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(doc, w) {
				t.Errorf("%s: no %s in\n%s", tt.url, w, doc)
			}
		}
	}
}
