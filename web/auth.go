package web

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/slogfeed/slogfeed/reader/sanitize"
)

// Defaults of AuthOptions.
const (
	// DefaultSessionTTL is how long a session lasts after it is created.
	DefaultSessionTTL = 12 * time.Hour
	// DefaultMaxSessions bounds the sessions kept in memory.
	DefaultMaxSessions = 10000
)

// Login throttling: after loginFreeFailures failed logins from one client
// each further attempt waits loginBaseDelay, doubled per failure up to
// loginMaxDelay; a client's record is forgotten loginForget after its
// last failure. At most maxThrottled clients are tracked.
const (
	loginFreeFailures = 5
	loginBaseDelay    = time.Second
	loginMaxDelay     = 5 * time.Minute
	loginForget       = 15 * time.Minute
	maxThrottled      = 10000
)

// Names of the session cookie, the CSRF header and form field.
const (
	SessionCookie = "slogfeed_session"
	CSRFHeader    = "X-CSRF-Token"
	CSRFField     = "csrf_token"
)

// Errors of Auth.Login.
var (
	// ErrBadToken means the token given to log in is not the server's.
	ErrBadToken = errors.New("wrong token")
	// ErrThrottled means the client failed to log in too often and must
	// wait (see ThrottledError).
	ErrThrottled = errors.New("too many failed logins")
	// ErrNoLogin means the server has no token, so there is nothing to log
	// in to.
	ErrNoLogin = errors.New("this slogfeed needs no login")
)

// ThrottledError is the error of a login refused before its token is even
// checked; it matches ErrThrottled.
type ThrottledError struct {
	// Wait is how long the client must wait before it tries again.
	Wait time.Duration
}

// Error implements error.
func (e *ThrottledError) Error() string {
	return fmt.Sprintf("too many failed logins: try again in %s", e.Wait.Round(time.Second))
}

// Is reports whether target is ErrThrottled.
func (e *ThrottledError) Is(target error) bool { return target == ErrThrottled }

// AuthOptions configure NewAuth.
type AuthOptions struct {
	// Token, when set, is required to change anything: as
	// "Authorization: Bearer TOKEN", or through a session opened by
	// logging in to the web UI with it (token mode). Empty means no
	// login (loopback mode): the web UI only protects its forms against
	// cross-site requests.
	Token string
	// Loopback says the server listens on a loopback address only; every
	// request whose Host is neither a loopback address nor "localhost"
	// (or one of Hosts) is then refused, so a web page whose host name
	// resolves to 127.0.0.1 (DNS rebinding) cannot reach the server.
	Loopback bool
	// Hosts are further host names (without port) accepted when Loopback
	// is set, e.g. the host of the server's public URL behind a reverse
	// proxy.
	Hosts []string
	// SessionTTL is a session's lifetime (default DefaultSessionTTL).
	SessionTTL time.Duration
	// MaxSessions bounds the sessions kept in memory (default
	// DefaultMaxSessions). When full, expired sessions go first, then
	// the oldest that never logged in, then the oldest.
	MaxSessions int
	// Now returns the current time (default time.Now).
	Now func() time.Time
	// Logger receives failed logins (default: discarded).
	Logger *slog.Logger
}

// Auth guards slogfeed's HTTP server: bearer tokens for API clients,
// sessions with CSRF tokens for the web UI, login throttling and the
// DNS-rebinding guard. web.New applies it (see Options.Auth); the web UI
// uses Session, CheckCSRF, Login and Logout. It is safe for concurrent
// use.
type Auth struct {
	token    []byte // sha256 of the token; nil in loopback mode
	loopback bool
	hosts    map[string]bool
	ttl      time.Duration
	max      int
	now      func() time.Time
	log      *slog.Logger

	mu       sync.Mutex
	sessions map[string]*session
	failures map[string]*loginFailures
}

// session is one browser's session: anonymous (loopback mode, or before
// logging in) or logged in.
type session struct {
	csrf     string
	loggedIn bool
	created  time.Time
	expires  time.Time
}

// loginFailures counts a client's failed logins.
type loginFailures struct {
	n     int
	last  time.Time
	until time.Time // no attempt before
}

// Session is what the web UI knows of a request's session.
type Session struct {
	// CSRF is the token the UI's forms and scripts send back with
	// changes (form field CSRFField, header CSRFHeader).
	CSRF string
	// LoggedIn is set when the session logged in with the token.
	LoggedIn bool
}

