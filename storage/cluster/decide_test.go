package cluster

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

var tm = Timing{TTL: 9 * time.Second, Renew: 3 * time.Second, Margin: 500 * time.Millisecond}

func TestShardOf(t *testing.T) {
	const shards, ids = 64, 12800
	count := make([]int, shards)
	samePipe := 0
	for id := range uint64(ids) {
		s := ShardOf(KindFeed, id, shards)
		if s < 0 || s >= shards {
			t.Fatalf("ShardOf(feed, %d) = %d", id, s)
		}
		if s != ShardOf(KindFeed, id, shards) {
			t.Fatalf("ShardOf(feed, %d) is not stable", id)
		}
		if s == ShardOf(KindPipe, id, shards) {
			samePipe++
		}
		count[s]++
	}
	// 200 per shard on average; a hash this even stays within ±35%.
	for s, c := range count {
		if c < 130 || c > 270 {
			t.Errorf("shard %d has %d of %d IDs (mean 200)", s, c, ids)
		}
	}
	if samePipe > ids/16 {
		t.Errorf("a pipe and a feed of the same ID share a shard %d times of %d", samePipe, ids)
	}
	if got := ShardOf(KindFeed, 7, 1); got != 0 {
		t.Errorf("ShardOf with 1 shard = %d", got)
	}
}

func TestValidNodeName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"n1", true},
		{"host.example.org", true},
		{"node_2-b", true},
		{"", false},
		{".n1", false},
		{"n1.", false},
		{"a..b", false},
		{"-n1", false},
		{"n 1", false},
		{"n*", false},
		{"n>", false},
		{string(make([]byte, 64)), false},
		{"a234567890123456789012345678901234567890123456789012345678901234", false},
		{"a23456789012345678901234567890123456789012345678901234567890123", true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.name), func(t *testing.T) {
			err := ValidNodeName(tt.name)
			if (err == nil) != tt.ok {
				t.Fatalf("ValidNodeName = %v, want ok %v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
		})
	}
}

func TestShare(t *testing.T) {
	tests := []struct{ n, m, floor, ceil int }{
		{64, 1, 64, 64},
		{64, 2, 32, 32},
		{64, 3, 21, 22},
		{64, 4, 16, 16},
		{10, 3, 3, 4},
		{2, 3, 0, 1},
		{64, 0, 64, 64},
	}
	for _, tt := range tests {
		f, c := Share(tt.n, tt.m)
		if f != tt.floor || c != tt.ceil {
			t.Errorf("Share(%d, %d) = %d, %d; want %d, %d", tt.n, tt.m, f, c, tt.floor, tt.ceil)
		}
	}
}

// table builds a view of n shards at now: holders[s] names shard s's
// holder ("" free; "me" this process; "me-old" this node's name from an
// older instance), every lease seen at seen, this process's renewed at
// renewed; members are live (seen at now).
func table(now, seen, renewed time.Time, members []string, holders ...string) View {
	v := View{Self: "me", Instance: "i1", Now: now, Healthy: true,
		Leases: make([]Lease, len(holders)), Renewed: make([]time.Time, len(holders))}
	for s, h := range holders {
		l := Lease{Holder: h, Instance: "x", Revision: uint64(100 + s), Seen: seen}
		switch h {
		case "":
			l.Instance = ""
		case "me":
			l.Instance = "i1"
			v.Renewed[s] = renewed
		case "me-old":
			l.Holder, l.Instance = "me", "i0"
		}
		v.Leases[s] = l
	}
	for _, m := range members {
		v.Members = append(v.Members, Member{Name: m, Instance: "x", Revision: 1, Seen: now})
	}
	return v
}

func rep(h string, n int) []string { return slices.Repeat([]string{h}, n) }

func shardsOf(steps []Step) []int {
	var s []int
	for _, st := range steps {
		s = append(s, st.Shard)
	}
	slices.Sort(s)
	return s
}

