package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/slogfeed/slogfeed/reader/fetcher"
)

// Sign returns the Slogfeed-Signature of body under secret:
// "sha256=" and the hex HMAC-SHA256. Receivers compute the same over the
// raw body and compare in constant time (hmac.Equal).
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// retryDelay is the wait after failed attempt number attempt (1 for the
// first): MinBackoff doubled per earlier failure, at most MaxBackoff,
// drawn between half and all of it by jitter in [0, 1), and at least
// retryAfter (itself capped at MaxBackoff).
func retryDelay(attempt int, retryAfter time.Duration, jitter float64) time.Duration {
	span := MaxBackoff
	if attempt < 20 {
		span = min(MaxBackoff, MinBackoff<<max(attempt-1, 0))
	}
	d := span/2 + time.Duration(float64(span/2)*min(max(jitter, 0), 1))
	if ra := min(retryAfter, MaxBackoff); ra > d {
		d = ra
	}
	return d
}

// parseRetryAfter reads a Retry-After header: seconds, or an HTTP date
// (relative to now). Zero when absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, int64(MaxBackoff/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), MaxBackoff)
	}
	return 0
}

// job is one attempt of a hook's first pending delivery.
type job struct {
	h      *hook
	d      *delivery
	url    string
	secret string
}

// result is how an attempt went.
type result struct {
	status     int
	err        error
	retryAfter time.Duration
	permanent  bool // retrying cannot help
}

// step makes one attempt of every hook's first pending delivery that is
// due, at most maxConcurrent at a time, and waits for them. It returns
// when the next attempt is due (zero: nothing pending) and whether it
// attempted anything (then another delivery may be due at once).
func (s *Service) step(ctx context.Context) (next time.Time, worked bool) {
	now := s.opt.Now()
	var jobs []job
	s.mu.Lock()
	for _, h := range s.hooks {
		if len(h.queue) == 0 || h.busy {
			continue
		}
		d := h.queue[0]
		if d.Next.After(now) {
			if next.IsZero() || d.Next.Before(next) {
				next = d.Next
			}
			continue
		}
		h.busy = true
		jobs = append(jobs, job{h: h, d: d, url: h.rec.Hook.URL, secret: h.rec.Secret})
	}
	s.mu.Unlock()
	if len(jobs) == 0 {
		return next, false
	}
	sem := make(chan struct{}, maxConcurrent)
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res := s.attempt(ctx, j)
			if ctx.Err() != nil {
				// Shutting down: the attempt does not count.
				s.mu.Lock()
				j.h.busy = false
				s.mu.Unlock()
				return
			}
			s.finish(j, res)
		}()
	}
	wg.Wait()
	return time.Time{}, true
}

// attempt POSTs j's delivery once.
func (s *Service) attempt(ctx context.Context, j job) result {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.url, bytes.NewReader(j.d.Body))
	if err != nil {
		return result{err: err, permanent: true}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", fetcher.DefaultUserAgent())
	req.Header.Set("Slogfeed-Event", "items")
	req.Header.Set("Slogfeed-Delivery", j.d.ID)
	req.Header.Set("Slogfeed-Signature", Sign(j.secret, j.d.Body))
	resp, err := s.opt.Client.Do(req)
	if err != nil {
		permanent := errors.Is(err, fetcher.ErrBlocked) || errors.Is(err, fetcher.ErrScheme) || errors.Is(err, fetcher.ErrInvalidURL)
		if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %v", RequestTimeout)
		}
		return result{err: err, permanent: permanent}
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, snippetBytes))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	res := result{status: resp.StatusCode}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return res
	}
	msg := fmt.Sprintf("HTTP %d", resp.StatusCode)
	if t := cleanSnippet(snippet); t != "" {
		msg += ": " + t
	}
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		msg += " (redirects are not followed; give the final URL)"
	case resp.StatusCode == http.StatusGone:
		msg += " (the receiver says the hook is gone)"
		res.permanent = true
	}
	res.err = errors.New(msg)
	res.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), s.opt.Now())
	return res
}

// cleanSnippet makes the start of an answer's body fit for an error
// message: valid UTF-8, one line, no control characters.
func cleanSnippet(b []byte) string {
	s := strings.ToValidUTF8(string(b), "?")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// finish records how j went: the delivery is done, given up, or
// scheduled again.
func (s *Service) finish(j job, res result) {
	now := s.opt.Now().UTC()
	s.mu.Lock()
	defer s.mu.Unlock()
	h, d := j.h, j.d
	h.busy = false
	if s.hooks[h.rec.Hook.ID] != h || !slices.Contains(h.queue, d) {
		return // deleted meanwhile
	}
	d.Attempts++
	st := &h.rec.Hook.Status
	st.LastAttempt, st.LastStatus, st.Attempts = now, res.status, d.Attempts
	done := func() {
		h.queue = slices.DeleteFunc(h.queue, func(x *delivery) bool { return x == d })
		if err := s.st.PluginDelete(Name, d.key); err != nil {
			s.log.Error("webhook: removing a delivery", "hook", h.rec.Hook.ID, "err", err)
		}
	}
	switch {
	case res.err == nil:
		st.Delivered++
		st.LastDelivered, st.LastError = now, ""
		done()
	case res.permanent || d.Attempts >= MaxAttempts:
		st.Failed++
		st.LastError = fmt.Sprintf("delivery %s given up after %s: %v", d.ID, attempts(d.Attempts), res.err)
		s.log.Warn("webhook: delivery given up", "hook", h.rec.Hook.ID, "delivery", d.ID, "attempts", d.Attempts, "err", res.err)
		done()
	default:
		d.Next = now.Add(retryDelay(d.Attempts, res.retryAfter, s.opt.Jitter()))
		d.LastStatus, d.LastError = res.status, res.err.Error()
		st.LastError = fmt.Sprintf("delivery %s attempt %d of %d failed: %v; next attempt at %s", d.ID, d.Attempts, MaxAttempts, res.err, d.Next.Format(time.RFC3339))
		if err := s.saveDelivery(d); err != nil {
			s.log.Error("webhook: storing a delivery", "hook", h.rec.Hook.ID, "err", err)
		}
	}
	if err := s.saveHook(h); err != nil {
		s.log.Error("webhook: storing a hook", "hook", h.rec.Hook.ID, "err", err)
	}
}

// Run implements plugins.Service: it delivers until ctx ends, waking
// when a delivery is queued or the next retry is due.
func (s *Service) Run(ctx context.Context) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next, worked := s.step(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if worked {
			continue
		}
		wait := MaxBackoff
		if !next.IsZero() {
			wait = max(next.Sub(s.opt.Now()), 0)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		case <-timer.C:
		}
	}
}

// attempts writes "1 attempt", "8 attempts".
func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return strconv.Itoa(n) + " attempts"
}
