package web

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestSafeRedirect(t *testing.T) {
	tests := []struct{ next, want string }{
		{"/ui/pipes", "/ui/pipes"},
		{"/ui/sensors?sensor=a&b=c", "/ui/sensors?sensor=a&b=c"},
		{"/", "/"},
		{"/ui/feeds/3#latency", "/ui/feeds/3#latency"},
		{"", "/ui/feeds"},
		{"//evil.com", "/ui/feeds"},
		{"///evil.com", "/ui/feeds"},
		{"https://evil.com", "/ui/feeds"},
		{"https:/evil.com", "/ui/feeds"},
		{`/\evil.com`, "/ui/feeds"},
		{`/ui\..\..\evil`, "/ui/feeds"},
		{"/\t/evil.com", "/ui/feeds"},
		{"/\n/evil.com", "/ui/feeds"},
		{"/ /evil.com", "/ui/feeds"},
		{"javascript:alert(1)", "/ui/feeds"},
		{"ui/feeds", "/ui/feeds"},
		{"/%zz", "/ui/feeds"},
		{"/" + strings.Repeat("a", 3000), "/ui/feeds"},
	}
	for _, tt := range tests {
		t.Run(tt.next, func(t *testing.T) {
			if got := SafeRedirect(tt.next); got != tt.want {
				t.Errorf("SafeRedirect(%q) = %q, want %q", tt.next, got, tt.want)
			}
		})
	}
}

// FuzzSafeRedirect: whatever next is, the browser stays on this server.
func FuzzSafeRedirect(f *testing.F) {
	for _, s := range []string{"/ui/pipes", "//evil.com", `/\evil.com`, "https://evil.com", "/\t/x", "/a?b=//c", "/%2F%2Fevil"} {
		f.Add(s)
	}
	base, _ := url.Parse("http://127.0.0.1:8080/ui/login")
	f.Fuzz(func(t *testing.T, next string) {
		got := SafeRedirect(next)
		if got != next && got != "/ui/feeds" {
			t.Fatalf("SafeRedirect(%q) = %q: neither the input nor the default", next, got)
		}
		u, err := url.Parse(got)
		if err != nil {
			t.Fatalf("SafeRedirect(%q) = %q does not parse: %v", next, got, err)
		}
		if dest := base.ResolveReference(u); dest.Host != base.Host || dest.Scheme != base.Scheme {
			t.Fatalf("SafeRedirect(%q) = %q leads to %s", next, got, dest)
		}
		// Browsers also read backslashes as slashes and drop tabs and
		// newlines: none of them may survive.
		if strings.ContainsAny(got, "\\\t\n\r ") || strings.HasPrefix(got, "//") {
			t.Fatalf("SafeRedirect(%q) = %q", next, got)
		}
		// What the login handler sends: the Location after http.Redirect.
		rec := httptest.NewRecorder()
		http.Redirect(rec, httptest.NewRequest("POST", "/ui/login", nil), got, http.StatusSeeOther)
		loc, err := url.Parse(rec.Header().Get("Location"))
		if err != nil || base.ResolveReference(loc).Host != base.Host || strings.HasPrefix(loc.String(), "//") {
			t.Fatalf("Location %q for %q", rec.Header().Get("Location"), next)
		}
	})
}

type authClock struct{ t time.Time }

func (c *authClock) Now() time.Time { return c.t }

func request(remote string, cookies ...*http.Cookie) *http.Request {
	r := httptest.NewRequest("POST", "/ui/login", nil)
	r.RemoteAddr = remote
	for _, c := range cookies {
		r.AddCookie(c)
	}
	return r
}

func sessionCookie(t *testing.T, rec *httptest.ResponseRecorder) *http.Cookie {
	t.Helper()
	for _, c := range rec.Result().Cookies() {
		if c.Name == SessionCookie && c.Value != "" {
			return c
		}
	}
	t.Fatal("no session cookie set")
	return nil
}

