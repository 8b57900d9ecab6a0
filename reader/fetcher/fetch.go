package fetcher

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slogfeed/slogfeed/feedext"
	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/schedule"
)

// Fetch defaults.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultDialTimeout  = 10 * time.Second
	DefaultMaxBody      = 10 << 20 // 10 MiB, decompressed
	DefaultMaxRedirects = 5
	// DefaultMaxIdleConnsPerHost is how many kept-alive connections the
	// fetcher keeps per host, DefaultMaxIdleConns in all.
	DefaultMaxIdleConnsPerHost = 64
	DefaultMaxIdleConns        = 1024
)

// MaxCacheFor caps every delay a server can impose through Cache-Control,
// Expires or Retry-After: the same two days that cap every backoff.
const MaxCacheFor = schedule.MaxDelay

// maxPhase bounds the Slogfeed-Phase hint: the age of a feed's newest item
// is accepted up to ten years; a larger value is nonsense.
const maxPhase = 10 * 365 * 24 * time.Hour

// acceptHeader asks for feeds, in order of preference.
const acceptHeader = "application/rss+xml, application/atom+xml, application/feed+json, " +
	"application/rdf+xml;q=0.9, application/xml;q=0.9, text/xml;q=0.9, " +
	"application/json;q=0.8, */*;q=0.5"

// Options configures a Fetcher. Zero values take the defaults.
type Options struct {
	// Timeout bounds the whole request, redirects and body included.
	Timeout time.Duration
	// DialTimeout bounds each TCP connect (and the TLS handshake).
	DialTimeout time.Duration
	// MaxBody caps the decompressed body; a larger one fails with
	// ErrTooLarge and reading stops at the cap.
	MaxBody int64
	// MaxRedirects is how many redirects are followed (default 5; a
	// negative value follows none).
	MaxRedirects int
	// UserAgent defaults to "slogfeed/<version> (+https://slogfeed.org)".
	UserAgent string
	// Allow lists address ranges the SSRF guard lets through although they
	// are not public: a lab network.
	Allow []netip.Prefix
	// AllowEndpoints lists single addresses with their ports the SSRF
	// guard lets through although they are not public: the loopback
	// publishers of a demo, and nothing else on that machine.
	AllowEndpoints []netip.AddrPort
	// AllowAll switches the SSRF guard off. Dangerous: anyone who can add
	// a feed can then make slogfeed fetch from its own machine and private
	// network (cloud metadata, admin interfaces). For closed test setups
	// only.
	AllowAll bool
	// Proxy, when set, sends every request through this HTTP proxy. The
	// proxy from the environment (HTTP_PROXY, …) is never used. With a
	// proxy the guard sees the proxy's address, not the feed's: the proxy
	// must be allow-listed if it is private, and it is then the proxy's
	// job to refuse private targets (literal IP targets are still
	// checked here).
	Proxy *url.URL
	// Resolver resolves host names (tests use one that answers from a
	// table); nil uses the default resolver.
	Resolver *net.Resolver
	// Now is the clock for ReceivedAt; nil uses time.Now.
	Now func() time.Time
	// Transport, when set, carries every request instead of the network:
	// in-process publishers and tests under testing/synctest. Nothing is
	// dialled, so the SSRF guard does not apply; never set it from user
	// input.
	Transport http.RoundTripper
}

// Fetcher fetches feeds over HTTP with limits on time, size and redirects,
// conditional GET, and an SSRF guard. It is safe for concurrent use.
type Fetcher struct {
	opt    Options
	guard  *guard
	client *http.Client
	tr     *http.Transport
	ua     []string // the User-Agent header's value, shared by every request
}

// The values of the headers every fetch sends: shared, never changed.
var (
	acceptValue   = []string{acceptHeader}
	encodingValue = []string{"gzip"}
)

// Request is one fetch: the URL and the validators stored from the last
// response.
type Request struct {
	URL          string
	ETag         string
	LastModified string
}

