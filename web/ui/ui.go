package ui

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web"
	"github.com/slogfeed/slogfeed/web/feedlist"
)

// ContentSecurityPolicy is sent with every UI response: scripts, styles,
// fonts and connections from this server only, no inline script or style,
// no framing, forms posting only here.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Limits of the UI's forms.
const (
	// maxFormBody bounds the body of an ordinary form.
	maxFormBody = 64 << 10
	// maxUploadBody bounds an OPML upload: the largest document the
	// parser reads, plus room for the other fields.
	maxUploadBody = 10<<20 + 64<<10
	// maxUploadMemory is how much of an upload is kept in memory (the
	// rest goes to a temporary file, removed after the request).
	maxUploadMemory = 1 << 20
	// maxFlash bounds a flash message, in bytes (it travels in a cookie).
	maxFlash = 2000
)

// flashCookie carries the message shown once by the page a form
// redirects to.
const flashCookie = "slogfeed_flash"

// Options configure New.
type Options struct {
	// Store is slogfeed's data file (required).
	Store Store
	// Auth is the server's guard, the same given to web.New (required).
	Auth *web.Auth
	// Aggregator subscribes and unsubscribes feeds and knows their
	// schedules; nil shows the feeds read-only.
	Aggregator web.Aggregator
	// Pipes is the pipe runner; nil disables the pipe pages.
	Pipes web.Pipes
	// Sensors is the sensor store (web.SensorHandler); readings posted
	// from the UI go through it. Nil disables the form.
	Sensors http.Handler
	// BaseURL is the server's public URL ("http://127.0.0.1:8080"),
	// shown in the feed URLs to copy; empty shows paths.
	BaseURL string
	// Logger receives errors (default: discarded).
	Logger *slog.Logger
	// Now returns the current time (default time.Now).
	Now func() time.Time
}

// UI is the web UI's handler. It serves paths under /ui/ (and /ui).
type UI struct {
	opt    Options
	log    *slog.Logger
	now    func() time.Time
	pages  map[string]*template.Template
	assets *assetDir
	static *assetDir
	mux    *http.ServeMux
	bufs   sync.Pool
	// latency caches the feeds' median latencies (see medianLatencies).
	latency latencyCache
	// fleet sums up the feeds page's fleet (its starved count is
	// reused for a while).
	fleet feedlist.Counter
}

// Errors of New.
var (
	// ErrConfig means a required option is missing.
	ErrConfig = errors.New("ui: incomplete options")
)

// New returns the web UI.
func New(opt Options) (*UI, error) {
	if opt.Store == nil || opt.Auth == nil {
		return nil, fmt.Errorf("%w: Store and Auth are required", ErrConfig)
	}
	u := &UI{opt: opt, log: opt.Logger, now: opt.Now}
	if u.log == nil {
		u.log = slog.New(slog.DiscardHandler)
	}
	if u.now == nil {
		u.now = time.Now
	}
	u.opt.BaseURL = strings.TrimRight(opt.BaseURL, "/")
	u.bufs.New = func() any { return new(bytes.Buffer) }
	var err error
	if u.assets, err = newAssetDir("/ui/assets/", "dist/assets"); err != nil {
		return nil, fmt.Errorf("ui: assets: %w", err)
	}
	if u.static, err = newAssetDir("/ui/static/", "static"); err != nil {
		return nil, fmt.Errorf("ui: static files: %w", err)
	}
	if err := u.parseTemplates(); err != nil {
		return nil, err
	}
	u.routes()
	return u, nil
}

// parseTemplates parses every page of templates/ with the layout.
func (u *UI) parseTemplates() error {
	funcs := template.FuncMap{
		"static": func(name string) (string, error) {
			if s := u.static.url(name); s != "" {
				return s, nil
			}
			return "", fmt.Errorf("no static file %q", name)
		},
		"asset": func(name string) (string, error) {
			if s := u.assets.url(name); s != "" {
				return s, nil
			}
			return "", fmt.Errorf("no asset %q", name)
		},
	}
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/parts.html")
	if err != nil {
		return fmt.Errorf("ui: templates: %w", err)
	}
	names, err := fs.Glob(files, "templates/page_*.html")
	if err != nil {
		return fmt.Errorf("ui: templates: %w", err)
	}
	u.pages = make(map[string]*template.Template)
	for _, name := range names {
		t, err := template.Must(base.Clone()).ParseFS(files, name)
		if err != nil {
			return fmt.Errorf("ui: templates: %w", err)
		}
		key := strings.TrimSuffix(strings.TrimPrefix(name, "templates/page_"), ".html")
		u.pages[key] = t
	}
	return nil
}

