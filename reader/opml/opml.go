package opml

import (
	"errors"
	"fmt"
	"github.com/slogfeed/slogfeed/reader/sanitize"
	"strconv"
)

// Limits applied by Parse to every document.
const (
	// MaxSize is the largest document Parse reads, in bytes, before any
	// charset conversion.
	MaxSize = 10 << 20
	// MaxDepth is how deeply outline elements may nest. A subscription in
	// a folder in a folder is at depth 3. Other elements may nest at most
	// MaxDepth+2 deep (opml, body, then the outlines).
	MaxDepth = 32
	// MaxOutlines is the largest number of outline elements, folders
	// included, that a document may hold.
	MaxOutlines = 100_000
	// MaxURLLength is the longest feed URL Parse accepts, in bytes.
	MaxURLLength = 8 << 10
)

// Outline is one subscription found in an OPML document.
type Outline struct {
	// URL is the feed's address (the xmlUrl attribute), always an
	// absolute http or https URL in the outlines Parse returns.
	URL string
	// Title is the title attribute, else the text attribute. It may be
	// empty.
	Title string
	// Site is the address of the feed's web site (the htmlUrl
	// attribute). Parse keeps it only when it is an http or https URL.
	Site string
	// Category is the path of the titles of the folders enclosing the
	// subscription, outermost first, followed by the names found in its
	// category attribute. It never holds empty names and never more than
	// MaxDepth-1 of them.
	Category []string
	// Settings are slogfeed's own settings of the subscription, from
	// attributes of Namespace (zero for other readers' exports).
	Settings Settings
	// Ignored lists the attributes of Namespace Parse could not use and
	// left out of Settings, in document order.
	Ignored []IgnoredSetting
	// Duplicates counts the later outlines of the document with the same
	// feed URL, which Parse dropped.
	Duplicates int
}

// Name is how a message names the outline: its title cut to 60 bytes and
// quoted, else "untitled".
func (o Outline) Name() string {
	if o.Title == "" {
		return "untitled"
	}
	return strconv.Quote(sanitize.Clip(o.Title, 60))
}

// IgnoredSetting is a slogfeed setting of an outline that Parse left out:
// the attribute (without prefix), its value (cut to MaxIgnoredValue bytes)
// and why.
type IgnoredSetting struct {
	Attr, Value, Reason string
}

// MaxIgnoredValue bounds the value an IgnoredSetting quotes, in bytes.
const MaxIgnoredValue = 80

// String says what was ignored, as in
// `slogfeed:retentionItems="abc": not a positive whole number`.
func (s IgnoredSetting) String() string {
	return Prefix + ":" + s.Attr + "=" + strconv.Quote(s.Value) + ": " + s.Reason
}

// Errors returned by Parse and Write. Callers branch with errors.Is.
var (
	// ErrTooLarge means the document is larger than MaxSize.
	ErrTooLarge = errors.New("opml: document too large")
	// ErrTooDeep means outlines (or other elements) nest deeper than
	// MaxDepth, or, for Write, that a Category has more than MaxDepth-1
	// names.
	ErrTooDeep = errors.New("opml: nested too deeply")
	// ErrTooManyOutlines means the document holds more than MaxOutlines
	// outline elements.
	ErrTooManyOutlines = errors.New("opml: too many outlines")
	// ErrNotOPML means the document's root element is not <opml>, or that
	// it has no root element.
	ErrNotOPML = errors.New("opml: not an OPML document")
	// ErrMalformed means the document is not well-formed XML; the error
	// also wraps the *xml.SyntaxError.
	ErrMalformed = errors.New("opml: malformed XML")
	// ErrCharset means the document declares a character encoding that
	// slogfeed cannot decode.
	ErrCharset = errors.New("opml: unsupported charset")

	// ErrSkipped matches the error Parse returns when it left some
	// subscriptions out but imported the rest. Every *OutlineError
	// matches it.
	ErrSkipped = errors.New("opml: outlines skipped")
	// ErrUnsupportedURL is the reason a subscription is skipped or
	// refused: its URL is not an absolute http or https URL with a host,
	// or is longer than MaxURLLength.
	ErrUnsupportedURL = errors.New("opml: feed URL is not an http or https URL")
)

// OutlineError describes one subscription that Parse skipped or Write
// refused. It matches ErrSkipped and unwraps to the reason (such as
// ErrUnsupportedURL).
type OutlineError struct {
	// Line is the line of the outline element in the document, or 0 for
	// Write.
	Line int
	// URL is the outline's xmlUrl attribute as found (possibly
	// shortened); Error shows it with its credentials masked.
	URL string
	// Err is the reason.
	Err error
}

// Error implements error.
func (e *OutlineError) Error() string {
	u := sanitize.RedactURL(e.URL)
	if e.Line > 0 {
		return fmt.Sprintf("line %d: outline %q: %v", e.Line, u, e.Err)
	}
	return fmt.Sprintf("outline %q: %v", u, e.Err)
}

// Unwrap returns the reason.
func (e *OutlineError) Unwrap() error { return e.Err }

// Is reports whether target is ErrSkipped.
func (e *OutlineError) Is(target error) bool { return target == ErrSkipped }

// Skipped returns the outline errors held by an error from Parse or Write,
// in document order. Parse lists at most 100 of them; its error then also
// says how many more were skipped.
func Skipped(err error) []*OutlineError {
	var out []*OutlineError
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *OutlineError:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				walk(inner)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return out
}
