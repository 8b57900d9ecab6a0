package schedule

import (
	"errors"
	"testing"
)

func TestByName(t *testing.T) {
	tests := []struct {
		name    string
		want    string // Name() of the policy, "" for an error
		wantErr error
	}{
		{"", "auto", nil},
		{"auto", "auto", nil},
		{"dpt-a", "dpt-a", nil},
		{"dpt-n", "dpt-n", nil},
		{"dpt-l", "dpt-l", nil},
		{"bimodal-dpt-l", "dpt-l", nil},
		{"dpt-l-unimodal", "dpt-l-unimodal", nil},
		{"miniflux", "miniflux", nil},
		{"commafeed", "commafeed", nil},
		{"newsblur", "newsblur", nil},
		{"fixed-15m", "fixed-15m", nil},
		{"fixed-1d", "fixed-24h", nil},
		{"cron:*/5 * * * *", "cron", nil},
		{"fixed-0s", "", ErrUnknownPolicy},
		{"fixed-3d", "", ErrUnknownPolicy},
		{"fixed-soon", "", ErrUnknownPolicy},
		{"cron:not a spec", "", ErrCronSpec},
		{"weekly", "", ErrUnknownPolicy},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ByName(tc.name, 1)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n, ok := p.(interface{ Name() string })
			if !ok || n.Name() != tc.want {
				t.Fatalf("policy %T named %v, want %q", p, n, tc.want)
			}
			if next := p.Next(Observation{At: t0}); next.Before(t0) || next.Sub(t0) > MaxDelay {
				t.Fatalf("next %v out of range", next)
			}
		})
	}
}
