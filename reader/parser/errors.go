package parser

import "errors"

// Errors returned by Parse.
var (
	// ErrNotFeed is returned for a body that is not RSS, Atom or JSON Feed
	// at all: empty, an HTML page, some other document or garbage.
	ErrNotFeed = errors.New("not a feed")
	// ErrMalformed is returned for a body that looks like a feed but cannot
	// be read: XML or JSON syntax errors, nesting deeper than the parser
	// allows, or a failure inside the feed parser.
	ErrMalformed = errors.New("malformed feed")
	// ErrExtractRule is returned for an extraction rule that cannot be
	// used: an invalid or too long regular expression, no capture group,
	// an unknown field.
	ErrExtractRule = errors.New("invalid extraction rule")
)