// Response is what a fetch returned. A 304 (or a 200 whose validators say
// nothing changed) has NotModified set and no Body.
type Response struct {
	// Status is the HTTP status code.
	Status int
	// NotModified reports a 304, or a 200 carrying the very ETag (or, when
	// there is no ETag, Last-Modified) that was sent: a miss.
	NotModified bool
	// Body is the decompressed body, at most MaxBody bytes.
	Body []byte
	// ContentType is the Content-Type header.
	ContentType string
	// ETag and LastModified are the validators to store for the next
	// conditional GET (the request's own when a 304 repeats none).
	ETag, LastModified string
	// LastModifiedTime is Last-Modified parsed (zero if absent or invalid).
	LastModifiedTime time.Time
	// Date is the server's Date header (zero if absent or invalid).
	Date time.Time
	// ReceivedAt is when the response headers arrived (the fetcher's clock).
	ReceivedAt time.Time
	// CacheFor is how long the server says the response stays fresh:
	// max(Cache-Control max-age or s-maxage minus Age, Expires − Date);
	// zero with no-store or no-cache; capped at MaxCacheFor.
	CacheFor time.Duration
	// RetryAfter is the Retry-After delay of a 429 or 503, capped at
	// MaxCacheFor.
	RetryAfter time.Duration
	// Hints are slogfeed's publisher hints (Slogfeed-Phase,
	// Slogfeed-Desync, Slogfeed-Due) with CacheFor copied in.
	Hints schedule.Hints
	// More reports Slogfeed-More: the publisher has more data waiting.
	More bool
	// Next is the publisher's predicted next publish (Slogfeed-Next), zero
	// when not given.
	Next time.Time
	// FinalURL is the URL that answered, after redirects.
	FinalURL string
}

// Delivered returns the Response a pushed document stands for: a 200 with
// body, received at received from url, its validators, cache lifetime and
// publisher hints read from header as Fetch reads them from a response.
func Delivered(body []byte, header http.Header, received time.Time, url string) *Response {
	r := &Response{
		Status: http.StatusOK, Body: body, ContentType: header.Get("Content-Type"),
		ReceivedAt: received, FinalURL: url,
	}
	readHeaders(r, header)
	return r
}

// New returns a Fetcher with opt's limits.
func New(opt Options) *Fetcher {
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	if opt.DialTimeout <= 0 {
		opt.DialTimeout = DefaultDialTimeout
	}
	if opt.MaxBody <= 0 {
		opt.MaxBody = DefaultMaxBody
	}
	if opt.MaxRedirects == 0 {
		opt.MaxRedirects = DefaultMaxRedirects
	}
	if opt.UserAgent == "" {
		opt.UserAgent = DefaultUserAgent()
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	opt.Allow = append([]netip.Prefix(nil), opt.Allow...)
	opt.AllowEndpoints = append([]netip.AddrPort(nil), opt.AllowEndpoints...)
	f := &Fetcher{opt: opt, guard: &guard{allow: opt.Allow, endpoints: opt.AllowEndpoints, allowAll: opt.AllowAll}, ua: []string{opt.UserAgent}}
	dialer := &net.Dialer{
		Timeout:   opt.DialTimeout,
		KeepAlive: 30 * time.Second,
		Resolver:  opt.Resolver,
		Control:   f.guard.control,
	}
	f.tr = &http.Transport{
		DialContext:       dialer.DialContext,
		ForceAttemptHTTP2: true,
		// Keep-alive reuse: as many idle connections per host as the
		// scheduler lets fetches of one host run at once (serve's
		// --per-host, a few; a sensor network's gateway may be given
		// more), so that concurrent fetches of a host reuse theirs
		// instead of dialling anew.
		MaxIdleConns:          DefaultMaxIdleConns,
		MaxIdleConnsPerHost:   DefaultMaxIdleConnsPerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   opt.DialTimeout,
		ExpectContinueTimeout: time.Second,
		// No ResponseHeaderTimeout: every request through this transport
		// is bounded by opt.Timeout as a whole (Fetch's context, Client's
		// Timeout), which ends before a header timeout as long would, and
		// a second timer per request costs every poll.
		MaxResponseHeaderBytes: 64 << 10,
		// Bodies are decompressed here, under the MaxBody cap.
		DisableCompression: true,
	}
	if opt.Proxy != nil {
		f.tr.Proxy = http.ProxyURL(opt.Proxy)
	}
	f.client = &http.Client{Transport: f.tr, CheckRedirect: f.checkRedirect}
	if opt.Transport != nil {
		f.client.Transport = opt.Transport
	}
	return f
}

// MaxBody is the largest decompressed body the fetcher reads.
func (f *Fetcher) MaxBody() int64 { return f.opt.MaxBody }

// Client returns an HTTP client for other outgoing requests (webhook
// deliveries, WebSub verification and distribution) that goes through the
// fetcher's SSRF guard, dial timeout and redirect limit, with Timeout as
// its whole-request deadline. Callers bound response bodies themselves
// (http.MaxBytesReader or io.LimitReader).
func (f *Fetcher) Client() *http.Client {
	return &http.Client{Transport: f.client.Transport, CheckRedirect: f.checkRedirect, Timeout: f.opt.Timeout}
}

// DefaultUserAgent is "slogfeed/<version> (+https://slogfeed.org)", the
// version coming from the build information: UserAgent of a single node.
func DefaultUserAgent() string {
	v := "dev"
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v = strings.TrimPrefix(info.Main.Version, "v")
	}
	return UserAgent(v, "")
}

