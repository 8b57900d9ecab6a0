package fetcher

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Errors returned by Fetch. Callers branch on them with errors.Is; the
// wrapped error's message says what happened to which URL.
var (
	// ErrInvalidURL is returned for a feed URL that cannot be parsed or has no
	// host.
	ErrInvalidURL = errors.New("invalid feed URL")
	// ErrScheme is returned for a URL (or a redirect target) whose scheme
	// is not http or https, such as file: or ftp:.
	ErrScheme = errors.New("only http and https URLs can be fetched")
	// ErrBlocked is returned when the address being dialled is loopback,
	// private, link-local or otherwise not public, and is not on the
	// fetcher's allow-list (the SSRF guard).
	ErrBlocked = errors.New("address not allowed")
	// ErrTooManyRedirects is returned after more than MaxRedirects
	// redirects.
	ErrTooManyRedirects = errors.New("too many redirects")
	// ErrTooLarge is returned when the (decompressed) response body is
	// larger than MaxBody; reading stops at the cap.
	ErrTooLarge = errors.New("response body too large")
	// ErrTimeout is returned when the whole request, body included, took
	// longer than the fetcher's Timeout.
	ErrTimeout = errors.New("request timed out")
	// ErrHTTPStatus matches every *HTTPError: the server answered with a
	// status other than 2xx or 304.
	ErrHTTPStatus = errors.New("unexpected HTTP status")
	// ErrEncoding is returned for a body in a content encoding slogfeed did
	// not ask for or that does not decode.
	ErrEncoding = errors.New("bad content encoding")
)

// HTTPError is returned by Fetch when the server answers with a status other
// than 2xx or 304. errors.Is(err, ErrHTTPStatus) matches it.
type HTTPError struct {
	// Status is the HTTP status code.
	Status int
	// RetryAfter is the server's Retry-After delay on 429 and 503 (zero
	// when absent), capped at MaxCacheFor.
	RetryAfter time.Duration
	// URL is the URL that answered (after redirects).
	URL string
}

// Error says what the server answered in words, e.g. "server answered 503
// Service Unavailable; retry after 2m0s".
func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("server answered %d", e.Status)
	if text := http.StatusText(e.Status); text != "" {
		msg += " " + text
	}
	if e.RetryAfter > 0 {
		msg += "; retry after " + e.RetryAfter.String()
	}
	return msg
}

// Is reports whether target is ErrHTTPStatus.
func (e *HTTPError) Is(target error) bool { return target == ErrHTTPStatus }
