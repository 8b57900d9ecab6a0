package runner

import (
	"errors"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

// Errors of the runner besides the definition errors of package transform
// (which wrap transform.ErrInvalid or transform.ErrLimit).
var (
	// ErrNotFound means no pipe has the given id or slug.
	ErrNotFound = errors.New("pipe not found")
	// ErrSlugTaken means another pipe (or feed) already publishes under
	// the slug.
	ErrSlugTaken = errors.New("pipe slug already taken")
	// ErrInputNotFound means a source names a feed, sensor or pipe that
	// does not exist.
	ErrInputNotFound = errors.New("pipe input not found")
	// ErrInUse means another pipe reads the pipe's output, so it cannot
	// be deleted or take another slug.
	ErrInUse = errors.New("pipe output read by another pipe")
	// ErrFeedInUse means a pipe reads the feed, so it cannot be removed.
	ErrFeedInUse = errors.New("feed read by a pipe")
	// ErrOutputRefused means the store refused a run's output (an item
	// over the store's limits that cleaning could not bring within them).
	ErrOutputRefused = errors.New("the pipe's output cannot be stored")
	// ErrClosed means the runner has stopped.
	ErrClosed = errors.New("pipe runner closed")
)

// Info is a pipe as the API shows it.
type Info struct {
	ID     uint64         `json:"id"`
	Slug   string         `json:"slug"`
	FeedID uint64         `json:"feed_id"` // the output feed
	Name   string         `json:"name"`
	Pipe   transform.Pipe `json:"pipe"`
	// Inputs are the pipe's sources, resolved to feeds.
	Inputs []Input `json:"inputs"`
	// Feeds maps each served format ("rss", "atom", "json") to its path
	// on the server, e.g. "/feeds/regional-mean.rss".
	Feeds map[string]string `json:"feeds"`
	// Items is how many items the output holds.
	Items      int64      `json:"items"`
	Runs       int64      `json:"runs"`
	LastRun    *time.Time `json:"last_run,omitempty"`
	LastError  string     `json:"last_error"`
	NextUpdate *time.Time `json:"next_update"` // the predicted next output
	Created    time.Time  `json:"created"`
	Updated    time.Time  `json:"updated"`
}

// Input is one source node of a pipe and the feed it reads.
type Input struct {
	Node   string       `json:"node"`
	Ref    string       `json:"ref"`
	Kind   storage.Kind `json:"kind"`
	FeedID uint64       `json:"feed_id"`
	Title  string       `json:"title,omitempty"`
}

// RunResult says what one run did.
type RunResult struct {
	At time.Time `json:"at"`
	// In is how many new input items the run processed, Out how many
	// items the output node emitted and Added how many of them were new
	// to the output feed (a rerun on the same input adds none).
	In    int     `json:"in"`
	Out   int     `json:"out"`
	Added int     `json:"added"`
	TookS float64 `json:"took_s"`
}
