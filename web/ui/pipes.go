package ui

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/slogfeed/slogfeed/transform"
	"github.com/slogfeed/slogfeed/transform/runner"
	"github.com/slogfeed/slogfeed/web"
	"github.com/slogfeed/slogfeed/web/publish"
)

// pipeRow is one line of the pipes list.
type pipeRow struct {
	ID        uint64
	Name      string
	Slug      string
	Trigger   string
	Runs      int64
	LastRun   stamp
	LastError string
	Items     int64
	FeedID    uint64
	Links     []feedLink
}

// pipesView is the pipes list's data.
type pipesView struct {
	Enabled bool
	Pipes   []pipeRow
	Total   int
	Pager
}

// pipesPerPage is how many pipes a page of the pipes list shows.
const pipesPerPage = 100

// builderView is the data of a builder page.
type builderView struct {
	PipeID string // empty for a new pipe
	Pipe   *pipeRow
	// MDPT: the pipe's trigger is mdpt, so the page's note on it shows
	// (the builder shows and hides it as the trigger changes).
	MDPT bool
}

// pipeRowOf summarises a pipe.
func (u *UI) pipeRowOf(info runner.Info) pipeRow {
	row := pipeRow{
		ID: info.ID, Name: pipeName(info.Name), Slug: info.Slug, Trigger: triggerText(info.Pipe.Trigger),
		Runs: info.Runs, LastError: info.LastError, Items: info.Items, FeedID: info.FeedID,
	}
	if row.Name == "" {
		row.Name = info.Slug
	}
	if info.LastRun != nil {
		row.LastRun = newStamp(*info.LastRun, u.now())
	}
	for _, f := range []string{"rss", "atom", "json"} {
		if p, ok := info.Feeds[f]; ok {
			row.Links = append(row.Links, feedLink{Format: f, URL: u.opt.BaseURL + p})
		}
	}
	return row
}

// pipeName is a pipe's name as the UI shows it: the plain text the
// republished feeds show (publish's plain-text fields), its markup removed.
func pipeName(name string) string {
	return publish.PlainTitle(name)
}

// triggerText describes when a pipe runs.
func triggerText(t transform.Trigger) string {
	switch t.On {
	case "", transform.OnUpdate:
		return "on update"
	case transform.OnCron:
		return "cron " + t.Cron
	case transform.OnMDPT:
		// slogfeed serve does not bring input fetches forward (see the
		// README): an mdpt pipe runs as an update pipe does.
		m := "all"
		if t.M > 0 {
			m = strconv.Itoa(t.M)
		}
		return "mdpt (m = " + m + "): runs on every input update, like update; rounds of m inputs are tracked, input fetches are not brought forward"
	}
	return t.On
}

func (u *UI) pipesPage(w http.ResponseWriter, r *http.Request) {
	v := pipesView{Enabled: u.opt.Pipes != nil, Pager: Pager{Label: "Pages of pipes"}}
	if v.Enabled {
		after, ok := u.pageAfter(w, r, "a pipe's")
		if !ok {
			return
		}
		list, next, total, err := web.PipesPage(u.opt.Pipes, after, pipesPerPage)
		if err != nil {
			u.internal(w, r, err)
			return
		}
		for _, info := range list {
			v.Pipes = append(v.Pipes, u.pipeRowOf(info))
		}
		v.Total = total
		if after != 0 {
			v.FirstURL = "/ui/pipes"
			v.PrevURL = pipesPageBefore(u.opt.Pipes.IDs(), after)
		}
		if next != 0 {
			v.NextURL = "/ui/pipes?after=" + strconv.FormatUint(next, 10)
		}
	}
	p := u.newPage(w, r, "Pipes", "pipes")
	p.Body = v
	u.render(w, r, http.StatusOK, "pipes", p)
}