// NewAuth returns an Auth configured by opt.
func NewAuth(opt AuthOptions) *Auth {
	a := &Auth{
		loopback: opt.Loopback,
		hosts:    make(map[string]bool),
		ttl:      opt.SessionTTL,
		max:      opt.MaxSessions,
		now:      opt.Now,
		log:      opt.Logger,
		sessions: make(map[string]*session),
		failures: make(map[string]*loginFailures),
	}
	if opt.Token != "" {
		h := sha256.Sum256([]byte(opt.Token))
		a.token = h[:]
	}
	for _, h := range opt.Hosts {
		a.hosts[strings.ToLower(strings.TrimSuffix(h, "."))] = true
	}
	if a.ttl <= 0 {
		a.ttl = DefaultSessionTTL
	}
	if a.max <= 0 {
		a.max = DefaultMaxSessions
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	return a
}

// TokenRequired reports whether the server runs in token mode: the web UI
// needs a login and changes need the token.
func (a *Auth) TokenRequired() bool { return a.token != nil }

// randomToken returns 32 random bytes, base64url-encoded.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// lookup returns the request's live session, or nil.
func (a *Auth) lookup(r *http.Request) (string, *session) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" || len(c.Value) > 128 {
		return "", nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[c.Value]
	if s == nil {
		return "", nil
	}
	if !a.now().Before(s.expires) {
		delete(a.sessions, c.Value)
		return "", nil
	}
	return c.Value, s
}

// Session returns the request's session. When it has none, an anonymous
// one is created and its cookie set on w, so that the page being written
// can carry a CSRF token.
func (a *Auth) Session(w http.ResponseWriter, r *http.Request) Session {
	if _, s := a.lookup(r); s != nil {
		return Session{CSRF: s.csrf, LoggedIn: s.loggedIn}
	}
	s := a.newSession(w, r, false)
	return Session{CSRF: s.csrf}
}

// LoggedIn reports whether the request belongs to a logged-in session.
func (a *Auth) LoggedIn(r *http.Request) bool {
	_, s := a.lookup(r)
	return s != nil && s.loggedIn
}