func TestDecide(t *testing.T) {
	now := t0.Add(time.Minute)
	fresh := now.Add(-time.Second)
	stale := now.Add(-tm.TTL)
	tests := []struct {
		name                  string
		view                  View
		renew, release, claim int   // how many steps of each
		renewShards           []int // when given, exactly these
		takeovers             int
	}{
		{
			name:  "alone with every shard free claims all",
			view:  table(now, fresh, time.Time{}, nil, rep("", 8)...),
			claim: 8,
		},
		{
			name: "renews only the leases due",
			view: func() View {
				v := table(now, fresh, now.Add(-time.Second), nil, "me", "me", "me")
				v.Renewed[1] = now.Add(-tm.Renew)
				return v
			}(),
			renew:       1,
			renewShards: []int{1},
		},
		{
			name: "stable share: nothing to do",
			view: table(now, fresh, now.Add(-time.Second), []string{"a", "b"},
				slices.Concat(rep("me", 22), rep("a", 21), rep("b", 21))...),
		},
		{
			name:  "stable share with renewals due renews all and nothing else",
			view:  table(now, fresh, now.Add(-tm.Renew), []string{"a", "b"}, slices.Concat(rep("me", 21), rep("a", 22), rep("b", 21))...),
			renew: 21,
		},
		{
			name:      "a lease seen unchanged for a TTL is taken over at its revision",
			view:      table(now, stale, time.Time{}, nil, "gone", "gone"),
			claim:     2,
			takeovers: 2,
		},
		{
			name: "a lease seen unchanged for just under a TTL is kept",
			view: table(now, stale.Add(time.Millisecond), time.Time{}, nil, "gone", "gone"),
		},
		{
			name: "no claims while KV writes fail, renewals still tried",
			view: func() View {
				v := table(now, stale, now.Add(-tm.Renew), nil, "", "gone", "me")
				v.Healthy = false
				return v
			}(),
			renew: 1,
		},
		{
			name:    "a joiner makes the holder give back its surplus",
			view:    table(now, fresh, now.Add(-time.Second), []string{"new"}, rep("me", 8)...),
			release: 4,
		},
		{
			name:    "above the floor with a needy member and nothing free: give back one",
			view:    table(now, fresh, now.Add(-time.Second), []string{"a", "b"}, slices.Concat(rep("me", 4), rep("a", 4), rep("b", 2))...),
			release: 1,
		},
		{
			name: "at the floor with a needy member: leave free shards to it",
			view: table(now, fresh, now.Add(-time.Second), []string{"a", "b"}, slices.Concat(rep("me", 3), rep("a", 4), rep("b", 2), rep("", 1))...),
		},
		{
			name:  "below the floor claims even when others are needy",
			view:  table(now, fresh, now.Add(-time.Second), []string{"a", "b"}, slices.Concat(rep("me", 1), rep("a", 3), rep("b", 2), rep("", 4))...),
			claim: 2,
		},
		{
			name: "a member whose key is stale does not count",
			view: func() View {
				v := table(now, fresh, now.Add(-time.Second), []string{"a"}, slices.Concat(rep("me", 4), rep("", 4))...)
				v.Members[0].Seen = stale
				return v
			}(),
			claim: 4,
		},
		{
			name:      "this node's lease from an older instance expires like any other",
			view:      table(now, stale, time.Time{}, nil, "me-old", ""),
			claim:     2,
			takeovers: 1,
		},
		{
			name: "this node's lease from an older instance is not renewed before expiry",
			view: table(now, fresh, time.Time{}, nil, "me-old", "me-old"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(tt.view, tm)
			if len(p.Renew) != tt.renew || len(p.Release) != tt.release || len(p.Claim) != tt.claim {
				t.Fatalf("plan renew %v release %v claim %v; want %d, %d, %d",
					shardsOf(p.Renew), shardsOf(p.Release), shardsOf(p.Claim), tt.renew, tt.release, tt.claim)
			}
			if tt.renewShards != nil && !slices.Equal(shardsOf(p.Renew), tt.renewShards) {
				t.Errorf("renew %v, want %v", shardsOf(p.Renew), tt.renewShards)
			}
			takeovers := 0
			for _, st := range slices.Concat(p.Renew, p.Release, p.Claim) {
				if want := tt.view.Leases[st.Shard].Revision; st.Revision != want {
					t.Errorf("step on shard %d at revision %d, lease is at %d", st.Shard, st.Revision, want)
				}
				if st.Takeover {
					takeovers++
				}
			}
			if takeovers != tt.takeovers {
				t.Errorf("%d takeovers, want %d", takeovers, tt.takeovers)
			}
			for _, st := range p.Release {
				if slices.ContainsFunc(p.Renew, func(r Step) bool { return r.Shard == st.Shard }) {
					t.Errorf("shard %d both renewed and released", st.Shard)
				}
			}
			if p.Empty() != (tt.renew+tt.release+tt.claim == 0) {
				t.Errorf("Empty() = %v", p.Empty())
			}
		})
	}
}