// UserAgent is the fetcher's User-Agent for a version and a cluster
// node: "slogfeed/<version> (node <node>; +https://slogfeed.org)", so
// publishers and logs can tell a cluster's nodes apart. A single slogfeed
// (node "") sends "slogfeed/<version> (+https://slogfeed.org)", without a
// host name.
func UserAgent(version, node string) string {
	if node == "" {
		return "slogfeed/" + version + " (+https://slogfeed.org)"
	}
	return "slogfeed/" + version + " (node " + node + "; +https://slogfeed.org)"
}

// CloseIdleConnections closes the connections kept alive for reuse.
func (f *Fetcher) CloseIdleConnections() { f.tr.CloseIdleConnections() }

// checkURL parses raw and checks its scheme, host and (when literal) address.
func (f *Fetcher) checkURL(raw string) (*url.URL, error) {
	if len(raw) > 8192 {
		return nil, fmt.Errorf("%w: longer than 8192 bytes", ErrInvalidURL)
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	return u, f.checkTarget(u)
}

// checkTarget checks a request or redirect URL before any connection.
func (f *Fetcher) checkTarget(u *url.URL) error {
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	case "":
		return fmt.Errorf("%w: no scheme (http:// or https://)", ErrInvalidURL)
	default:
		return fmt.Errorf("%w, not %.20s:", ErrScheme, u.Scheme)
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("%w: no host", ErrInvalidURL)
	}
	port := urlPort(u)
	if port == 0 {
		return fmt.Errorf("%w: port %.8q", ErrInvalidURL, u.Port())
	}
	ip, literal, err := literalHost(host)
	switch {
	case err != nil:
		return err
	case !literal:
		return nil // the guard checks the addresses it resolves to when they are dialled
	}
	if err := f.guard.check(ip, port); err != nil {
		return err
	}
	if !isLocalhost(host) && ip.Is4() && ip.String() != host {
		// "127.1", "0x7f000001": dial the address itself, with no DNS
		// query for it.
		given := u.Port()
		u.Host = ip.String()
		if given != "" {
			u.Host += ":" + given
		}
	}
	return nil
}

// urlPort is the port a request to u connects to: its own, else the
// scheme's; 0 for a port that is not one (0, over 65535) or a scheme
// without a default.
func urlPort(u *url.URL) uint16 {
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return 0
		}
		return uint16(n)
	}
	switch strings.ToLower(u.Scheme) {
	case "http":
		return 80
	case "https":
		return 443
	}
	return 0
}