// pipeByPath loads the pipe named by the {id} path value, writing a 404
// page when there is none.
func (u *UI) pipeByPath(w http.ResponseWriter, r *http.Request) (runner.Info, bool) {
	if u.opt.Pipes == nil {
		u.errorPage(w, r, http.StatusNotFound, "Pipes are not enabled on this slogfeed.")
		return runner.Info{}, false
	}
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		u.errorPage(w, r, http.StatusNotFound, "There is no pipe "+r.PathValue("id")+".")
		return runner.Info{}, false
	}
	info, err := u.opt.Pipes.Get(id)
	if errors.Is(err, runner.ErrNotFound) {
		u.errorPage(w, r, http.StatusNotFound, fmt.Sprintf("There is no pipe %d.", id))
		return runner.Info{}, false
	}
	if err != nil {
		u.internal(w, r, err)
		return runner.Info{}, false
	}
	return info, true
}

// builderPage is the chain builder's shell, for a new pipe (/ui/pipes/new)
// or pipe {id}.
func (u *UI) builderPage(w http.ResponseWriter, r *http.Request) {
	v := builderView{}
	title := "New pipe"
	if r.PathValue("id") != "" {
		info, ok := u.pipeByPath(w, r)
		if !ok {
			return
		}
		row := u.pipeRowOf(info)
		v.PipeID, v.Pipe, title = strconv.FormatUint(info.ID, 10), &row, row.Name
		v.MDPT = info.Pipe.Trigger.On == transform.OnMDPT
	} else if u.opt.Pipes == nil {
		u.errorPage(w, r, http.StatusNotFound, "Pipes are not enabled on this slogfeed.")
		return
	}
	p := u.newPage(w, r, title, "pipes")
	p.Body = v
	p.Styles = []string{u.assets.url("builder.css")}
	p.Scripts = []string{u.assets.url("builder.js")}
	u.render(w, r, http.StatusOK, "builder", p)
}

func (u *UI) confirmDeletePipe(w http.ResponseWriter, r *http.Request) {
	info, ok := u.pipeByPath(w, r)
	if !ok {
		return
	}
	row := u.pipeRowOf(info)
	id := strconv.FormatUint(info.ID, 10)
	p := u.newPage(w, r, "Delete "+row.Name, "pipes")
	p.Body = confirmView{
		Question: "Delete the pipe “" + row.Name + "”?",
		Detail:   fmt.Sprintf("Its republished feed /feeds/%s and its %d items are deleted with it. This cannot be undone.", info.Slug, info.Items),
		Action:   "/ui/pipes/" + id + "/delete", Button: "Delete pipe", Cancel: "/ui/pipes",
	}
	u.render(w, r, http.StatusOK, "confirm", p)
}

func (u *UI) deletePipe(w http.ResponseWriter, r *http.Request) {
	info, ok := u.pipeByPath(w, r)
	if !ok {
		return
	}
	name := u.pipeRowOf(info).Name
	err := u.opt.Pipes.Delete(info.ID)
	switch {
	case errors.Is(err, runner.ErrInUse):
		u.redirect(w, r, "/ui/pipes", "error", "The pipe “"+name+"” is read by another pipe: delete or change that one first.")
	case errors.Is(err, runner.ErrNotFound):
		u.redirect(w, r, "/ui/pipes", "ok", "The pipe was already deleted.")
	case err != nil:
		u.internal(w, r, err)
	default:
		u.redirect(w, r, "/ui/pipes", "ok", "Deleted the pipe “"+name+"”.")
	}
}

// pipesPageBefore is the link to the page of the pipes list before the
// one that starts after id after: the pipesPerPage ids before, at most,
// ids ascending.
func pipesPageBefore(ids []uint64, after uint64) string {
	i, found := slices.BinarySearch(ids, after)
	if found {
		i++ // after's own pipe is on the page before
	}
	if i <= pipesPerPage {
		return "/ui/pipes"
	}
	return "/ui/pipes?after=" + strconv.FormatUint(ids[i-pipesPerPage-1], 10)
}

// pipeOfFeed returns the id of the pipe whose output is feed id (0 when
// none is known).
func (u *UI) pipeOfFeed(feedID uint64) uint64 {
	if u.opt.Pipes == nil {
		return 0
	}
	id, _ := u.opt.Pipes.PipeOfFeed(feedID)
	return id
}