// TestDecidePreferenceSpreadsClaims: nodes starting at once with every
// shard free ask for mostly different shards.
func TestDecidePreferenceSpreadsClaims(t *testing.T) {
	asked := map[int]int{}
	for _, name := range []string{"n1", "n2", "n3"} {
		v := table(t0, t0, time.Time{}, []string{"n1", "n2", "n3"}, rep("", 63)...)
		v.Self = name
		for _, st := range Decide(v, tm).Claim {
			asked[st.Shard]++
		}
	}
	contested := 0
	for _, c := range asked {
		if c > 1 {
			contested++
		}
	}
	if len(asked) < 40 || contested > 20 {
		t.Errorf("3 nodes asked for %d distinct shards, %d contested", len(asked), contested)
	}
}

func TestOwned(t *testing.T) {
	v := table(t0.Add(time.Minute), t0, t0.Add(time.Minute-tm.TTL+tm.Margin+time.Millisecond), nil, "me", "me", "a", "me-old", "")
	v.Renewed[1] = t0.Add(time.Minute - tm.TTL + tm.Margin) // lapsed exactly now
	got := Owned(v, tm)
	if want := []bool{true, false, false, false, false}; !slices.Equal(got, want) {
		t.Fatalf("Owned = %v, want %v", got, want)
	}
}

// TestLapsed: a lease of this process renewed TTL−Margin ago or earlier
// is lapsed; one renewed since, one whose renewal was forgotten (refused,
// released), and another process's are not.
func TestLapsed(t *testing.T) {
	now := t0.Add(time.Minute)
	v := table(now, t0, t0, nil, "me", "me", "me", "a", "me-old")
	v.Renewed[0] = now.Add(-tm.TTL + tm.Margin + time.Millisecond) // owned
	v.Renewed[1] = now.Add(-tm.TTL + tm.Margin)                    // lapsed exactly now
	v.Renewed[2] = time.Time{}                                     // refused or released
	v.Renewed[3] = now.Add(-time.Hour)
	v.Renewed[4] = now.Add(-time.Hour)
	got := Lapsed(v, tm)
	if want := []bool{false, true, false, false, false}; !slices.Equal(got, want) {
		t.Fatalf("Lapsed = %v, want %v", got, want)
	}
	for s, o := range Owned(v, tm) {
		if o && got[s] {
			t.Errorf("shard %d both owned and lapsed", s)
		}
	}
}

func TestResumeSeen(t *testing.T) {
	lost := t0.Add(time.Minute)
	back := lost.Add(tm.TTL)  // a long outage: a re-election's second round
	grace := tm.ResumeGrace() // a live holder's time to renew after back
	if grace <= 0 || grace >= tm.Renew {
		t.Fatalf("ResumeGrace = %s, want between 0 and Renew", grace)
	}
	tests := []struct {
		name       string
		seen, back time.Time
		want       time.Time
	}{
		{"renewed just before a long outage: expires grace after it", lost.Add(-time.Second), back, back.Add(grace - tm.TTL)},
		{"seen during the outage, after the grace point: keeps its age", lost.Add(grace + time.Second), back, lost.Add(grace + time.Second)},
		{"seen early in a long outage: expires grace after it", lost.Add(time.Second), lost.Add(tm.TTL + time.Second), lost.Add(time.Second + grace)},
		{"one tick short of expiry at the outage: still saved", lost.Add(-tm.TTL + time.Millisecond), back, back.Add(grace - tm.TTL)},
		{"short outage: keeps its age", lost.Add(-time.Second), lost.Add(time.Second), lost.Add(-time.Second)},
		{"seen after the grace point: unchanged", back.Add(-time.Second), back, back.Add(-time.Second)},
		{"old observation, short outage: expires grace after it", lost.Add(-tm.TTL + tm.Renew), lost.Add(tm.Renew), lost.Add(tm.Renew + grace - tm.TTL)},
		{"expired when the outage began: stays expired", lost.Add(-tm.TTL), back, lost.Add(-tm.TTL)},
		{"long dead: stays dead", t0, back, t0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ResumeSeen(tt.seen, lost, tt.back, tm); !got.Equal(tt.want) {
				t.Fatalf("ResumeSeen = %s, want %s", got.Sub(t0), tt.want.Sub(t0))
			}
			if got := ResumeSeen(tt.seen, lost, tt.back, tm); got.Before(tt.seen) {
				t.Fatalf("ResumeSeen moved the observation back, to %s", got.Sub(t0))
			}
		})
	}
}