// CheckURL checks a feed URL before it is stored: an absolute http or
// https URL with a host, whose host, when it is an IP address in any
// form (literalHost), is one the SSRF guard lets through; such a host is
// written in its usual form ("http://127.1/" → "http://127.0.0.1/"). It
// sends no DNS query: a host name is checked when its addresses are
// dialled. Errors wrap ErrInvalidURL, ErrScheme or ErrBlocked.
func (f *Fetcher) CheckURL(raw string) (string, error) {
	u, err := f.checkURL(raw)
	if err != nil {
		if u != nil {
			return "", fmt.Errorf("%s: %w", sanitize.RedactURL(u.String()), err)
		}
		return "", err
	}
	return u.String(), nil
}

// checkRedirect enforces MaxRedirects and the scheme rule on redirects; the
// guard checks their addresses when they are dialled.
func (f *Fetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	max := f.opt.MaxRedirects
	if max < 0 {
		max = 0
	}
	if len(via) > max {
		return fmt.Errorf("%w: stopped after %d", ErrTooManyRedirects, max)
	}
	if err := f.checkTarget(req.URL); err != nil {
		return fmt.Errorf("redirect to %s: %w", sanitize.RedactURL(req.URL.String()), err)
	}
	return nil
}

// errTimeout is the cause of the fetch's own deadline.
var errTimeout = errors.New("fetch deadline")

// Fetch performs a conditional GET of req.URL. It returns a Response for
// 2xx and 304 answers, an *HTTPError for other statuses, and errors
// wrapping ErrInvalidURL, ErrScheme, ErrBlocked, ErrTooManyRedirects,
// ErrTooLarge, ErrTimeout or ErrEncoding for what went wrong before.
func (f *Fetcher) Fetch(ctx context.Context, req Request) (*Response, error) {
	u, err := f.checkURL(req.URL)
	if err != nil {
		if u != nil {
			return nil, fmt.Errorf("fetch %.200s: %w", sanitize.RedactURL(u.String()), err)
		}
		return nil, fmt.Errorf("fetch %.200q: %w", sanitize.RedactURL(req.URL), err)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, f.opt.Timeout, errTimeout)
	defer cancel()
	target := u.String() // once: it is also the final URL when nothing redirected
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w: %v", sanitize.RedactURL(target), ErrInvalidURL, err)
	}
	h := hreq.Header // canonical keys, and the values shared, not copied
	h["User-Agent"], h["Accept"], h["Accept-Encoding"] = f.ua, acceptValue, encodingValue
	if v := headerSafe(req.ETag); v != "" {
		hreq.Header.Set("If-None-Match", v)
	}
	if v := headerSafe(req.LastModified); v != "" {
		hreq.Header.Set("If-Modified-Since", v)
	}

	hresp, err := f.client.Do(hreq)
	if err != nil {
		return nil, f.wrapErr(ctx, u, err)
	}
	defer hresp.Body.Close()

	final := target
	if hresp.Request != hreq { // redirected
		final = hresp.Request.URL.String()
	}
	r := &Response{
		Status:      hresp.StatusCode,
		ReceivedAt:  f.opt.Now(),
		ContentType: hresp.Header.Get("Content-Type"),
		FinalURL:    final,
	}
	readHeaders(r, hresp.Header)

	switch {
	case hresp.StatusCode == http.StatusNotModified:
		r.NotModified = true
		if r.ETag == "" {
			r.ETag = req.ETag
		}
		if r.LastModified == "" {
			r.LastModified = req.LastModified
			r.LastModifiedTime = parseHTTPTime(r.LastModified)
		}
		return r, nil
	case hresp.StatusCode >= 200 && hresp.StatusCode < 300:
		if unchanged(r, req) {
			r.NotModified = true
			return r, nil
		}
		body, err := readBody(hresp, f.opt.MaxBody)
		if err != nil {
			return nil, f.wrapErr(ctx, u, err)
		}
		r.Body = body
		return r, nil
	default:
		return nil, fmt.Errorf("fetch %s: %w", sanitize.RedactURL(u.String()), &HTTPError{
			Status:     hresp.StatusCode,
			RetryAfter: r.RetryAfter,
			URL:        r.FinalURL,
		})
	}
}

