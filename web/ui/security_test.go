package ui

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/web"
)

// TestTokenMode: off loopback the UI needs a login with the token.
func TestTokenMode(t *testing.T) {
	const token = "s3cret-token"
	e := newEnv(t, envOptions{token: token})

	t.Run("pages redirect to the login", func(t *testing.T) {
		c := e.client(t)
		for path, next := range map[string]string{
			"/ui/feeds":            "%2Fui%2Ffeeds",
			"/ui/pipes/new":        "%2Fui%2Fpipes%2Fnew",
			"/ui/sensors?sensor=x": "%2Fui%2Fsensors%3Fsensor%3Dx",
		} {
			r := c.get(t, path)
			if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/login?next="+next {
				t.Errorf("%s: %d %q", path, r.status, r.header.Get("Location"))
			}
		}
		r := c.post(t, "/ui/feeds", url.Values{"url": {"https://example.org/x.rss"}}, true)
		if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/ui/login") {
			t.Errorf("POST without a session: %d %q", r.status, r.header.Get("Location"))
		}
	})

	t.Run("login page", func(t *testing.T) {
		c := e.client(t)
		r := c.get(t, "/ui/login?next=/ui/pipes")
		if r.status != http.StatusOK {
			t.Fatalf("status %d", r.status)
		}
		checkPage(t, r)
		for _, want := range []string{`<label for="token">Token</label>`, `>Log in</button>`, `name="next" value="/ui/pipes"`} {
			if !strings.Contains(r.body, want) {
				t.Errorf("login page lacks %q", want)
			}
		}
		if strings.Contains(r.body, "Log out") {
			t.Error("Log out shown before logging in")
		}
	})

	t.Run("bad token", func(t *testing.T) {
		c := e.client(t)
		r := c.login(t, "wrong")
		if r.status != http.StatusUnauthorized {
			t.Fatalf("status %d", r.status)
		}
		checkPage(t, r)
		if !strings.Contains(r.body, "That token is not this slogfeed&#39;s.") {
			t.Errorf("no clear message: %.2000s", r.body)
		}
		if c.get(t, "/ui/feeds").status != http.StatusSeeOther {
			t.Error("a bad token opened a session")
		}
	})

	t.Run("login sets the cookie", func(t *testing.T) {
		c := e.client(t)
		before := c.csrf(t)
		r := c.login(t, token)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/feeds" {
			t.Fatalf("%d %q: %.300s", r.status, r.header.Get("Location"), r.body)
		}
		var cookie string
		for _, sc := range r.header.Values("Set-Cookie") {
			if strings.HasPrefix(sc, web.SessionCookie+"=") {
				cookie = sc
			}
		}
		for _, attr := range []string{"HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"} {
			if !strings.Contains(cookie, attr) {
				t.Errorf("cookie %q lacks %s", cookie, attr)
			}
		}
		if strings.Contains(cookie, "Secure") {
			t.Error("Secure cookie over plain HTTP")
		}
		page := c.get(t, "/ui/feeds")
		if page.status != http.StatusOK {
			t.Fatalf("after login: %d", page.status)
		}
		checkPage(t, page)
		if !strings.Contains(page.body, `>Log out</button>`) {
			t.Error("no Log out")
		}
		if after := c.csrf(t); after == before {
			t.Error("the session's CSRF token survived the login (session fixation)")
		}
		r = c.post(t, "/ui/logout", url.Values{}, true)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/login" {
			t.Fatalf("logout: %d %q", r.status, r.header.Get("Location"))
		}
		if c.get(t, "/ui/feeds").status != http.StatusSeeOther {
			t.Error("still logged in after logging out")
		}
	})

	t.Run("no open redirect", func(t *testing.T) {
		for _, tt := range []struct{ next, want string }{
			{"//evil.com", "/ui/feeds"},
			{"https://evil.com", "/ui/feeds"},
			{`/\evil.com`, "/ui/feeds"},
			{"/\t/evil.com", "/ui/feeds"},
			{"javascript:alert(1)", "/ui/feeds"},
			{"/ui/sensors?sensor=a", "/ui/sensors?sensor=a"},
		} {
			c := e.client(t)
			r := c.post(t, "/ui/login", url.Values{"token": {token}, "next": {tt.next}}, true)
			if r.status != http.StatusSeeOther || r.header.Get("Location") != tt.want {
				t.Errorf("next=%q: %d %q, want %q", tt.next, r.status, r.header.Get("Location"), tt.want)
			}
			r = c.get(t, "/ui/login?next="+url.QueryEscape(tt.next))
			if r.status != http.StatusSeeOther || r.header.Get("Location") != tt.want {
				t.Errorf("logged in, GET next=%q: %d %q, want %q", tt.next, r.status, r.header.Get("Location"), tt.want)
			}
		}
	})

	t.Run("API writes", func(t *testing.T) {
		c := e.client(t)
		if r := c.login(t, token); r.status != http.StatusSeeOther {
			t.Fatalf("login: %d", r.status)
		}
		csrf := c.csrf(t)
		body := func(n string) *strings.Reader {
			return strings.NewReader(`{"url": "https://example.org/api-` + n + `.rss"}`)
		}
		json := map[string]string{"Content-Type": "application/json"}
		with := func(k, v string) map[string]string {
			return map[string]string{"Content-Type": "application/json", k: v}
		}
		anon := e.client(t)
		tests := []struct {
			name   string
			c      *client
			header map[string]string
			status int
		}{
			{"session without CSRF header", c, json, http.StatusForbidden},
			{"session with a wrong CSRF header", c, with(web.CSRFHeader, "nope"), http.StatusForbidden},
			{"session with its CSRF header", c, with(web.CSRFHeader, csrf), http.StatusCreated},
			{"bearer token", anon, with("Authorization", "Bearer "+token), http.StatusCreated},
			{"nothing", anon, json, http.StatusUnauthorized},
			{"another session's CSRF token", anon, with(web.CSRFHeader, csrf), http.StatusUnauthorized},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := tt.c.do(t, "POST", "/api/v1/feeds", body(string(rune('a'+i))), tt.header)
				if r.status != tt.status {
					t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
				}
			})
		}
	})

	t.Run("throttled after repeated failures", func(t *testing.T) {
		c := e.client(t)
		for i := range 5 {
			if r := c.login(t, "wrong"); r.status != http.StatusUnauthorized {
				t.Fatalf("attempt %d: %d", i, r.status)
			}
		}
		r := c.login(t, token) // right, but too soon
		if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
			t.Fatalf("status %d, Retry-After %q", r.status, r.header.Get("Retry-After"))
		}
		checkPage(t, r)
		if !strings.Contains(r.body, "Too many failed logins") {
			t.Error("no message")
		}
		e.clock.Add(2 * time.Second)
		if r := c.login(t, token); r.status != http.StatusSeeOther {
			t.Fatalf("after waiting: %d", r.status)
		}
	})
}