func TestNextExpiry(t *testing.T) {
	now := t0.Add(time.Minute)
	tests := []struct {
		name string
		view func() View
		want time.Time // zero: nothing expires
	}{
		{"only this process's leases and no members", func() View {
			return table(now, now.Add(-time.Second), now, nil, "me", "me", "")
		}, time.Time{}},
		{"another holder's lease: TTL after it was seen", func() View {
			return table(now, now.Add(-2*time.Second), now, nil, "me", "a", "")
		}, now.Add(tm.TTL - 2*time.Second)},
		{"this node's name from an older instance counts as another holder", func() View {
			return table(now, now.Add(-5*time.Second), now, nil, "me-old")
		}, now.Add(tm.TTL - 5*time.Second)},
		{"the earliest of leases and member keys", func() View {
			v := table(now, now.Add(-2*time.Second), now, []string{"a", "b"}, "a", "b")
			v.Leases[1].Seen = now.Add(-4 * time.Second)
			v.Members[0].Seen = now.Add(-3 * time.Second)
			return v
		}, now.Add(tm.TTL - 4*time.Second)},
		{"a member key this node saw longest ago goes first", func() View {
			v := table(now, now, now, []string{"a"}, "a")
			v.Members[0].Seen = now.Add(-8 * time.Second)
			return v
		}, now.Add(tm.TTL - 8*time.Second)},
		{"this node's own member key never expires for it", func() View {
			v := table(now, now, now, []string{"me"}, "me")
			v.Members[0].Seen = now.Add(-8 * time.Second)
			return v
		}, time.Time{}},
		{"already expired: the next one after now", func() View {
			v := table(now, now.Add(-tm.TTL), now, nil, "a", "b")
			v.Leases[1].Seen = now.Add(-time.Second)
			return v
		}, now.Add(tm.TTL - time.Second)},
		{"expiring exactly now is not after now", func() View {
			return table(now, now.Add(-tm.TTL), now, nil, "a")
		}, time.Time{}},
		{"writes failing: nothing expires", func() View {
			v := table(now, now.Add(-2*time.Second), now, []string{"a"}, "a")
			v.Healthy = false
			return v
		}, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.view()
			got := NextExpiry(v, tm)
			if !got.Equal(tt.want) {
				t.Fatalf("NextExpiry = %v, want %v", got, tt.want)
			}
			if got.IsZero() {
				return
			}
			// Decide's plan may change at got and at no earlier tick.
			before := v
			before.Now = got.Add(-time.Millisecond)
			at := v
			at.Now = got
			if expiredCount(before) == expiredCount(at) {
				t.Fatalf("nothing expires at %v", got.Sub(now))
			}
		})
	}
}

// expiredCount counts the leases and member keys v sees as expired.
func expiredCount(v View) int {
	n := 0
	for _, l := range v.Leases {
		if v.expired(l, tm) {
			n++
		}
	}
	return n + len(v.Members) + 1 - len(v.Live(tm))
}

func TestEverythingOwnsAll(t *testing.T) {
	for _, id := range []uint64{0, 1, 1 << 63} {
		if !Everything.OwnsFeed(id) || !Everything.OwnsPipe(id) {
			t.Fatalf("Everything does not own %d", id)
		}
	}
	select {
	case <-Everything.Changed():
		t.Fatal("Everything's answers changed")
	default:
	}
}

func TestForgotten(t *testing.T) {
	now := t0.Add(2 * time.Hour)
	v := View{Self: "me", Now: now, Healthy: true, Members: []Member{
		{Name: "me", Seen: t0},
		{Name: "gone", Seen: now.Add(-time.Hour)},
		{Name: "b-gone-long", Seen: t0},
		{Name: "recent", Seen: now.Add(-time.Hour + time.Second)},
	}}
	got := Forgotten(v, time.Hour)
	if len(got) != 2 || got[0].Name != "b-gone-long" || got[1].Name != "gone" {
		t.Fatalf("Forgotten = %+v", got)
	}
	v.Healthy = false
	if got := Forgotten(v, time.Hour); got != nil {
		t.Fatalf("Forgotten while writes fail = %+v", got)
	}
}
