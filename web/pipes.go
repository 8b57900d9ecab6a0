package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"

	"github.com/slogfeed/slogfeed/transform"
	"github.com/slogfeed/slogfeed/transform/runner"
)

// maxPipeBody caps the body of a request carrying a pipe definition.
const maxPipeBody = 256 << 10

// Pipes is what the API needs of the pipe runner (runner.Runner implements it).
type Pipes interface {
	Create(ctx context.Context, p transform.Pipe) (runner.Info, error)
	Update(ctx context.Context, id uint64, p transform.Pipe) (runner.Info, error)
	Delete(id uint64) error
	Get(id uint64) (runner.Info, error)
	// IDs returns the pipes' ids, ascending, reading nothing.
	IDs() []uint64
	// PipeOfFeed returns the id of the pipe whose output is feed feedID.
	PipeOfFeed(feedID uint64) (uint64, bool)
	// Preview runs p (id 0 and p: an unsaved definition; an id and no nodes: the saved pipe's) from a fresh state on its inputs' newest items, saving nothing.
	Preview(ctx context.Context, p transform.Pipe, id uint64) (*transform.Preview, error)
	RunNow(ctx context.Context, id uint64) (runner.RunResult, error)
	// ReleaseFeed calls remove (the feed's unsubscription) unless a pipe
	// reads feed id (runner.ErrFeedInUse).
	ReleaseFeed(id uint64, remove func() error) error
}

// Unsubscribe removes feed id with agg (its Unsubscribe), unless a pipe
// reads it (runner.ErrFeedInUse); pipes is nil when pipes are off.
func Unsubscribe(agg interface{ Unsubscribe(uint64) error }, pipes Pipes, id uint64) error {
	if pipes == nil {
		return agg.Unsubscribe(id)
	}
	return pipes.ReleaseFeed(id, func() error { return agg.Unsubscribe(id) })
}

var _ Pipes = (*runner.Runner)(nil)

// pipeTriggers are the values of a pipe's trigger.on, as GET /api/v1/operators
// lists them.
var pipeTriggers = []string{transform.OnUpdate, transform.OnMDPT, transform.OnCron, transform.OnManual}

// pipeAPI serves /api/v1/pipes and /api/v1/operators.
//
// Errors of the runner map to statuses so (see fail):
//
//	400  a bad id or body; a definition that is invalid or over a limit,
//	     or whose source names no feed: {"error": ..., "details": [...]}
//	     with one {"node", "op", "field", "error"} per problem
//	404  no such pipe
//	409  the output slug is taken
//	413  a body over 256 KiB
//	415  a body that is not JSON
//	422  a preview or run over its time limit, its byte budget or an
//	     expression's cost limit, or a run whose operator failed on its
//	     items (a division by zero, a WebAssembly trap): {"error": ...,
//	     "details": [...]} names the node and the limit or the failure
//	429  more previews and requested runs than Options.MaxPreviews at
//	     once; Retry-After says when to try again
//	503  the runner is stopping, the request was cancelled, or the store
//	     cannot answer now (a cluster without a quorum; Retry-After)
//	500  anything else (logged; the reply says only "internal error")
type pipeAPI struct {
	pipes Pipes
	log   *slog.Logger
	slots *slots // previews and requested runs in progress
	store any    // tells the errors of a store that cannot answer now (storage.Unavailabler)
}

// slots bounds the previews and requested runs in progress.
type slots struct{ c chan struct{} }

func newSlots(n int) *slots {
	if n <= 0 {
		n = DefaultMaxPreviews
	}
	return &slots{c: make(chan struct{}, n)}
}

// previewRetryAfter is the Retry-After of a 429 for a busy runner, in
// seconds: about what a typical preview takes.
const previewRetryAfter = "2"

// acquire takes a slot or answers 429; release it when it returns true.
func (s *slots) acquire(w http.ResponseWriter) bool {
	select {
	case s.c <- struct{}{}:
		return true
	default:
		w.Header().Set("Retry-After", previewRetryAfter)
		respondError(w, http.StatusTooManyRequests, fmt.Sprintf("%d pipe previews or runs are in progress, the most this server runs at once: try again shortly", cap(s.c)))
		return false
	}
}