func TestLoginThrottle(t *testing.T) {
	clock := &authClock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	a := NewAuth(AuthOptions{Token: "tok", Now: clock.Now})
	login := func(remote, token string) error {
		return a.Login(httptest.NewRecorder(), request(remote), token)
	}
	const client = "203.0.113.7:4000"
	for i := range loginFreeFailures {
		if err := login(client, "bad"); !errors.Is(err, ErrBadToken) {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	// Blocked for a second, then two after the next failure…
	steps := []struct {
		wait time.Duration
		want error
	}{
		{0, ErrThrottled},
		{999 * time.Millisecond, ErrThrottled},
		{time.Millisecond, ErrBadToken}, // allowed again, and fails: 2 s now
		{1500 * time.Millisecond, ErrThrottled},
		{500 * time.Millisecond, ErrBadToken},
	}
	for i, s := range steps {
		clock.t = clock.t.Add(s.wait)
		if err := login(client, "bad"); !errors.Is(err, s.want) {
			t.Fatalf("step %d: %v, want %v", i, err, s.want)
		}
	}
	var th *ThrottledError
	if err := login(client, "tok"); !errors.As(err, &th) || th.Wait != 4*time.Second {
		t.Fatalf("the right token while throttled: %v", err)
	}
	// Another client, and another port of the same IPv6 /64, are apart.
	if err := login("198.51.100.1:1", "tok"); err != nil {
		t.Fatalf("another client: %v", err)
	}
	for range loginFreeFailures {
		_ = login("[2001:db8::1]:1", "bad")
	}
	if err := login("[2001:db8::2]:2", "tok"); !errors.Is(err, ErrThrottled) {
		t.Fatalf("same /64: %v", err)
	}
	// Forgotten after a quiet while; a success resets the count.
	clock.t = clock.t.Add(loginForget + time.Second)
	if err := login(client, "tok"); err != nil {
		t.Fatalf("after a quiet while: %v", err)
	}
	if err := login(client, "bad"); !errors.Is(err, ErrBadToken) {
		t.Fatalf("after a success: %v", err)
	}
	if err := NewAuth(AuthOptions{}).Login(httptest.NewRecorder(), request(client), "x"); !errors.Is(err, ErrNoLogin) {
		t.Fatalf("loopback mode: %v", err)
	}
}

func TestSessions(t *testing.T) {
	clock := &authClock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	a := NewAuth(AuthOptions{Token: "tok", Now: clock.Now, MaxSessions: 3, SessionTTL: time.Hour})
	loginRec := httptest.NewRecorder()
	if err := a.Login(loginRec, request("192.0.2.1:1"), "tok"); err != nil {
		t.Fatal(err)
	}
	admin := sessionCookie(t, loginRec)
	if !a.LoggedIn(request("192.0.2.1:1", admin)) {
		t.Fatal("not logged in")
	}
	// Anonymous sessions fill the table; the logged-in one survives them.
	var anon []*http.Cookie
	for range 5 {
		clock.t = clock.t.Add(time.Second)
		rec := httptest.NewRecorder()
		s := a.Session(rec, request("192.0.2.9:1"))
		if s.CSRF == "" || s.LoggedIn {
			t.Fatalf("anonymous session %+v", s)
		}
		anon = append(anon, sessionCookie(t, rec))
	}
	if !a.LoggedIn(request("192.0.2.1:1", admin)) {
		t.Fatal("an anonymous session evicted the logged-in one")
	}
	if s := a.Session(httptest.NewRecorder(), request("x", anon[0])); s.CSRF == "" {
		t.Fatal("no session")
	}
	a.mu.Lock()
	n := len(a.sessions)
	a.mu.Unlock()
	if n > 3 {
		t.Fatalf("%d sessions kept, max 3", n)
	}
	// Sessions expire.
	clock.t = clock.t.Add(time.Hour)
	if a.LoggedIn(request("192.0.2.1:1", admin)) {
		t.Fatal("session outlived its TTL")
	}
	// A forged or overlong cookie is no session.
	for _, v := range []string{"forged", strings.Repeat("x", 200)} {
		if a.LoggedIn(request("x", &http.Cookie{Name: SessionCookie, Value: v})) {
			t.Fatalf("cookie %q accepted", v)
		}
	}
}

func TestAllowedHost(t *testing.T) {
	a := NewAuth(AuthOptions{Loopback: true, Hosts: []string{"slog.example.org"}})
	tests := []struct {
		host string
		ok   bool
	}{
		{"localhost", true}, {"LOCALHOST:8080", true}, {"localhost.", true}, {"app.localhost:80", true},
		{"127.0.0.1:8080", true}, {"127.5.6.7", true}, {"[::1]:8080", true}, {"[::ffff:127.0.0.1]:1", true},
		{"slog.example.org", true}, {"", true},
		{"evil.example", false}, {"localhost.evil.example", false}, {"10.0.0.1:8080", false}, {"[::2]:80", false},
		{"0.0.0.0:8080", false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = tt.host
		if got := a.allowedHost(r); got != tt.ok {
			t.Errorf("allowedHost(%q) = %v, want %v", tt.host, got, tt.ok)
		}
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Host = "evil.example"
	if !NewAuth(AuthOptions{}).allowedHost(r) {
		t.Error("host checked off loopback")
	}
}

func TestBearerToken(t *testing.T) {
	a := NewAuth(AuthOptions{Token: "t0ken"})
	for header, ok := range map[string]bool{
		"Bearer t0ken":    true,
		"bearer t0ken":    true, // RFC 9110: the scheme is case-insensitive
		"BEARER t0ken":    true,
		"Bearer  t0ken  ": true,
		" bearer t0ken":   true,
		"Bearer T0KEN":    false, // the token is not
		"Bearer t0ken2":   false,
		"Bearert0ken":     false,
		"Basic t0ken":     false,
		"Bearer":          false,
		"t0ken":           false,
		"":                false,
	} {
		r := httptest.NewRequest("GET", "/api/v1/opml", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		if got := a.bearerOK(r); got != ok {
			t.Errorf("%q: bearerOK %v, want %v", header, got, ok)
		}
		if got := a.Owner(r); got != ok {
			t.Errorf("%q: Owner %v, want %v", header, got, ok)
		}
	}
	if open := NewAuth(AuthOptions{}); !open.Owner(httptest.NewRequest("GET", "/", nil)) || open.bearerOK(httptest.NewRequest("GET", "/", nil)) {
		t.Errorf("loopback mode: everyone is the owner, and no bearer token matches")
	}
}