// unchanged reports a 200 that repeats the validators sent: the server
// ignores conditional requests, but the feed has not changed. The ETag
// decides when both sides have one; Last-Modified only otherwise.
func unchanged(r *Response, req Request) bool {
	if r.ETag != "" && req.ETag != "" {
		return r.ETag == req.ETag && !strings.HasPrefix(r.ETag, "W/")
	}
	return r.ETag == "" && r.LastModified != "" && r.LastModified == req.LastModified
}

// headerSafe returns v when it can be sent as a header value, else "".
func headerSafe(v string) string {
	v = strings.TrimSpace(v)
	if len(v) > 1024 {
		return ""
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c == 0x7f {
			return ""
		}
	}
	return v
}

// wrapErr turns a client error into one wrapping slogfeed's sentinels.
func (f *Fetcher) wrapErr(ctx context.Context, u *url.URL, err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err // its message repeats the method and URL
	}
	var nerr net.Error
	switch {
	case errors.Is(err, ErrBlocked), errors.Is(err, ErrScheme), errors.Is(err, ErrInvalidURL),
		errors.Is(err, ErrTooManyRedirects), errors.Is(err, ErrTooLarge), errors.Is(err, ErrEncoding):
		return fmt.Errorf("fetch %s: %w", sanitize.RedactURL(u.String()), err)
	case context.Cause(ctx) == errTimeout:
		return fmt.Errorf("fetch %s: %w after %v", sanitize.RedactURL(u.String()), ErrTimeout, f.opt.Timeout)
	case errors.As(err, &nerr) && nerr.Timeout():
		return fmt.Errorf("fetch %s: %w: %v", sanitize.RedactURL(u.String()), ErrTimeout, err)
	}
	return fmt.Errorf("fetch %s: %w", sanitize.RedactURL(u.String()), err)
}

// readBody reads the body, decompressing gzip and deflate, and fails with
// ErrTooLarge once more than max bytes come out. The body is read into a
// pooled buffer and copied out at its exact size: one allocation per body
// whatever its size and however the server sent it (chunked bodies
// announce no length).
func readBody(resp *http.Response, max int64) ([]byte, error) {
	enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding")))
	switch enc {
	case "", "identity":
		enc = ""
		if resp.ContentLength > max {
			return nil, fmt.Errorf("%w: the server announced %d bytes, the limit is %d", ErrTooLarge, resp.ContentLength, max)
		}
	case "gzip", "x-gzip":
		enc = "gzip"
	case "deflate":
	default:
		return nil, fmt.Errorf("%w: %.40q", ErrEncoding, enc)
	}
	bp := getReadBuf()
	defer putReadBuf(bp)
	if enc == "" && resp.ContentLength > 0 {
		*bp = slices.Grow((*bp)[:0], int(resp.ContentLength)+1)
	}
	body, err := readDecoded(bp, resp.Body, enc, max)
	if err != nil {
		return nil, err
	}
	// Some servers send a .gz file as is: recognise the gzip magic.
	if enc == "" && len(body) >= 2 && body[0] == 0x1f && body[1] == 0x8b {
		zp := getReadBuf()
		defer putReadBuf(zp)
		if body, err = readDecoded(zp, bytes.NewReader(body), "gzip", max); err != nil {
			return nil, err
		}
	}
	return bytes.Clone(body), nil
}

