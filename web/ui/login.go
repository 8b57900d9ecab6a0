package ui

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/slogfeed/slogfeed/web"
)

// loginView is the login page's data.
type loginView struct {
	Next string
}

// loginPage shows the login form (token mode) or sends the browser on.
func (u *UI) loginPage(w http.ResponseWriter, r *http.Request) {
	next := web.SafeRedirect(r.URL.Query().Get("next"))
	if !u.opt.Auth.TokenRequired() || u.opt.Auth.LoggedIn(r) {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	p := u.newPage(w, r, "Log in", "")
	p.Body = loginView{Next: next}
	u.render(w, r, http.StatusOK, "login", p)
}

// login checks the token and opens a session.
func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	next := web.SafeRedirect(r.PostForm.Get("next"))
	err := u.opt.Auth.Login(w, r, r.PostForm.Get("token"))
	var th *web.ThrottledError
	switch {
	case err == nil, errors.Is(err, web.ErrNoLogin):
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	case errors.As(err, &th):
		w.Header().Set("Retry-After", strconv.Itoa(int((th.Wait+time.Second-1)/time.Second)))
		u.loginFailed(w, r, http.StatusTooManyRequests, next,
			"Too many failed logins from your address. Wait "+humanDuration(th.Wait+time.Second-1)+" and try again.")
	case errors.Is(err, web.ErrBadToken):
		u.loginFailed(w, r, http.StatusUnauthorized, next,
			"That token is not this slogfeed's. Use the token given with --token or SLOGFEED_TOKEN, or the one slogfeed printed when it started.")
	default:
		u.internal(w, r, err)
	}
}

// loginFailed shows the login form again with the reason.
func (u *UI) loginFailed(w http.ResponseWriter, r *http.Request, status int, next, msg string) {
	p := u.newPage(w, r, "Log in", "")
	p.Error = msg
	p.Body = loginView{Next: next}
	u.render(w, r, status, "login", p)
}

// logout ends the session.
func (u *UI) logout(w http.ResponseWriter, r *http.Request) {
	u.opt.Auth.Logout(w, r)
	if u.opt.Auth.TokenRequired() {
		http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/ui/feeds", http.StatusSeeOther)
}
