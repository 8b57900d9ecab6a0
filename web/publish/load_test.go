package publish

import (
	"sync"
	"testing"
	"time"
)

func TestLoad(t *testing.T) {
	base, per, maxD := 2*time.Second, 6*time.Second, 20*time.Second
	// With perRPS = 6 s and a 60 s window, every request adds 100 ms.
	step := per / 60
	tests := []struct {
		name string
		run  func(l *Load) time.Duration
		want time.Duration
	}{
		{"one request", func(l *Load) time.Duration { return l.Hit("a", t0) }, base + step},
		{"ten in the window", func(l *Load) time.Duration {
			var d time.Duration
			for i := range 10 {
				d = l.Hit("a", t0.Add(time.Duration(i)*5*time.Second))
			}
			return d
		}, base + 10*step},
		{"old requests slide out", func(l *Load) time.Duration {
			for i := range 10 {
				l.Hit("a", t0.Add(time.Duration(i)*time.Second))
			}
			return l.Hit("a", t0.Add(65*time.Second)) // the first 6 have left
		}, base + 5*step},
		{"all slide out after a long pause", func(l *Load) time.Duration {
			for range 50 {
				l.Hit("a", t0)
			}
			return l.Hit("a", t0.Add(time.Hour))
		}, base + step},
		{"keys are independent", func(l *Load) time.Duration {
			for range 30 {
				l.Hit("a", t0)
			}
			return l.Hit("b", t0)
		}, base + step},
		{"bounded", func(l *Load) time.Duration {
			var d time.Duration
			for range 100000 {
				d = l.Hit("a", t0)
			}
			return d
		}, maxD},
		{"clock steps back", func(l *Load) time.Duration {
			l.Hit("a", t0)
			return l.Hit("a", t0.Add(-10*time.Minute))
		}, base + 2*step},
		{"before 1970", func(l *Load) time.Duration {
			l.Hit("a", time.Unix(-3601, 0))
			return l.Hit("a", time.Unix(-3600, 0))
		}, base + 2*step},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewLoad(base, per, maxD)
			if got := tt.run(l); got != tt.want {
				t.Errorf("desync = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLoadBounds(t *testing.T) {
	l := NewLoad(5*time.Second, -time.Second, time.Second) // max below base, negative growth
	if d := l.Hit("a", t0); d != 5*time.Second {
		t.Errorf("desync = %v, want 5s", d)
	}
	if d := NewLoad(0, 0, 0).Hit("a", t0); d != 0 {
		t.Errorf("desync = %v, want 0", d)
	}
}

func TestLoadForgetsIdleKeys(t *testing.T) {
	l := NewLoad(time.Second, time.Second, time.Minute)
	for i := range 100 {
		l.Hit(string(rune('a'+i%26))+string(rune('0'+i/26)), t0)
	}
	l.Hit("late", t0.Add(2*LoadWindow))
	if n := l.Keys(); n != 1 {
		t.Errorf("%d keys tracked, want 1", n)
	}
}

func TestLoadConcurrent(t *testing.T) {
	l := NewLoad(0, 60*time.Second, time.Hour) // one request: +1 s
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				l.Hit([]string{"a", "b"}[g%2], t0.Add(time.Duration(i)*100*time.Millisecond))
			}
		}()
	}
	wg.Wait()
	if d := l.Hit("a", t0.Add(10*time.Second)); d != 401*time.Second {
		t.Errorf("desync = %v, want 401s (400 earlier requests and this one)", d)
	}
}