// readDecoded reads r, compressed with the content coding enc ("gzip",
// "deflate", or "" for none), into *bp (which it keeps grown for the
// pool) and returns what came out, failing with ErrTooLarge once more
// than max bytes do.
//
// deflate is the zlib format (RFC 9110 8.4.1.2); a body in the raw
// deflate format without the zlib wrapping, which some servers send
// under that name, is read too.
func readDecoded(bp *[]byte, r io.Reader, enc string, max int64) ([]byte, error) {
	switch enc {
	case "gzip":
		zr, err := getGzipReader(r)
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %w", ErrEncoding, err)
		}
		defer gzipReaders.Put(zr)
		r = zr
	case "deflate":
		br := bufio.NewReader(r)
		if isZlibHeader(br) {
			zr, err := zlib.NewReader(br)
			if err != nil {
				return nil, fmt.Errorf("%w: deflate: %w", ErrEncoding, err)
			}
			defer zr.Close()
			r = zr
		} else {
			fr := flate.NewReader(br)
			defer fr.Close()
			r = fr
		}
	}
	buf, err := readAtMost((*bp)[:0], r, max+1)
	*bp = buf[:0]
	if int64(len(buf)) > max {
		return nil, fmt.Errorf("%w: more than %d bytes (decompressed)", ErrTooLarge, max)
	}
	if err != nil {
		if enc != "" && (errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) ||
			errors.Is(err, zlib.ErrChecksum) || errors.Is(err, zlib.ErrHeader) || errors.Is(err, zlib.ErrDictionary) ||
			errors.Is(err, io.ErrUnexpectedEOF) || isFlateError(err)) {
			return nil, fmt.Errorf("%w: %s: %w", ErrEncoding, enc, err)
		}
		return nil, fmt.Errorf("read body: %w", err)
	}
	return buf, nil
}

// isZlibHeader reports whether br starts with a zlib header (RFC 1950):
// the deflate method and a header checksum that holds.
func isZlibHeader(br *bufio.Reader) bool {
	h, err := br.Peek(2)
	if err != nil {
		return false
	}
	return h[0]&0x0f == 8 && h[0]>>4 <= 7 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0
}

// readAtMost appends what r gives to buf until EOF or until limit bytes
// are in buf; the error is nil at EOF.
func readAtMost(buf []byte, r io.Reader, limit int64) ([]byte, error) {
	for int64(len(buf)) < limit {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(minReadBuf, cap(buf)))
		}
		room := buf[len(buf):cap(buf)]
		if rest := limit - int64(len(buf)); int64(len(room)) > rest {
			room = room[:rest]
		}
		n, err := r.Read(room)
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// Read buffers: pooled up to maxPooledReadBuf bytes each, so that a rare
// large body does not stay in memory.
const (
	minReadBuf       = 16 << 10
	maxPooledReadBuf = 1 << 20
)

var readBufs = sync.Pool{New: func() any { return new([]byte) }}

func getReadBuf() *[]byte { return readBufs.Get().(*[]byte) }

func putReadBuf(bp *[]byte) {
	if cap(*bp) <= maxPooledReadBuf {
		readBufs.Put(bp)
	}
}

// gzipReaders holds gzip readers for reuse: each holds a decompressor of
// about 40 KB.
var gzipReaders sync.Pool

func getGzipReader(r io.Reader) (*gzip.Reader, error) {
	if zr, ok := gzipReaders.Get().(*gzip.Reader); ok {
		if err := zr.Reset(r); err != nil {
			gzipReaders.Put(zr)
			return nil, err
		}
		return zr, nil
	}
	return gzip.NewReader(r)
}

func isFlateError(err error) bool {
	var ce flate.CorruptInputError
	return errors.As(err, &ce)
}