func (s *slots) release() { <-s.c }

func (a *pipeAPI) routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/pipes", a.create)
	mux.HandleFunc("GET /api/v1/pipes", a.list)
	mux.HandleFunc("POST /api/v1/pipes/preview", a.previewUnsaved)
	mux.HandleFunc("GET /api/v1/pipes/{id}", a.get)
	mux.HandleFunc("PUT /api/v1/pipes/{id}", a.update)
	mux.HandleFunc("DELETE /api/v1/pipes/{id}", a.remove)
	mux.HandleFunc("POST /api/v1/pipes/{id}/preview", a.previewSaved)
	mux.HandleFunc("POST /api/v1/pipes/{id}/run", a.run)
	mux.HandleFunc("GET /api/v1/operators", a.operators)
}

func (a *pipeAPI) create(w http.ResponseWriter, r *http.Request) {
	def, ok := readPipe(w, r, false)
	if !ok {
		return
	}
	info, err := a.pipes.Create(r.Context(), *def)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/pipes/"+strconv.FormatUint(info.ID, 10))
	respondJSON(w, http.StatusCreated, info)
}

// PipePage is a page of the pipes list: GET /api/v1/pipes.
type PipePage struct {
	Pipes []runner.Info `json:"pipes"`
	// Total counts every pipe.
	Total int `json:"total"`
	// NextCursor, when more pipes follow, is the cursor of the next page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// The pipes list's page sizes.
const (
	defaultPipePage = 100
	maxPipePage     = 1000
)

func (a *pipeAPI) list(w http.ResponseWriter, r *http.Request) {
	limit, ok := queryInt(w, r, "limit", defaultPipePage, 1, maxPipePage)
	if !ok {
		return
	}
	var after uint64
	if c := r.URL.Query().Get("cursor"); c != "" {
		n, err := strconv.ParseUint(c, 10, 64)
		if err != nil {
			respondError(w, http.StatusBadRequest, "cursor is not one this server gave (take next_cursor from the previous page)")
			return
		}
		after = n
	}
	list, next, total, err := PipesPage(a.pipes, after, limit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	page := PipePage{Pipes: list, Total: total}
	if next != 0 {
		page.NextCursor = strconv.FormatUint(next, 10)
	}
	respondJSON(w, http.StatusOK, page)
}

// PipesPage reads the page of ps's pipes after id after: at most limit
// of them, by id, where the next page starts after (0: none follows)
// and how many there are. Only the page's pipes are read (a pipe deleted
// meanwhile is left out, the next page still starting after its id);
// the page is never nil.
func PipesPage(ps Pipes, after uint64, limit int) (page []runner.Info, next uint64, total int, err error) {
	ids := ps.IDs()
	i, found := slices.BinarySearch(ids, after)
	if found {
		i++
	}
	rest := ids[i:]
	if len(rest) > limit {
		rest = rest[:limit]
		next = rest[len(rest)-1]
	}
	page = make([]runner.Info, 0, len(rest))
	for _, id := range rest {
		info, err := ps.Get(id)
		if errors.Is(err, runner.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, 0, 0, err
		}
		page = append(page, info)
	}
	return page, next, len(ids), nil
}

func (a *pipeAPI) get(w http.ResponseWriter, r *http.Request) {
	id, ok := pipeID(w, r)
	if !ok {
		return
	}
	info, err := a.pipes.Get(id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	respondJSON(w, http.StatusOK, info)
}

func (a *pipeAPI) update(w http.ResponseWriter, r *http.Request) {
	id, ok := pipeID(w, r)
	if !ok {
		return
	}
	def, ok := readPipe(w, r, false)
	if !ok {
		return
	}
	info, err := a.pipes.Update(r.Context(), id, *def)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	respondJSON(w, http.StatusOK, info)
}

func (a *pipeAPI) remove(w http.ResponseWriter, r *http.Request) {
	id, ok := pipeID(w, r)
	if !ok {
		return
	}
	if err := a.pipes.Delete(id); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// previewUnsaved previews the definition in the body, as a new pipe.
func (a *pipeAPI) previewUnsaved(w http.ResponseWriter, r *http.Request) {
	def, ok := readPipe(w, r, false)
	if !ok {
		return
	}
	a.preview(w, r, def, 0)
}

// previewSaved previews pipe {id}: its saved definition when the body is
// empty, else the definition in the body (from a fresh state, as every
// preview).
func (a *pipeAPI) previewSaved(w http.ResponseWriter, r *http.Request) {
	id, ok := pipeID(w, r)
	if !ok {
		return
	}
	def, ok := readPipe(w, r, true)
	if !ok {
		return
	}
	if def == nil {
		// No nodes and the id: the runner previews the saved definition
		// as stored (not as the API shows it, its URLs' credentials
		// masked), checked as a stored one is.
		def = &transform.Pipe{}
	}
	a.preview(w, r, def, id)
}

func (a *pipeAPI) preview(w http.ResponseWriter, r *http.Request, def *transform.Pipe, id uint64) {
	if !a.slots.acquire(w) {
		return
	}
	defer a.slots.release()
	pv, err := a.pipes.Preview(r.Context(), *def, id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if pv == nil {
		pv = &transform.Preview{}
	}
	if pv.Nodes == nil {
		pv.Nodes = []transform.NodeOutput{}
	}
	shown := *pv
	shown.Output = plainItems(pv.Output)
	shown.Nodes = make([]transform.NodeOutput, len(pv.Nodes))
	for i, n := range pv.Nodes {
		n.Items = plainItems(n.Items)
		shown.Nodes[i] = n
	}
	respondJSON(w, http.StatusOK, &shown)
}

// run runs pipe {id} now. The route takes no body: one that is not empty
// (white space or {} is) is refused, so that a client sending items or
// a definition, expecting a dry run, is sent to the preview route rather
// than running the pipe.
func (a *pipeAPI) run(w http.ResponseWriter, r *http.Request) {
	id, ok := pipeID(w, r)
	if !ok {
		return
	}
	if !emptyBody(w, r, maxRunBody) {
		respondError(w, http.StatusBadRequest, fmt.Sprintf(
			"POST /api/v1/pipes/%d/run takes no body: it runs the saved pipe now and keeps its output; "+
				"to try the pipe (or a definition sent as the body) on its inputs' newest items without saving anything, POST /api/v1/pipes/%[1]d/preview", id))
		return
	}
	if !a.slots.acquire(w) {
		return
	}
	defer a.slots.release()
	res, err := a.pipes.RunNow(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	respondJSON(w, http.StatusOK, res)
}

// OperatorsView is GET /api/v1/operators: what the chain builder offers.
type OperatorsView struct {
	Operators []transform.OperatorInfo `json:"operators"`
	Fields    []transform.FieldInfo    `json:"fields"`
	Triggers  []string                 `json:"triggers"`
	Formats   []string                 `json:"formats"`
}

func (a *pipeAPI) operators(w http.ResponseWriter, r *http.Request) {
	respondJSON(w, http.StatusOK, OperatorsView{
		Operators: transform.Catalogue(),
		Fields:    transform.Fields,
		Triggers:  pipeTriggers,
		Formats:   transform.Formats,
	})
}

// pipeErrorView is the body of a 400 about a pipe definition.
type pipeErrorView struct {
	Error   string             `json:"error"`
	Details []transform.Detail `json:"details"`
}

// fail writes the response for an error of the runner.
func (a *pipeAPI) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, runner.ErrNotFound):
		respondError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, transform.ErrLimit) && errors.Is(err, transform.ErrCostLimit):
		// An expression whose cost estimate is over the limit: the
		// definition's fault, found before any run.
		respondJSON(w, http.StatusBadRequest, pipeErrorView{Error: err.Error(), Details: detailsOf(err)})
	case errors.Is(err, runner.ErrSlugTaken), errors.Is(err, runner.ErrInUse):
		respondError(w, http.StatusConflict, err.Error())
	case errors.Is(err, transform.ErrTimeLimit), errors.Is(err, transform.ErrCostLimit),
		errors.Is(err, transform.ErrByteLimit), errors.Is(err, context.DeadlineExceeded):
		respondJSON(w, http.StatusUnprocessableEntity, pipeErrorView{Error: err.Error(), Details: detailsOf(err)})
	case errors.Is(err, runner.ErrClosed):
		respondError(w, http.StatusServiceUnavailable, "the pipe runner is stopping; try again")
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads this.
		respondError(w, http.StatusServiceUnavailable, "request cancelled")
	case isUnavailable(a.store, err):
		a.log.Warn("pipes api", "method", r.Method, "path", r.URL.Path, "err", err)
		respondUnavailable(w)
	case errors.Is(err, runner.ErrOutputRefused):
		// The store refused a run's output (an item over its limits):
		// the definition's doing, shown as a node's failure is.
		respondJSON(w, http.StatusUnprocessableEntity, pipeErrorView{Error: err.Error(), Details: detailsOf(err)})
	case failedAtNode(err):
		// The definition's own operator failed on its items (an
		// expression dividing by zero, a WebAssembly trap, a module
		// over its memory or output limit).
		respondJSON(w, http.StatusUnprocessableEntity, pipeErrorView{Error: err.Error(), Details: transform.Details(err)})
	case errors.Is(err, transform.ErrInvalid), errors.Is(err, transform.ErrLimit),
		errors.Is(err, runner.ErrInputNotFound):
		respondJSON(w, http.StatusBadRequest, pipeErrorView{Error: err.Error(), Details: detailsOf(err)})
	default:
		a.log.Error("pipes api", "method", r.Method, "path", r.URL.Path, "err", err)
		respondError(w, http.StatusInternalServerError, "internal error")
	}
}

// detailsOf is transform.Details of err, never nil.
func detailsOf(err error) []transform.Detail {
	if d := transform.Details(err); d != nil {
		return d
	}
	return []transform.Detail{}
}

// failedAtNode reports whether err is a node's failure in a run or a
// preview, other than a panic (a fault of slogfeed's, not of the
// definition).
func failedAtNode(err error) bool {
	var ne *transform.NodeError
	var pe *transform.PanicError
	var def transform.Errors
	var fe *transform.FieldError
	return errors.As(err, &ne) && !errors.As(err, &pe) &&
		!errors.As(err, &def) && !errors.As(err, &fe) // not a definition's error
}

// pipeID reads the {id} path value, writing a 400 when it is not a pipe
// id.
func pipeID(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		respondError(w, http.StatusBadRequest, "pipe id must be a positive integer")
		return 0, false
	}
	return id, true
}

// maxRunBody caps what is read of the body of a requested run, which
// takes none: enough to tell an empty one.
const maxRunBody = 4 << 10

// emptyBody reports whether the body of r is empty: nothing, white space
// or an empty JSON object. It reads at most limit bytes of it; a longer
// body, or one that cannot be read, is not empty.
func emptyBody(w http.ResponseWriter, r *http.Request, limit int64) bool {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		return false
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) >= 2 && raw[0] == '{' && raw[len(raw)-1] == '}' {
		raw = bytes.TrimSpace(raw[1 : len(raw)-1])
	}
	return len(raw) == 0
}

// readPipe reads a pipe definition from the body: a JSON object of at
// most maxPipeBody bytes, decoded strictly (unknown fields and trailing
// data refused; operator configurations are checked by the runner). An
// empty body gives nil when emptyOK, else a 400. It writes the error
// response itself when it fails.
func readPipe(w http.ResponseWriter, r *http.Request, emptyOK bool) (*transform.Pipe, bool) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPipeBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			respondError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", maxPipeBody))
			return nil, false
		}
		respondError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return nil, false
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		if emptyOK {
			return nil, true
		}
		respondError(w, http.StatusBadRequest, "empty body: send a pipe definition (a JSON object)")
		return nil, false
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !isJSONType(ct) {
		respondError(w, http.StatusUnsupportedMediaType, "send application/json")
		return nil, false
	}
	if raw[0] != '{' {
		respondError(w, http.StatusBadRequest, "invalid JSON body: a pipe definition is a JSON object")
		return nil, false
	}
	var def transform.Pipe
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&def); err != nil {
		respondError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		respondError(w, http.StatusBadRequest, "invalid JSON body: data after the pipe definition")
		return nil, false
	}
	return &def, true
}
