package storage

import (
	"errors"
	"fmt"
)

// These errors are returned by the Store, always wrapped with context (the
// path, feed or item concerned); test for them with errors.Is.
var (
	// ErrLocked is returned by Open when another process (or another Store
	// in this process) holds the data file and the lock did not come free
	// within Options.LockTimeout.
	ErrLocked = errors.New("data file locked")

	// ErrFeedNotFound is returned when no feed has the requested id, URL or
	// slug.
	ErrFeedNotFound = errors.New("feed not found")

	// ErrFeedExists is returned when creating or updating a feed would give
	// two remote feeds the same URL, or two sensor or pipe feeds of the same
	// kind the same slug.
	ErrFeedExists = errors.New("feed already exists")

	// ErrItemNotFound is returned when a feed has no item with the
	// requested id.
	ErrItemNotFound = errors.New("item not found")

	// ErrSchemaTooNew is returned by Open when the data file was written by
	// a newer slogfeed whose schema this binary does not know. The file is
	// left untouched.
	ErrSchemaTooNew = errors.New("data file schema is newer than this slogfeed")

	// ErrCorrupt is returned when the data file is not a bbolt database,
	// fails bbolt's consistency check, or breaks one of the store's own
	// invariants (see Store.Check).
	ErrCorrupt = errors.New("data file corrupt")

	// ErrInvalid is returned for bad input, before anything is written: an
	// empty or oversized URL, a malformed slug, an item without an id, an
	// item larger than MaxItemSize, a number JSON cannot hold, a pipe
	// without a definition or larger than MaxPipeSize, and so on.
	ErrInvalid = errors.New("invalid input")
)

// Errors of stored pipes (pipes.go), wrapped like the ones above.
var (
	// ErrPipeNotFound is returned when no pipe has the requested id or
	// slug.
	ErrPipeNotFound = errors.New("pipe not found")

	// ErrPipeExists is returned when creating or renaming a pipe would
	// give two pipes the same slug. (When the slug is free among pipes but
	// a pipe-kind feed outside any pipe holds it, the error is
	// ErrFeedExists.)
	ErrPipeExists = errors.New("pipe already exists")

	// ErrPipeOutput is returned by DeleteFeed for a feed that is a pipe's
	// output: delete the pipe instead (DeletePipe).
	ErrPipeOutput = errors.New("feed is a pipe's output")
)

// Errors of plugin records (plugindata.go), wrapped like the ones above.
var (
	// ErrPluginKeyNotFound is returned by PluginGet when the plugin has no
	// record under the key.
	ErrPluginKeyNotFound = errors.New("plugin record not found")
)

// ItemError reports one item that AddItems refused. AddItems returns one
// per refused item, joined with errors.Join; each unwraps to ErrInvalid.
type ItemError struct {
	// Index is the item's position in the slice given to AddItems.
	Index int
	// ID is the item's id, shortened to at most 80 bytes for display.
	ID string
	// Err says what is wrong; it wraps ErrInvalid.
	Err error
}

// Error implements error.
func (e *ItemError) Error() string {
	return fmt.Sprintf("storage: item %d (id %q): %v", e.Index, e.ID, e.Err)
}

// Unwrap returns the underlying error, so errors.Is(err, ErrInvalid) holds.
func (e *ItemError) Unwrap() error { return e.Err }

// invalidf returns an error wrapping ErrInvalid.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// corruptf returns an error wrapping ErrCorrupt.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// shortID shortens an item id for error messages.
func shortID(id string) string {
	const max = 80
	if len(id) <= max {
		return id
	}
	return id[:max] + "…"
}
