package web

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// A subscriber that revalidates with If-Modified-Since alone (the
// Last-Modified it was last sent) gets every change of a sensor or pipe
// feed: readings a fraction of a second apart, an item published before
// the newest one but arriving after it, an item updated in place. A 304
// is only right for a document that did not change.
func TestLastModifiedMovesWithTheDocument(t *testing.T) {
	type step struct {
		at     time.Duration // from the case's start
		change func(t *testing.T)
	}
	type feedCase struct {
		name  string
		start time.Time
		url   string
		set   func(time.Time)
		steps []step
	}
	sensor := func(name string, steps func(post func(v string) func(*testing.T)) []step) feedCase {
		e := newSensorEnv(t)
		post := func(v string) func(*testing.T) {
			return func(t *testing.T) {
				if code, _ := e.post(t, "lab-1", "application/json", `{"value": `+v+`}`); code != http.StatusCreated {
					t.Fatalf("post: %d", code)
				}
			}
		}
		return feedCase{name: name, start: sensorT0, url: e.srv.URL + "/sensors/lab-1.rss", set: e.clock.Set, steps: steps(post)}
	}
	pipe := func(name string, steps func(add func(storage.Item) func(*testing.T)) []step) feedCase {
		fx := newPipeFixture(t)
		srv := httptest.NewServer(fx.handler(PipeFeedOptions{}))
		t.Cleanup(srv.Close)
		add := func(it storage.Item) func(*testing.T) {
			return func(t *testing.T) {
				if _, err := fx.st.AddItems(fx.feed.ID, []storage.Item{it}); err != nil {
					t.Fatal(err)
				}
			}
		}
		return feedCase{name: name, start: pipeNow, url: srv.URL + "/feeds/" + pipeSlug + ".atom", set: fx.clock.Set, steps: steps(add)}
	}
	ms := time.Millisecond
	cases := []feedCase{
		sensor("two readings in one second", func(post func(string) func(*testing.T)) []step {
			return []step{{200 * ms, post("1")}, {500 * ms, nil}, {800 * ms, post("2")}, {1500 * ms, nil}, {2500 * ms, nil}}
		}),
		sensor("a reading in the second of the last read", func(post func(string) func(*testing.T)) []step {
			return []step{{200 * ms, post("1")}, {1200 * ms, nil}, {1400 * ms, post("2")}, {1600 * ms, nil}, {2600 * ms, nil}}
		}),
		pipe("an item published before the newest, arriving later", func(add func(storage.Item) func(*testing.T)) []step {
			late := storage.Item{ID: "late/1", Title: "late", Published: pipeItemsAt.Add(35 * time.Minute)}
			return []step{{0, nil}, {2 * time.Second, add(late)}, {3 * time.Second, nil}, {4 * time.Second, nil}}
		}),
		pipe("an item updated in place", func(add func(storage.Item) func(*testing.T)) []step {
			// A pipe run dates what it emits (Updated) by the run.
			again := storage.Item{ID: "alerts/lab-1 #1", Title: "Alert: lab-1 above 26 °C", Published: pipeItemsAt.Add(45 * time.Minute),
				Updated: pipeNow.Add(2 * time.Second)}
			return []step{{0, nil}, {2 * time.Second, add(again)}, {3 * time.Second, nil}}
		}),
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var lm string   // the Last-Modified last sent
			var copy []byte // the document the subscriber holds
			changed := true // since its copy
			var lastChange time.Duration
			for i, s := range c.steps {
				c.set(c.start.Add(s.at))
				if s.change != nil {
					s.change(t)
					changed, lastChange = true, s.at
					continue
				}
				req, _ := http.NewRequest("GET", c.url, nil)
				if lm != "" {
					req.Header.Set("If-Modified-Since", lm)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case resp.StatusCode == http.StatusNotModified && changed:
					t.Fatalf("step %d (+%v): 304 to If-Modified-Since %s although the document changed", i, s.at, lm)
				case resp.StatusCode == http.StatusOK:
					if changed && bytes.Equal(body, copy) {
						t.Fatalf("step %d: the same document after a change", i)
					}
					copy, changed = body, false
				case resp.StatusCode != http.StatusNotModified:
					t.Fatalf("step %d: status %d", i, resp.StatusCode)
				}
				if v := resp.Header.Get("Last-Modified"); v != "" {
					lm = v
					at, err := http.ParseTime(v)
					if err != nil || !at.Before(c.start.Add(s.at).Truncate(time.Second)) {
						t.Errorf("step %d (+%v): Last-Modified %s is not in an earlier second", i, s.at, v)
					}
				} else if resp.StatusCode == http.StatusOK && s.at.Truncate(time.Second) > lastChange.Truncate(time.Second)+time.Second {
					// A change first seen a second after it was made is
					// dated by then at the latest.
					t.Errorf("step %d (+%v): no Last-Modified two seconds after the last change (+%v)", i, s.at, lastChange)
				}
			}
		})
	}
}
