package storage

import (
	"encoding/json"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
)

// Kind says where a feed's items come from.
type Kind string

// Feed kinds.
const (
	KindRemote Kind = "remote" // fetched from a URL by the aggregator
	KindSensor Kind = "sensor" // readings posted to slogfeed's sensor store
	KindPipe   Kind = "pipe"   // output of a transform chain
)

// Feed is one subscription (or one sensor or pipe output) and everything
// slogfeed keeps about it besides its items and observations.
type Feed struct {
	ID    uint64 `json:"id"`
	Kind  Kind   `json:"kind"`
	URL   string `json:"url,omitempty"`  // remote feeds
	Slug  string `json:"slug,omitempty"` // sensor and pipe feeds: the name in their URLs
	Title string `json:"title,omitempty"`
	// Description is what a pipe's output feed says of itself (its
	// definition's output.description), plain text.
	Description string `json:"description,omitempty"`
	// Site is the feed's own link (its web page), when it gives one.
	Site     string   `json:"site,omitempty"`
	Category []string `json:"category,omitempty"` // OPML outline path, outermost first

	// Scheduling.
	Policy      string             `json:"policy"`                 // schedule policy name, e.g. "auto", "dpt-l", "fixed-15m"
	Weight      float64            `json:"weight,omitempty"`       // best-effort priority weight (0 = 1)
	IgnoreCache bool               `json:"ignore_cache,omitempty"` // do not treat Cache-Control/Expires/<ttl> as a lower bound
	Sleep       schedule.SleepPlan `json:"sleep,omitzero"`         // from <skipHours>/<skipDays> and the user's windows
	UpdateHint  time.Duration      `json:"update_hint,omitempty"`  // sy:updatePeriod/updateFrequency; polls pass it to the policy as Hints.Period
	NextFetch   time.Time          `json:"next_fetch"`             // what the scheduler last chose

	// HTTP validators for conditional GET.
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`

	// Errors: the last one in words, how many in a row, and when the feed
	// may be fetched again. A feed is never disabled silently.
	LastError   string    `json:"last_error,omitempty"`
	ErrorCount  int       `json:"error_count,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	RetryAfter  time.Time `json:"retry_after,omitzero"`

	// Counters.
	Polls        int64     `json:"polls"`
	Hits         int64     `json:"hits"`
	Items        int64     `json:"items"`
	LatencySumS  float64   `json:"latency_sum_s"` // over items with a known publish time
	LatencyCount int64     `json:"latency_count"`
	LastFetch    time.Time `json:"last_fetch,omitzero"`
	LastHit      time.Time `json:"last_hit,omitzero"`

	Retention Retention    `json:"retention"`
	Extract   *ExtractRule `json:"extract,omitempty"`
	// Reduce is an optional PACK reduction policy (JSON, read by the
	// Reducer set with SetReducer) applied to the items beyond Retention
	// instead of deleting them.
	Reduce json.RawMessage `json:"reduce,omitempty"`
	// Source, when set, names the source adapter that turns the fetched
	// document (JSON, CSV, a sensor trace) into items in place of the
	// feed parser (see aggregator.Source).
	Source *SourceSpec `json:"source,omitempty"`
	// Warning is what the last parsed fetch left out although the fetch
	// succeeded, e.g. "3 of 100 rows skipped: row 7: …" (empty when
	// nothing was).
	Warning string `json:"warning,omitempty"`
	// InvalidUTF8 and BadDates count the feed's items that needed a
	// repair, each item once, when it is first stored: those whose text
	// held invalid UTF-8 (replaced, not refused) and those whose date was
	// unreadable or implausible (a year 9999) and was replaced by the
	// fetch time. Refetching an item does not count it again. LastRepair
	// says what the last such repair was, at LastRepairAt. Read them with
	// RepairCounts.
	InvalidUTF8  int64     `json:"invalid_utf8,omitempty"`
	BadDates     int64     `json:"bad_dates,omitempty"`
	LastRepair   string    `json:"last_repair,omitempty"`
	LastRepairAt time.Time `json:"last_repair_at,omitzero"`
	// RepairsPerItem is set once InvalidUTF8 counts items. A feed
	// stored by an older slogfeed, which counted the bytes of invalid
	// UTF-8 at every fetch, has it unset: its InvalidUTF8 is dropped at
	// its next fetch and reads as 0 until then.
	RepairsPerItem bool `json:"repairs_per_item,omitempty"`
	// Listed is how many items the feed's last parsed document listed
	// (at most the feed parser's cut): the store remembers as many of
	// the items retention dropped, so that a document still listing them
	// does not bring them back as new (see DroppedIDs).
	Listed int `json:"listed,omitempty"`

	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// RepairCounts returns how many of the feed's items needed a repair,
// each counted once: items with invalid UTF-8, items with a bad date
// (see InvalidUTF8). An InvalidUTF8 kept by an older slogfeed, which
// counted bytes at every fetch, reads as 0.
func (f *Feed) RepairCounts() (invalidUTF8, badDates int64) {
	if f.RepairsPerItem {
		invalidUTF8 = f.InvalidUTF8
	}
	return invalidUTF8, f.BadDates
}

// SourceSpec selects a feed's source adapter and configures it. Config is
// the adapter's own JSON, as its Prepare normalised it.
type SourceSpec struct {
	Type   string          `json:"type"`
	Config json.RawMessage `json:"config,omitempty"`
}

// Retention bounds how many items a feed keeps. Zero values mean no bound.
type Retention struct {
	MaxItems int           `json:"max_items,omitempty"`
	MaxAge   time.Duration `json:"max_age,omitempty"`
}

// ExtractRule reads a typed value from an item's title or summary when the
// publisher does not send slogfeed's sensor element: the first capture
// group of Regex (RE2) is the number; a decimal comma is accepted.
type ExtractRule struct {
	Field string `json:"field"` // "title" (default) or "summary"
	Regex string `json:"regex"`
	Unit  string `json:"unit,omitempty"`
}

// Reading is a typed sensor value carried by an item.
type Reading struct {
	Value  float64   `json:"value"`
	Unit   string    `json:"unit,omitempty"`
	Sensor string    `json:"sensor,omitempty"`
	Time   time.Time `json:"time"` // observation time
	Lat    *float64  `json:"lat,omitempty"`
	Lon    *float64  `json:"lon,omitempty"`
}

// Enclosure is a media attachment.
type Enclosure struct {
	URL    string `json:"url"`
	Type   string `json:"type,omitempty"`
	Length int64  `json:"length,omitempty"`
}

// Item is one entry of a feed, normalised. ID is stable per feed (the
// publisher's guid, else a hash of link and title) and is what
// deduplication keys on.
type Item struct {
	FeedID uint64 `json:"feed_id"`
	ID     string `json:"id"`
	Seq    uint64 `json:"seq"` // arrival order within the store, assigned on insert

	GUID       string      `json:"guid,omitempty"`
	Link       string      `json:"link,omitempty"`
	Title      string      `json:"title,omitempty"`
	Summary    string      `json:"summary,omitempty"` // sanitised HTML
	Content    string      `json:"content,omitempty"` // sanitised HTML
	Author     string      `json:"author,omitempty"`
	Categories []string    `json:"categories,omitempty"`
	Enclosures []Enclosure `json:"enclosures,omitempty"`

	Published time.Time `json:"published"`        // best publish time known (see aggregator)
	Updated   time.Time `json:"updated,omitzero"` // publisher's updated date, zero when it gave none
	Fetched   time.Time `json:"fetched"`          // when slogfeed got it

	Reading *Reading `json:"reading,omitempty"`
	// OwnDate is the publisher's own date of a new item whose Published
	// holds slogfeed's estimate instead (a date from before the feed's
	// previous poll). It is not stored: retention judges a new item by
	// the earlier of the two, so an item retention dropped does not come
	// back as new at the next poll of a document that still lists it.
	OwnDate time.Time `json:"-"`
	// Undated is set on a new item whose document gave it no date of its
	// own, before Published took slogfeed's estimate (see IsUndated). It
	// is not stored.
	Undated bool `json:"-"`
	// Digest is set on the items a digester made: the summary of the
	// items it stands for (see transform/pack).
	Digest *Digest `json:"digest,omitempty"`
}

// IsUndated reports whether it, a new item, has no date of its own: its
// Published is slogfeed's estimate (Undated) or not set at all. Such an
// item looks new to a process that has not read its document before, so
// only such an item is refused for an ID retention dropped (DroppedIDs);
// an item with a date of its own is judged by that date.
func (it *Item) IsUndated() bool { return it.Undated || it.Published.IsZero() }

// Digest summarises a set of readings associatively: two digests of the
// same field merge into the digest of the union (counts and sums add,
// extremes take the extreme, the span widens), so a digest of digests is
// exact. Mean is Sum/Count.
type Digest struct {
	Field string    `json:"field"`           // the field summarised, usually "value"
	Count int64     `json:"count"`           // readings summarised
	Sum   float64   `json:"sum"`             // their sum
	Min   float64   `json:"min"`             // the smallest
	Max   float64   `json:"max"`             // the largest
	From  time.Time `json:"from,omitzero"`   // the earliest summarised item's time
	To    time.Time `json:"to,omitzero"`     // the latest
	Items []string  `json:"items,omitempty"` // ids of a few of the summarised items (at most 16), for tracing
}

// Pipe is a stored transform chain: its definition (a transform.Pipe as
// JSON, which storage does not interpret), its output feed and the state
// its runner keeps between runs.
type Pipe struct {
	ID     uint64 `json:"id"`
	Slug   string `json:"slug"`    // the output feed's slug (unique among pipes)
	FeedID uint64 `json:"feed_id"` // the output feed, of KindPipe
	// Def is the pipe's definition, as JSON.
	Def json.RawMessage `json:"def"`
	// State is what the runner keeps between runs (input cursors,
	// operator states), as JSON; storage does not interpret it.
	State json.RawMessage `json:"state,omitempty"`

	Runs       int64     `json:"runs"`
	LastRun    time.Time `json:"last_run,omitzero"`
	LastError  string    `json:"last_error,omitempty"`
	ErrorCount int       `json:"error_count,omitempty"`

	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// PipeRun is the outcome of one run of a pipe, recorded with its output
// by CommitPipeRun.
type PipeRun struct {
	At  time.Time
	Err string // empty when the run succeeded
}

// Observation is one poll's outcome as the feed's policy saw it, kept so the
// policy can be rebuilt after a restart by replaying them in order. A bbolt
// node stores it in a compact binary form (obsenc.go); the JSON an older
// slogfeed stored, without its zero fields (hints not given, a miss's hit)
// or spelling them out, reads the same.
type Observation struct {
	At        time.Time      `json:"at"`
	Hit       bool           `json:"hit,omitzero"`
	Published []time.Time    `json:"published,omitempty"`
	MoreData  bool           `json:"more,omitempty"`
	Hints     schedule.Hints `json:"hints,omitzero"`
	LatencyS  []float64      `json:"latency_s,omitempty"` // publish → fetched of the new items, when known
	Status    int            `json:"status,omitempty"`    // HTTP status (0 for non-HTTP sources)
	Err       string         `json:"err,omitempty"`
}

// Schedule converts o to what a policy takes.
func (o Observation) Schedule() schedule.Observation {
	return schedule.Observation{At: o.At, Hit: o.Hit, Published: o.Published, MoreData: o.MoreData, Hints: o.Hints}
}