func (u *UI) routes() {
	m := http.NewServeMux()
	home := func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/feeds", http.StatusSeeOther)
	}
	m.HandleFunc("GET /ui", home)
	m.HandleFunc("GET /ui/{$}", home)
	m.Handle("GET /ui/assets/", u.assets)
	m.Handle("GET /ui/static/", u.static)

	m.HandleFunc("GET /ui/login", u.loginPage)
	m.HandleFunc("POST /ui/login", u.form(maxFormBody, false, u.login))
	m.HandleFunc("POST /ui/logout", u.form(maxFormBody, false, u.logout))

	m.HandleFunc("GET /ui/feeds", u.feedsPage)
	m.HandleFunc("POST /ui/feeds", u.form(maxFormBody, false, u.subscribe))
	m.HandleFunc("POST /ui/feeds/import", u.form(maxUploadBody, true, u.importOPML))
	m.HandleFunc("GET /ui/feeds/{id}", u.feedPage)
	m.HandleFunc("GET /ui/feeds/{id}/delete", u.confirmUnsubscribe)
	m.HandleFunc("POST /ui/feeds/{id}/delete", u.form(maxFormBody, false, u.unsubscribe))

	m.HandleFunc("GET /ui/pipes", u.pipesPage)
	m.HandleFunc("GET /ui/pipes/new", u.builderPage)
	m.HandleFunc("GET /ui/pipes/{id}", u.builderPage)
	m.HandleFunc("GET /ui/pipes/{id}/delete", u.confirmDeletePipe)
	m.HandleFunc("POST /ui/pipes/{id}/delete", u.form(maxFormBody, false, u.deletePipe))

	m.HandleFunc("GET /ui/sensors", u.sensorsPage)
	m.HandleFunc("POST /ui/sensors", u.form(maxFormBody, false, u.postReading))
	m.HandleFunc("GET /ui/sensors/{name}", u.sensorPage)

	m.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		u.errorPage(w, r, http.StatusNotFound, "There is no page at "+r.URL.Path+".")
	})
	u.mux = m
}

// ServeHTTP serves the UI, with its security headers on every response.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	u.mux.ServeHTTP(w, r)
}

// page is what the layout shows around a page's own content.
type page struct {
	Title    string
	Nav      string // "feeds", "pipes" or "sensors": the current section
	CSRF     string
	LoggedIn bool
	Flash    *flash
	Error    string   // an error about the page's form, shown above it
	Styles   []string // further stylesheets (versioned URLs)
	Scripts  []string // module scripts (versioned URLs)
	Body     any      // the page's own data
}

// flash is a one-time message after a redirect.
type flash struct {
	Kind string `json:"k"` // "ok" or "error"
	Msg  string `json:"m"`
}

// newPage starts a page for the request: its session (created when it
// has none, for the CSRF token) and its flash message (consumed).
func (u *UI) newPage(w http.ResponseWriter, r *http.Request, title, nav string) *page {
	s := u.opt.Auth.Session(w, r)
	return &page{Title: title, Nav: nav, CSRF: s.CSRF, LoggedIn: s.LoggedIn, Flash: u.takeFlash(w, r)}
}

