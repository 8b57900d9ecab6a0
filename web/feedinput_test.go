package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/slogfeed/slogfeed/storage"
)

// A feed a pipe reads is not deleted through the API (409 naming the
// pipe); once the pipe is gone, it is.
func TestDeleteFeedAPipeReads(t *testing.T) {
	e := newPlainEnv(t)
	do := func(method, path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+plainToken)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		return rec
	}
	f := storage.Feed{Kind: storage.KindSensor, Slug: "lab-1", Title: "lab-1", Policy: "auto"}
	if err := e.st.CreateFeed(&f); err != nil {
		t.Fatal(err)
	}
	rec := do("POST", "/api/v1/pipes", `{"nodes":[{"id":"a","op":"source","config":{"feed":"sensor/lab-1"}}],"output":{"slug":"lab-copy"}}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("pipe: %d %s", rec.Code, rec.Body)
	}
	path := fmt.Sprintf("/api/v1/feeds/%d", f.ID)
	if rec := do("DELETE", path, ""); rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), `is an input of a pipe (pipe \"lab-copy\" reads it): take it out`) {
		t.Fatalf("deleting a pipe's input: %d %s", rec.Code, rec.Body)
	}
	if _, err := e.st.Feed(f.ID); err != nil {
		t.Fatalf("the input is gone after a refused delete: %v", err)
	}
	if rec := do("DELETE", "/api/v1/pipes/1", ""); rec.Code != http.StatusNoContent {
		t.Fatalf("deleting the pipe: %d %s", rec.Code, rec.Body)
	}
	if rec := do("DELETE", path, ""); rec.Code != http.StatusNoContent {
		t.Fatalf("deleting a feed no pipe reads: %d %s", rec.Code, rec.Body)
	}
}