// readHeaders fills the validators, dates, cache lifetime, Retry-After and
// slogfeed hints of r from h.
func readHeaders(r *Response, h http.Header) {
	r.ETag = headerSafe(h.Get("ETag"))
	r.LastModified = headerSafe(h.Get("Last-Modified"))
	r.LastModifiedTime = parseHTTPTime(r.LastModified)
	r.Date = parseHTTPTime(h.Get("Date"))
	ref := r.Date
	if ref.IsZero() {
		ref = r.ReceivedAt
	}
	r.CacheFor = cacheFor(h, ref)
	if r.Status == http.StatusTooManyRequests || r.Status == http.StatusServiceUnavailable {
		r.RetryAfter = retryAfter(h.Get("Retry-After"), ref)
	}
	r.Hints, r.More, r.Next = hints(h)
	r.Hints.CacheFor = r.CacheFor
}

// parseHTTPTime parses an HTTP date (RFC 1123 and the two older forms);
// zero when s is empty or invalid.
func parseHTTPTime(s string) time.Time {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 64 {
		return time.Time{}
	}
	t, err := http.ParseTime(s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// cacheFor is the response's freshness lifetime: the larger of
// Cache-Control max-age / s-maxage (minus Age) and Expires − Date, zero
// with no-store or no-cache, capped at MaxCacheFor. date is the Date header
// (or the receive time when it is missing).
func cacheFor(h http.Header, date time.Time) time.Duration {
	var best time.Duration
	age := max(seconds(h.Get("Age")), 0)
	for _, line := range h.Values("Cache-Control") {
		for _, dir := range strings.Split(line, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(dir), "=")
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "no-store", "no-cache":
				return 0
			case "max-age", "s-maxage":
				if d := seconds(strings.Trim(strings.TrimSpace(val), `"`)); d > 0 {
					best = max(best, d-age)
				}
			}
		}
	}
	if v := strings.TrimSpace(h.Get("Expires")); v != "" && !date.IsZero() {
		if t := parseHTTPTime(v); !t.IsZero() {
			best = max(best, t.Sub(date))
		}
	}
	return clampDelay(best)
}

// retryAfter parses a Retry-After value: delay-seconds or an HTTP date
// (relative to date). Capped at MaxCacheFor; zero when invalid or past.
func retryAfter(v string, date time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if d := seconds(v); d > 0 {
		return clampDelay(d)
	}
	if t := parseHTTPTime(v); !t.IsZero() && !date.IsZero() {
		return clampDelay(t.Sub(date))
	}
	return 0
}

// seconds parses a non-negative whole number of seconds; -1s when s is not
// one. Huge values saturate.
func seconds(s string) time.Duration {
	s = strings.TrimSpace(s)
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return -time.Second
	}
	if len(s) > 12 {
		return math.MaxInt64
	}
	n, _ := strconv.ParseInt(s, 10, 64)
	if n > math.MaxInt64/int64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(n) * time.Second
}

// clampDelay keeps d within [0, MaxCacheFor].
func clampDelay(d time.Duration) time.Duration {
	return min(max(d, 0), MaxCacheFor)
}

// hints reads slogfeed's publisher headers (package feedext). Invalid
// values are ignored.
func hints(h http.Header) (hs schedule.Hints, more bool, next time.Time) {
	if d, ok := secondsFloat(h.Get(feedext.HeaderPhase), maxPhase); ok {
		hs.Phase, hs.HasPhase = d, true
	}
	if d, ok := secondsFloat(h.Get(feedext.HeaderDesync), MaxCacheFor); ok {
		hs.Desync = d
	}
	if d, ok := secondsFloat(h.Get(feedext.HeaderDue), schedule.MaxDelay); ok {
		hs.Due, hs.HasDue = d, true
	}
	switch strings.ToLower(strings.TrimSpace(h.Get(feedext.HeaderMore))) {
	case "1", "true", "yes":
		more = true
	}
	if v := strings.TrimSpace(h.Get(feedext.HeaderNext)); v != "" && len(v) <= 64 {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			next = t
		}
	}
	return hs, more, next
}

// secondsFloat parses a decimal number of seconds in [0, limit].
func secondsFloat(s string, limit time.Duration) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 32 {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > limit.Seconds() {
		return 0, false
	}
	return time.Duration(math.Round(f * float64(time.Second))), true
}