// TestCSRF: every UI form and API write from a browser needs the token of
// its session, in both modes.
func TestCSRF(t *testing.T) {
	for _, mode := range []envOptions{{loopback: true}, {token: "tok"}} {
		e := newEnv(t, mode)
		name := "loopback"
		if mode.token != "" {
			name = "token"
		}
		t.Run(name, func(t *testing.T) {
			forms := []struct {
				path string
				form url.Values
			}{
				{"/ui/feeds", url.Values{"url": {"https://example.org/csrf.rss"}}},
				{"/ui/sensors", url.Values{"sensor": {"csrf"}, "value": {"1"}}},
				{"/ui/logout", url.Values{}},
				{"/ui/feeds/1/delete", url.Values{}},
			}
			for _, f := range forms {
				for _, csrf := range []string{"", "forged-token"} {
					c := e.client(t)
					if mode.token != "" {
						if r := c.login(t, mode.token); r.status != http.StatusSeeOther {
							t.Fatalf("login: %d", r.status)
						}
					} else {
						c.csrf(t) // a session
					}
					form := url.Values{}
					for k, v := range f.form {
						form[k] = v
					}
					if csrf != "" {
						form.Set(web.CSRFField, csrf)
					}
					r := c.post(t, f.path, form, false)
					if r.status != http.StatusForbidden {
						t.Errorf("%s with csrf %q: %d, want 403", f.path, csrf, r.status)
					}
				}
			}
			if _, err := e.st.FeedByURL("https://example.org/csrf.rss"); err == nil {
				t.Error("a forged form subscribed")
			}
			if _, err := e.st.Feed(1); err != nil {
				t.Error("a forged form deleted a feed")
			}
		})
	}
}

// TestCrossOrigin: browsers' cross-origin changes are refused everywhere.
func TestCrossOrigin(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	tests := []struct {
		name   string
		path   string
		header map[string]string
		status int
	}{
		{"UI form, cross-site", "/ui/feeds", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"UI form, same-site other origin", "/ui/feeds", map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"UI form, foreign Origin", "/ui/feeds", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"API, cross-site", "/api/v1/feeds", map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"}, http.StatusForbidden},
		{"API, same-origin", "/api/v1/feeds", map[string]string{"Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}, http.StatusCreated},
		{"UI form, same-origin", "/ui/feeds", map[string]string{"Sec-Fetch-Site": "same-origin"}, http.StatusSeeOther},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := e.client(t)
			rawURL := "https://example.org/co-" + string(rune('a'+i)) + ".rss"
			var r response
			if strings.HasPrefix(tt.path, "/api/") {
				r = c.do(t, "POST", tt.path, strings.NewReader(`{"url": "`+rawURL+`"}`), tt.header)
			} else {
				c.hdr = tt.header
				form := url.Values{"url": {rawURL}, web.CSRFField: {c.csrf(t)}}
				h := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
				r = c.do(t, "POST", tt.path, strings.NewReader(form.Encode()), h)
			}
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %.300s", r.status, tt.status, r.body)
			}
		})
	}
}

// TestHostCheck: on loopback, only loopback host names are answered (DNS
// rebinding).
func TestHostCheck(t *testing.T) {
	loop := newEnv(t, envOptions{loopback: true})
	public := newEnv(t, envOptions{token: "tok"})
	tests := []struct {
		name   string
		e      *env
		host   string
		status int
	}{
		{"loopback, rebound name", loop, "evil.example:8080", http.StatusMisdirectedRequest},
		{"loopback, name ending in localhost.evil", loop, "localhost.evil.example", http.StatusMisdirectedRequest},
		{"loopback, private address", loop, "192.168.1.5:8080", http.StatusMisdirectedRequest},
		{"loopback, localhost", loop, "localhost:8080", http.StatusOK},
		{"loopback, sub.localhost", loop, "ui.localhost", http.StatusOK},
		{"loopback, 127.0.0.1", loop, "127.0.0.1:8080", http.StatusOK},
		{"loopback, ::1", loop, "[::1]:8080", http.StatusOK},
		{"public, any name", public, "slogfeed.example.org", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.e.client(t)
			r := c.do(t, "GET", "/api/v1/feeds", nil, map[string]string{"Host": tt.host})
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			if tt.status == http.StatusMisdirectedRequest && !strings.Contains(r.body, "DNS rebinding") {
				t.Errorf("unclear message: %s", r.body)
			}
		})
	}
}