// newSession creates a session and sets its cookie on w.
func (a *Auth) newSession(w http.ResponseWriter, r *http.Request, loggedIn bool) *session {
	now := a.now()
	id := randomToken()
	s := &session{csrf: randomToken(), loggedIn: loggedIn, created: now, expires: now.Add(a.ttl)}
	a.mu.Lock()
	if len(a.sessions) >= a.max {
		a.evictLocked(now)
	}
	a.sessions[id] = s
	a.mu.Unlock()
	http.SetCookie(w, &http.Cookie{
		Name:     SessionCookie,
		Value:    id,
		Path:     "/",
		Expires:  s.expires,
		MaxAge:   int(a.ttl / time.Second),
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
	return s
}

// evictLocked makes room for one session: it drops the expired ones, else
// the oldest anonymous one, else the oldest.
func (a *Auth) evictLocked(now time.Time) {
	for id, s := range a.sessions {
		if !now.Before(s.expires) {
			delete(a.sessions, id)
		}
	}
	for len(a.sessions) >= a.max {
		var oldest string
		var oldestS *session
		for id, s := range a.sessions {
			if oldestS == nil || (!s.loggedIn && oldestS.loggedIn) ||
				(s.loggedIn == oldestS.loggedIn && s.created.Before(oldestS.created)) {
				oldest, oldestS = id, s
			}
		}
		delete(a.sessions, oldest)
	}
}

// CheckCSRF reports whether the request carries its session's CSRF token,
// in the CSRFHeader header or else the CSRFField form field. A form must
// have been parsed (with its size limits) before the call: CheckCSRF
// reads r.PostForm and r.MultipartForm, never the body.
func (a *Auth) CheckCSRF(r *http.Request) bool {
	_, s := a.lookup(r)
	if s == nil {
		return false
	}
	got := r.Header.Get(CSRFHeader)
	if got == "" {
		if r.PostForm != nil {
			got = r.PostForm.Get(CSRFField)
		}
		if got == "" && r.MultipartForm != nil {
			if v := r.MultipartForm.Value[CSRFField]; len(v) > 0 {
				got = v[0]
			}
		}
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) == 1
}

// Login opens a logged-in session for the request when token is the
// server's, setting its cookie on w; the request's previous session, if
// any, is dropped (a fresh id defeats session fixation). It fails with
// ErrBadToken, a *ThrottledError after repeated failures from the same
// client address, or ErrNoLogin in loopback mode.
func (a *Auth) Login(w http.ResponseWriter, r *http.Request, token string) error {
	if a.token == nil {
		return ErrNoLogin
	}
	client := clientKey(r)
	now := a.now()
	a.mu.Lock()
	if f := a.failures[client]; f != nil && now.Before(f.until) {
		a.mu.Unlock()
		return &ThrottledError{Wait: f.until.Sub(now)}
	}
	a.mu.Unlock()
	got := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(got[:], a.token) != 1 {
		a.fail(client, now)
		a.log.Warn("failed login", "client", client)
		return ErrBadToken
	}
	a.mu.Lock()
	delete(a.failures, client)
	a.mu.Unlock()
	if id, _ := a.lookup(r); id != "" {
		a.mu.Lock()
		delete(a.sessions, id)
		a.mu.Unlock()
	}
	a.newSession(w, r, true)
	return nil
}

// fail records a failed login of client.
func (a *Auth) fail(client string, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.failures[client]
	if f == nil {
		if len(a.failures) >= maxThrottled {
			for k, v := range a.failures {
				if now.Sub(v.last) > loginForget {
					delete(a.failures, k)
				}
			}
			for k := range a.failures {
				if len(a.failures) < maxThrottled {
					break
				}
				delete(a.failures, k)
			}
		}
		f = &loginFailures{}
		a.failures[client] = f
	}
	if now.Sub(f.last) > loginForget {
		f.n = 0
	}
	f.n++
	f.last = now
	if f.n >= loginFreeFailures {
		d := loginBaseDelay << min(f.n-loginFreeFailures, 20)
		f.until = now.Add(min(d, loginMaxDelay))
	}
}

// clientKey is the address a client's failed logins are counted under:
// its IP, or its /64 for IPv6.
func clientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// Logout ends the request's session and clears its cookie.
func (a *Auth) Logout(w http.ResponseWriter, r *http.Request) {
	if id, _ := a.lookup(r); id != "" {
		a.mu.Lock()
		delete(a.sessions, id)
		a.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
}

// SafeRedirect returns next when it is a path on this server, safe to
// redirect a browser to after logging in, else "/ui/feeds". A safe path
// starts with one "/" (not "//" nor "/\", which browsers read as another
// host), has no scheme or host, no backslash, and no control or space
// characters (browsers drop tabs and newlines from URLs, so "/\t/evil"
// would become "//evil").
func SafeRedirect(next string) string {
	const home = "/ui/feeds"
	if len(next) == 0 || len(next) > 2048 || next[0] != '/' {
		return home
	}
	if len(next) > 1 && (next[1] == '/' || next[1] == '\\') {
		return home
	}
	for i := 0; i < len(next); i++ {
		if c := next[i]; c <= ' ' || c == '\\' || c == 0x7f {
			return home
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return home
	}
	return next
}

// isUIPath reports whether path belongs to the web UI.
func isUIPath(path string) bool { return path == "/ui" || strings.HasPrefix(path, "/ui/") }

// uiPublic reports whether a UI path is served without a login: the login
// page and the static files.
func uiPublic(path string) bool {
	return path == "/ui/login" || strings.HasPrefix(path, "/ui/assets/") || strings.HasPrefix(path, "/ui/static/")
}

// allowedHost reports whether the request's Host passes the DNS-rebinding
// guard.
func (a *Auth) allowedHost(r *http.Request) bool {
	if !a.loopback || r.Host == "" {
		return true
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") || a.hosts[host] {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// protect wraps next with the guards of a: the DNS-rebinding guard, the
// refusal of cross-origin changes, the login of UI pages and the
// authentication of changes. Requests for which public reports true
// change things without the token (their handler authenticates its
// callers).
func (a *Auth) protect(next http.Handler, public func(*http.Request) bool) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		respondError(w, http.StatusForbidden, "cross-origin request refused: changes must come from this server's own pages")
	}))
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.authorize(w, r, public) {
			next.ServeHTTP(w, r)
		}
	})
	h = cop.Handler(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.allowedHost(r) {
			respondError(w, http.StatusMisdirectedRequest, fmt.Sprintf(
				"this slogfeed listens on loopback and answers only requests for localhost or a loopback address, not for host %q (a guard against DNS rebinding; set --public-url to serve another name)",
				sanitize.Clip(r.Host, 100)))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// authorize lets the request through or writes why not. UI changes are
// only required to come from a logged-in session here: the UI checks
// their CSRF token once it has read the form (see CheckCSRF).
func (a *Auth) authorize(w http.ResponseWriter, r *http.Request, public func(*http.Request) bool) bool {
	safe := r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions
	ui := isUIPath(r.URL.Path)
	if a.token == nil {
		return true
	}
	if ui {
		if uiPublic(r.URL.Path) || a.LoggedIn(r) || a.bearerOK(r) {
			return true
		}
		next := "/ui/feeds"
		if safe {
			next = r.URL.RequestURI()
		}
		http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(SafeRedirect(next)), http.StatusSeeOther)
		return false
	}
	if safe || public(r) || a.bearerOK(r) {
		return true
	}
	if a.LoggedIn(r) {
		if r.Header.Get(CSRFHeader) != "" && a.CheckCSRF(r) {
			return true
		}
		respondError(w, http.StatusForbidden, "missing or wrong "+CSRFHeader+" header: send the csrf-token of the page")
		return false
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="slogfeed"`)
	respondError(w, http.StatusUnauthorized, "this slogfeed requires a token for changes: send Authorization: Bearer TOKEN")
	return false
}

// bearerOK reports whether the request carries the token as a bearer
// token. The scheme is case-insensitive (RFC 9110: "bearer TOKEN" is
// "Bearer TOKEN"), and spaces around the token are ignored.
func (a *Auth) bearerOK(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || a.token == nil {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(got[:], a.token) == 1
}

// Owner reports whether the request comes from the owner of a
// token-protected server (the bearer token, or a logged-in UI session),
// or the server has no token. Reads that reveal secrets, such as the OPML
// export with the feeds' credentials, need it.
func (a *Auth) Owner(r *http.Request) bool {
	return a.token == nil || a.bearerOK(r) || a.LoggedIn(r)
}