// render writes the page with the template name and status.
func (u *UI) render(w http.ResponseWriter, r *http.Request, status int, name string, p *page) {
	t := u.pages[name]
	if t == nil {
		u.log.Error("ui: no template", "name", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	buf := u.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= 4<<20 {
			u.bufs.Put(buf)
		}
	}()
	if err := t.ExecuteTemplate(buf, "layout.html", p); err != nil {
		u.log.Error("ui: rendering", "page", name, "path", r.URL.Path, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", itoa(buf.Len()))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

// errorPage writes a page with only a message.
func (u *UI) errorPage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	p := u.newPage(w, r, http.StatusText(status), "")
	p.Body = msg
	u.render(w, r, status, "error", p)
}

// internal logs err and writes a 500 page, or a 503 page with
// Retry-After when the store says it cannot answer now (a cluster that
// has lost its quorum, a leader being elected).
func (u *UI) internal(w http.ResponseWriter, r *http.Request, err error) {
	if u.unavailable(err) {
		u.log.Warn("ui", "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "5")
		u.errorPage(w, r, http.StatusServiceUnavailable, "The store cannot answer now (a cluster electing a leader, or without a majority of its servers). Try again in a few seconds.")
		return
	}
	u.log.Error("ui", "method", r.Method, "path", r.URL.Path, "err", err)
	u.errorPage(w, r, http.StatusInternalServerError, "Something went wrong on the server; the log says what.")
}

// unavailable reports whether err is the store's "cannot answer now".
func (u *UI) unavailable(err error) bool {
	un, ok := u.opt.Store.(storage.Unavailabler)
	return ok && err != nil && un.Unavailable(err)
}

// form wraps a POST handler: it reads the form within limit bytes
// (multipart when multipart is set) and checks its CSRF token before
// calling fn.
func (u *UI) form(limit int64, multipart bool, fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		var err error
		if multipart {
			err = r.ParseMultipartForm(maxUploadMemory)
		} else {
			err = r.ParseForm()
		}
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			u.errorPage(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("The form is larger than %d KiB.", limit>>10))
			return
		case errors.Is(err, http.ErrNotMultipart):
			u.errorPage(w, r, http.StatusBadRequest, "Send this form as multipart/form-data.")
			return
		case err != nil:
			u.errorPage(w, r, http.StatusBadRequest, "The form could not be read: "+err.Error())
			return
		}
		if !u.opt.Auth.CheckCSRF(r) {
			u.errorPage(w, r, http.StatusForbidden,
				"This form has expired or did not come from this slogfeed. Go back, reload the page and try again.")
			return
		}
		fn(w, r)
	}
}

// redirect answers a form with 303 to path, with a flash message for the
// next page (none when msg is empty).
func (u *UI) redirect(w http.ResponseWriter, r *http.Request, path, kind, msg string) {
	if msg != "" {
		u.setFlash(w, r, kind, msg)
	}
	http.Redirect(w, r, path, http.StatusSeeOther)
}

// setFlash stores a flash message for the next page.
func (u *UI) setFlash(w http.ResponseWriter, r *http.Request, kind, msg string) {
	if len(msg) > maxFlash {
		msg = msg[:maxFlash]
		for !utf8.ValidString(msg) {
			msg = msg[:len(msg)-1]
		}
		msg += "…"
	}
	raw, _ := json.Marshal(flash{Kind: kind, Msg: msg})
	http.SetCookie(w, &http.Cookie{
		Name: flashCookie, Value: base64.RawURLEncoding.EncodeToString(raw), Path: "/ui/",
		MaxAge: 60, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
}

// takeFlash returns the request's flash message, if any, and clears it.
func (u *UI) takeFlash(w http.ResponseWriter, r *http.Request) *flash {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return nil
	}
	http.SetCookie(w, &http.Cookie{
		Name: flashCookie, Value: "", Path: "/ui/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	raw, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return nil
	}
	var f flash
	if json.Unmarshal(raw, &f) != nil || f.Msg == "" || (f.Kind != "ok" && f.Kind != "error") {
		return nil
	}
	return &f
}

// Pager is the links of a page of a list to the pages beside it, as the
// "pager" template draws them.
type Pager struct {
	Label string // names the pager for assistive technology ("Pages of feeds")
	// FirstURL, PrevURL and NextURL lead to the first, the previous and
	// the next page (empty: no such page, the first two on the first
	// page, the last on the last).
	FirstURL, PrevURL, NextURL string
}

// pageAfter reads the ?after= of a request for a page of a list by id (0
// when there is none); one that is not a number is answered with a 400
// page saying it is not whose number (e.g. "a pipe's"), and ok is false.
func (u *UI) pageAfter(w http.ResponseWriter, r *http.Request, whose string) (after uint64, ok bool) {
	a := r.URL.Query().Get("after")
	if a == "" {
		return 0, true
	}
	n, err := strconv.ParseUint(a, 10, 64)
	if err != nil {
		u.errorPage(w, r, http.StatusBadRequest, "The page asked for (after="+a+") is not "+whose+" number.")
		return 0, false
	}
	return n, true
}
