package web

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// IDAuthority mints the authority once and keeps it: later calls, with
// any candidate, get the stored one; nodes starting at once agree.
func TestIDAuthority(t *testing.T) {
	tests := []struct {
		name   string
		stored string   // before the calls
		calls  []string // candidates, called at once
		settle time.Duration
		want   string
	}{
		{"first start mints the host", "", []string{"feeds.example.org"}, 0, "feeds.example.org"},
		{"a later start keeps it", "feeds.example.org", []string{"proxy.example.net"}, 0, "feeds.example.org"},
		{"nodes starting at once agree", "", []string{"node-c.example", "node-a.example", "node-b.example"}, 100 * time.Millisecond, "node-a.example"},
		{"nodes starting later take it", "node-b.example", []string{"node-a.example", "node-c.example"}, 100 * time.Millisecond, "node-b.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := storage.Open(filepath.Join(t.TempDir(), "slogfeed.db"), storage.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if tt.stored != "" {
				if got, err := IDAuthority(t.Context(), st, tt.stored, 0); err != nil || got != tt.stored {
					t.Fatalf("storing %q: %q, %v", tt.stored, got, err)
				}
			}
			got := make([]string, len(tt.calls))
			var wg sync.WaitGroup
			for i, c := range tt.calls {
				wg.Go(func() {
					a, err := IDAuthority(t.Context(), st, c, tt.settle)
					if err != nil {
						t.Error(err)
					}
					got[i] = a
				})
			}
			wg.Wait()
			for i, a := range got {
				if a != tt.want {
					t.Errorf("call with %q: %q, want %q", tt.calls[i], a, tt.want)
				}
			}
			if a, err := IDAuthority(t.Context(), st, "another.example", 0); err != nil || a != tt.want {
				t.Errorf("afterwards: %q, %v, want %q", a, err, tt.want)
			}
		})
	}
}

func TestValidIDAuthority(t *testing.T) {
	for s, ok := range map[string]bool{
		"slog.example.org": true, "localhost": true, "127.0.0.1": true, "feeds@example.org": true, "a-b.c1": true,
		"": false, "::1": false, "-a.example": false, "a-.example": false, "a..b": false, "a b": false,
		"a,b": false, "a:b": false, "@example.org": false, "x@": false, "tag:x": false,
	} {
		if got := ValidIDAuthority(s); got != ok {
			t.Errorf("ValidIDAuthority(%q) = %v, want %v", s, got, ok)
		}
	}
}
