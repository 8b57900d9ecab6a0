package aggregator

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A burst of fetch failures is a few lines at info: the first
// failureBurst of a minute, then one line counting the others; each is
// still written at debug.
func TestFailureLogBounded(t *testing.T) {
	var info, debug bytes.Buffer
	at := func(level slog.Level, b *bytes.Buffer) *slog.Logger {
		return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: level}))
	}
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	var l, all failureLog
	for i := range 1000 {
		now := t0.Add(time.Duration(i) * 20 * time.Millisecond) // 20 s
		l.failed(at(slog.LevelInfo, &info), now, "fetch failed", "feed", i)
		all.failed(at(slog.LevelDebug, &debug), now, "fetch failed", "feed", i)
	}
	// A minute on, the next failure says how many went unwritten.
	l.failed(at(slog.LevelInfo, &info), t0.Add(time.Minute), "fetch failed", "feed", 1000)
	lines := strings.Split(strings.TrimSpace(info.String()), "\n")
	if len(lines) != failureBurst+2 {
		t.Errorf("%d lines at info, want %d:\n%s", len(lines), failureBurst+2, info.String())
	}
	if !strings.Contains(info.String(), "failures=990") {
		t.Errorf("no count of the failures not written:\n%s", info.String())
	}
	if n := strings.Count(debug.String(), "fetch failed"); n != 1000 {
		t.Errorf("%d failures at debug, want every one (1000)", n)
	}
}
