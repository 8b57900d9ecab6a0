package publish

import (
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

func TestDigestText(t *testing.T) {
	from, to := t0.Add(-time.Hour), t0
	tests := []struct {
		name         string
		d            storage.Digest
		title, extra string
	}{
		{"mean min max", storage.Digest{Field: "value", Count: 4, Sum: 86, Min: 20.5, Max: 22.25, From: from, To: to},
			"digest of 4 readings: mean 21.5, min 20.5, max 22.25", ", from 2026-11-21 18:30:00 UTC to 2026-11-21 19:30:00 UTC"},
		{"one reading of another field", storage.Digest{Field: "humidity", Count: 1, Sum: 40, Min: 40, Max: 40, From: from},
			"digest of 1 reading of humidity: mean 40, min 40, max 40", ", from 2026-11-21 18:30:00 UTC"},
		{"empty", storage.Digest{To: to}, "digest of 0 readings", ", until 2026-11-21 19:30:00 UTC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DigestTitle(tt.d); got != tt.title {
				t.Errorf("title %q, want %q", got, tt.title)
			}
			if got := DigestSummary(tt.d); got != tt.title+tt.extra {
				t.Errorf("summary %q, want %q", got, tt.title+tt.extra)
			}
		})
	}
}

// TestDigestItem checks that a digest item without title or summary gets
// readable ones in every format, and that its own are kept.
func TestDigestItem(t *testing.T) {
	d := &storage.Digest{Field: "value", Count: 2, Sum: 3, Min: 1, Max: 2}
	f := Feed{ID: "tag:example.org,2026-11-21:feeds/d", Items: []storage.Item{
		{ID: "d1", Published: t0, Digest: d},
		{ID: "d2", Published: t0, Title: "own title < 5", Summary: "own", Digest: d},
	}}
	p, err := prepare(f)
	if err != nil {
		t.Fatal(err)
	}
	if e := p.entries[0]; e.title != "digest of 2 readings: mean 1.5, min 1, max 2" || e.summary != e.title {
		t.Errorf("entry 0: %q / %q", e.title, e.summary)
	}
	if e := p.entries[1]; e.title != "own title < 5" || e.summary != "own" {
		t.Errorf("entry 1: %q / %q", e.title, e.summary)
	}
	for _, ft := range formats {
		doc, err := ft.render(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), "mean 1.5") {
			t.Errorf("%s: no digest title in\n%s", ft.ext, doc)
		}
	}
}
