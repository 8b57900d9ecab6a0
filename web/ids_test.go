package web

import (
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/slogfeed/slogfeed/storage"
)

// IDAuthority mints the authority once and keeps it: later calls, with
// any candidate, get the stored one; nodes starting at once agree.
func TestIDAuthority(t *testing.T) {
	tests := []struct {
		name   string
		stored string   // before the calls
		calls  []string // candidates, called at once
		want   string   // "": any one of the calls', the same for all
	}{
		{"first start mints the host", "", []string{"feeds.example.org"}, "feeds.example.org"},
		{"a later start keeps it", "feeds.example.org", []string{"proxy.example.net"}, "feeds.example.org"},
		{"nodes starting at once agree", "", []string{"node-c.example", "node-a.example", "node-b.example"}, ""},
		{"nodes starting later take it", "node-b.example", []string{"node-a.example", "node-c.example"}, "node-b.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := storage.Open(filepath.Join(t.TempDir(), "slogfeed.db"), storage.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if tt.stored != "" {
				if got, err := IDAuthority(st, tt.stored); err != nil || got != tt.stored {
					t.Fatalf("storing %q: %q, %v", tt.stored, got, err)
				}
			}
			got := make([]string, len(tt.calls))
			var wg sync.WaitGroup
			for i, c := range tt.calls {
				wg.Go(func() {
					a, err := IDAuthority(st, c)
					if err != nil {
						t.Error(err)
					}
					got[i] = a
				})
			}
			wg.Wait()
			want := tt.want
			if want == "" {
				want = got[0]
				if !slices.Contains(tt.calls, want) {
					t.Errorf("the calls got %q, none of their candidates", want)
				}
			}
			for i, a := range got {
				if a != want {
					t.Errorf("call with %q: %q, want %q", tt.calls[i], a, want)
				}
			}
			if a, err := IDAuthority(st, "another.example"); err != nil || a != want {
				t.Errorf("afterwards: %q, %v, want %q", a, err, want)
			}
		})
	}
	st, err := storage.Open(filepath.Join(t.TempDir(), "slogfeed.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if a, err := IDAuthority(st, ""); err == nil {
		t.Errorf("IDAuthority without a stored authority or a candidate: %q, no error", a)
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
