package aggregator

import (
	"log/slog"
	"sync"
	"time"
)

// failureLog writes the fetch failures to the log at a bounded rate: the
// first failureBurst of each minute at info, the rest at debug, and, when
// a minute held more, one info line saying how many. A host that goes
// down behind thousands of feeds is then a few lines a minute, not one a
// feed; `slogfeed show` and the API keep every feed's error.
type failureLog struct {
	mu         sync.Mutex
	start      time.Time // of the current minute
	n          int       // failures in it
	suppressed int       // of those, written at debug only
}

const failureBurst = 10

// failed logs one fetch failure at now.
func (l *failureLog) failed(log *slog.Logger, now time.Time, msg string, attrs ...any) {
	l.mu.Lock()
	if now.Sub(l.start) >= time.Minute || now.Before(l.start) {
		if l.suppressed > 0 {
			log.Info("more fetches failed", "failures", l.suppressed, "in", now.Sub(l.start).Round(time.Second), "note", "logged at debug level; each feed's error is in its status")
		}
		l.start, l.n, l.suppressed = now, 0, 0
	}
	l.n++
	quiet := l.n > failureBurst
	if quiet {
		l.suppressed++
	}
	l.mu.Unlock()
	if quiet {
		log.Debug(msg, attrs...)
		return
	}
	log.Info(msg, attrs...)
}
