package web

import (
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// Bulk subscription (POST /api/v1/feeds/bulk).
const (
	// MaxBulkFeeds is how many feeds one bulk request may carry.
	MaxBulkFeeds = 10_000
	// maxBulkBody bounds a bulk request's body.
	maxBulkBody = 8 << 20
	// bulkWorkers subscribe a request's feeds side by side, so that
	// their writes share group commits (one fsync for many).
	bulkWorkers = 32
)

// The reasons a bulk subscription gives for a feed it refused.
const (
	ReasonDuplicate = "duplicate" // already subscribed, or earlier in the same request
	ReasonSSRF      = "ssrf"      // a host that is not a public address
	ReasonBadURL    = "bad_url"   // not an absolute http or https URL
	ReasonPolicy    = "policy"    // an unknown scheduling policy, or a bad cron spec
	ReasonInvalid   = "invalid"   // another setting is wrong (the error says which)
	// ReasonError: the server failed to store or schedule the feed (the
	// cause is logged, not shown): the request was not at fault.
	ReasonError = "error"
	// ReasonUnavailable: the store could not take the subscription now
	// (a cluster without a quorum): send it again later.
	ReasonUnavailable = "unavailable"
	// ReasonCancelled: the request ended (its client went away) before
	// the feed was subscribed.
	ReasonCancelled = "cancelled"
)

// bulkRequest is the body of POST /api/v1/feeds/bulk.
type bulkRequest struct {
	Feeds []feedRequest `json:"feeds"`
}

// BulkResult is what became of one feed of a bulk request.
type BulkResult struct {
	URL    string `json:"url"`              // as sent, credentials masked
	ID     uint64 `json:"id,omitempty"`     // the new feed's ID, when subscribed
	Error  string `json:"error,omitempty"`  // why not, in words
	Reason string `json:"reason,omitempty"` // why not, one of the Reason… words
}

// BulkResponse is the answer to POST /api/v1/feeds/bulk: a result per
// feed, in the order sent.
type BulkResponse struct {
	Added   int          `json:"added"`
	Refused int          `json:"refused"`
	Results []BulkResult `json:"results"`
}

// pacedSubscriber is an aggregator that paces the first fetches of
// feeds subscribed many at a time (aggregator.Service).
type pacedSubscriber interface {
	SubscribePaced(f storage.Feed) (storage.Feed, error)
}

// SubscribePaced subscribes f through agg, its first fetch paced when agg
// paces them (aggregator.Service.SubscribePaced: one rate for the node,
// whatever the number of bulk requests and imports at once), else at
// once. Bulk requests and the UI's OPML imports subscribe through it.
func SubscribePaced(agg Aggregator, f storage.Feed) (storage.Feed, error) {
	if p, ok := agg.(pacedSubscriber); ok {
		return p.SubscribePaced(f)
	}
	return agg.Subscribe(f)
}

func (a *api) bulk(w http.ResponseWriter, r *http.Request) {
	if a.agg == nil {
		respondError(w, http.StatusServiceUnavailable, "this server does not subscribe to feeds")
		return
	}
	var req bulkRequest
	if !decodeBodyN(w, r, &req, maxBulkBody) {
		return
	}
	if len(req.Feeds) > MaxBulkFeeds {
		respondError(w, http.StatusBadRequest, fmt.Sprintf("at most %d feeds a request (send the rest in another)", MaxBulkFeeds))
		return
	}
	out := BulkResponse{Results: make([]BulkResult, len(req.Feeds))}
	// The same URL twice in one request: the later ones are duplicates.
	seen := make(map[string]bool, len(req.Feeds))
	todo := make(chan int)
	var wg sync.WaitGroup
	for range min(bulkWorkers, len(req.Feeds)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range todo {
				out.Results[i] = a.subscribeOne(&req.Feeds[i])
			}
		}()
	}
	for i := range req.Feeds {
		if r.Context().Err() != nil {
			// The client is gone: the rest are not subscribed.
			out.Results[i] = BulkResult{URL: sanitize.RedactURL(req.Feeds[i].URL), Error: "request cancelled", Reason: ReasonCancelled}
			continue
		}
		u := req.Feeds[i].URL
		if seen[u] {
			out.Results[i] = BulkResult{URL: sanitize.RedactURL(u), Error: "earlier in this request", Reason: ReasonDuplicate}
			continue
		}
		seen[u] = true
		todo <- i
	}
	close(todo)
	wg.Wait()
	for _, res := range out.Results {
		if res.ID != 0 {
			out.Added++
		} else {
			out.Refused++
		}
	}
	respondJSON(w, http.StatusOK, out)
}

// subscribeOne subscribes one feed of a bulk request, its first fetch
// paced (SubscribePaced).
func (a *api) subscribeOne(req *feedRequest) BulkResult {
	res := BulkResult{URL: sanitize.RedactURL(req.URL)}
	f, err := req.feed()
	if err != nil {
		res.Error, res.Reason = clientMessage(err), ReasonInvalid
		return res
	}
	nf, err := SubscribePaced(a.agg, f)
	if err != nil {
		res.Error, res.Reason = clientMessage(err), refusal(err)
		switch {
		case res.Reason == ReasonDuplicate:
			res.Error = "already subscribed"
		case isUnavailable(a.store, err):
			res.Error, res.Reason = unavailableMsg, ReasonUnavailable
		case res.Reason == ReasonError:
			a.log.Error("api: bulk subscription", "url", res.URL, "err", err)
			res.Error = "internal error"
		}
		return res
	}
	res.ID = nf.ID
	return res
}

// refusal names why subscribing f failed with err.
func refusal(err error) string {
	switch {
	case errors.Is(err, storage.ErrFeedExists):
		return ReasonDuplicate
	case errors.Is(err, fetcher.ErrBlocked):
		return ReasonSSRF
	case errors.Is(err, aggregator.ErrBadURL), errors.Is(err, fetcher.ErrInvalidURL), errors.Is(err, fetcher.ErrScheme):
		return ReasonBadURL
	case errors.Is(err, schedule.ErrUnknownPolicy), errors.Is(err, schedule.ErrCronSpec):
		return ReasonPolicy
	case isBadSubscription(err):
		return ReasonInvalid
	}
	return ReasonError
}
